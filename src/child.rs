//! Running a program from the daemon: the one way a child process is made.
//!
//! Owns [`harden`] (what a child inherits) and [`run`] (how long it may run and
//! how much it may say). The daemon runs programs only on the user's side — git
//! on the durable repository the user imported from — never anything found in an
//! agent's tree (docs/design.md "Threat model": "the daemon executes nothing from
//! an agent's tree").
//!
//! Invariants, for every child:
//! - its environment is built, not inherited: `env_clear` and then only the
//!   names of [`ALLOWED_ENV`] that the daemon has, plus what the caller sets
//!   (credentials and every other variable of the daemon never reach it);
//! - it inherits no descriptor but 0, 1 and 2: every other one is marked
//!   close-on-exec between fork and exec (`close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`,
//!   a loop of `fcntl` where the kernel lacks it);
//! - it leads a process group of its own, and [`run`] kills that whole group at
//!   the deadline or when an output passes its cap (then the answer is an error,
//!   never a truncated output taken for a whole one);
//! - nothing of it is buffered without a bound: stdout and stderr are read up to
//!   their caps by two threads while the caller feeds stdin.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use crate::error::{Error, Result};

/// The daemon's variables a child may see (when the daemon has them). Nothing
/// here is a secret: the search path, the identity git writes commits with, the
/// time zone, where the user's git configuration lives.
pub const ALLOWED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "EMAIL",
    "TZ",
    "XDG_CONFIG_HOME",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
];

/// Bounds of one run.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Wall time from spawn; the process group is killed then.
    pub timeout: Duration,
    /// Largest stdout kept; more kills the group and fails the run.
    pub max_stdout: usize,
    /// Largest stderr kept; more is read and dropped (an error message is short).
    pub max_stderr: usize,
}

impl Limits {
    /// A command answering a short question (a line or a few).
    pub const SHORT: Limits = Limits {
        timeout: Duration::from_secs(60),
        max_stdout: 1 << 20,
        max_stderr: 64 << 10,
    };
    /// A command listing a repository (a tree, a diff, objects).
    pub const LISTING: Limits = Limits {
        timeout: Duration::from_secs(600),
        max_stdout: 512 << 20,
        max_stderr: 64 << 10,
    };
}

/// Make `cmd` a hardened child: a built environment (see [`ALLOWED_ENV`]), no
/// inherited descriptors, a process group of its own, the descriptor limit the
/// daemon was started with (`crate::fdlimit`), stdin from `/dev/null` unless the
/// caller pipes it.
pub fn harden(cmd: &mut Command) {
    cmd.env_clear();
    for name in ALLOWED_ENV {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    cmd.stdin(Stdio::null());
    // SAFETY: only async-signal-safe calls (setpgid, close_range, fcntl,
    // getrlimit, setrlimit) between fork and exec; no allocation.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            cloexec_from(3);
            // The descriptor limit the daemon was started with, not the one it
            // raised itself to.
            crate::fdlimit::restore_in_child();
            Ok(())
        });
    }
}

/// Mark every descriptor from `first` up close-on-exec. Async-signal-safe.
fn cloexec_from(first: u32) {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        return;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 16) as i32
    } else {
        1024
    };
    for fd in first as i32..max {
        // SAFETY: fcntl on a descriptor that may not exist only fails (EBADF).
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

/// Mark every descriptor of this process from 3 up close-on-exec: what the
/// daemon inherited from whoever started it never reaches a child, whatever
/// spawns it. Called once at the daemon's start.
pub fn seal_inherited_descriptors() {
    cloexec_from(3);
}

/// Why a run was stopped.
const RUNNING: u8 = 0;
const TIMED_OUT: u8 = 1;
const TOO_LOUD: u8 = 2;

/// Run hardened `cmd` (see [`harden`]; the caller sets its uid, arguments and
/// extra variables) within `limits`, `feed` writing its stdin from this thread
/// while two threads read its output. `what` names it in errors.
pub fn run(
    mut cmd: Command,
    what: &str,
    limits: Limits,
    feed: &mut dyn FnMut(&mut ChildStdin) -> Result<()>,
) -> Result<Output> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| Error::io(what, e))?;
    let pid = child.id() as i32;
    let stopped = Arc::new(AtomicU8::new(RUNNING));
    let kill = {
        let stopped = Arc::clone(&stopped);
        move |why: u8| {
            if stopped
                .compare_exchange(RUNNING, why, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // SAFETY: a signal to the child's own process group; the child is
                // not reaped before the watchdog has stopped (below), so the
                // group id cannot name anything else.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
        }
    };
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let kill = kill.clone();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stop_rx.recv_timeout(limits.timeout)
            {
                kill(TIMED_OUT);
            }
        })
    };
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let reader = |mut r: Box<dyn Read + Send>, cap: usize, fail: bool| {
        let kill = kill.clone();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 64 << 10];
            loop {
                match r.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = cap.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                        if n > room && fail {
                            kill(TOO_LOUD);
                            break;
                        }
                    }
                }
            }
            kept
        })
    };
    let out_t = reader(Box::new(out), limits.max_stdout, true);
    let err_t = reader(Box::new(err), limits.max_stderr, false);
    let mut stdin = child.stdin.take().expect("piped");
    let fed = feed(&mut stdin);
    drop(stdin);
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    wait_unreaped(pid);
    let _ = stop_tx.send(());
    let _ = watchdog.join();
    let status = child.wait().map_err(|e| Error::io(what, e))?;
    match stopped.load(Ordering::SeqCst) {
        TIMED_OUT => {
            return Err(Error::io(
                what,
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "{what} did not finish within {} s: killed",
                        limits.timeout.as_secs()
                    ),
                ),
            ));
        }
        TOO_LOUD => {
            return Err(Error::io(
                what,
                std::io::Error::other(format!(
                    "{what} wrote more than {} bytes: killed",
                    limits.max_stdout
                )),
            ));
        }
        _ => {}
    }
    // A write to a child that exited early (it did not need all of stdin) is
    // not the run's failure: its status says how it went. Any other failure of
    // the feed (a chunk that does not read) is.
    match fed {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(e),
        Ok(()) => {}
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// Wait until child `pid` has exited, without reaping it (`WNOWAIT`): its pid
/// and group id stay its own until `Child::wait`.
fn wait_unreaped(pid: i32) {
    loop {
        // SAFETY: a zeroed siginfo is a valid out-buffer for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child with a valid out-pointer.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// Feed `input` whole (the common case of [`run`]'s `feed`).
pub fn input(data: &[u8]) -> impl FnMut(&mut ChildStdin) -> Result<()> + '_ {
    move |w| {
        w.write_all(data)
            .map_err(|e| Error::io(OsStr::new("stdin"), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        harden(&mut c);
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn the_environment_is_built_not_inherited() {
        // SAFETY: test-only; no other test of this binary reads this name.
        unsafe { std::env::set_var("TREEFORK_CHILD_CANARY", "secret") };
        let o = run(sh("env"), "sh", Limits::SHORT, &mut input(b"")).unwrap();
        let env = String::from_utf8_lossy(&o.stdout);
        assert!(!env.contains("TREEFORK_CHILD_CANARY"), "{env}");
        assert!(env.lines().all(|l| {
            let name = l.split('=').next().unwrap_or("");
            ALLOWED_ENV.contains(&name) || ["PWD", "SHLVL", "_"].contains(&name)
        }));
    }

    #[test]
    fn no_descriptor_but_the_standard_ones_is_inherited() {
        let f = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsRawFd;
        // An inheritable copy (no FD_CLOEXEC, as a descriptor the daemon
        // inherited would be), numbered high so `ls`'s own cannot take its number.
        // SAFETY: F_DUPFD on a descriptor we own; the copy is closed below.
        let raw = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_DUPFD, 200) };
        assert!(raw >= 200);
        let o = run(sh("ls /proc/self/fd"), "sh", Limits::SHORT, &mut input(b"")).unwrap();
        let fds: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        // 0, 1, 2 and the directory `ls` itself opened.
        assert!(!fds.contains(&raw.to_string()), "{fds:?}");
        assert!(fds.len() <= 4, "{fds:?}");
        // SAFETY: closes the copy made above.
        unsafe { libc::close(raw) };
    }

    #[test]
    fn a_slow_child_and_its_group_are_killed_at_the_deadline() {
        let lim = Limits {
            timeout: Duration::from_millis(300),
            ..Limits::SHORT
        };
        let t = std::time::Instant::now();
        // The background sleep holds stdout open: the group kill ends it too.
        let e = run(sh("sleep 30 & sleep 30"), "sh", lim, &mut input(b"")).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(10));
        assert!(e.to_string().contains("did not finish within"), "{e}");
    }

    #[test]
    fn a_loud_child_is_killed_at_its_cap() {
        let lim = Limits {
            max_stdout: 1 << 20,
            ..Limits::SHORT
        };
        let e = run(sh("yes"), "sh", lim, &mut input(b"")).unwrap_err();
        assert!(e.to_string().contains("wrote more than"), "{e}");
        // Stderr past its cap is dropped, not fatal.
        let lim = Limits {
            max_stderr: 1000,
            ..Limits::SHORT
        };
        let o = run(
            sh("head -c 100000 /dev/zero >&2; echo ok"),
            "sh",
            lim,
            &mut input(b""),
        )
        .unwrap();
        assert_eq!(o.stderr.len(), 1000);
        assert_eq!(o.stdout, b"ok\n");
    }

    #[test]
    fn stdin_is_fed_while_output_is_read() {
        let data = vec![b'x'; 4 << 20];
        let o = run(sh("cat"), "sh", Limits::LISTING, &mut input(&data)).unwrap();
        assert_eq!(o.stdout.len(), data.len());
        // A child that stops reading early is not an error of the run.
        let o = run(
            sh("head -c 1 >/dev/null"),
            "sh",
            Limits::SHORT,
            &mut input(&data),
        )
        .unwrap();
        assert!(o.status.success());
    }
}
