//! Running one command as a child process: the reusable core of `exec` (and of
//! `experiment`, which runs several at once, one [`run`] per thread), for every
//! client that runs commands (the CLI, the MCP server). It runs in the client's
//! process, never in the daemon; reporting a run to the daemon is
//! `crate::verbs::exec_report`'s.
//!
//! Owns: spawning ([`Spec`]: argv, cwd, environment overrides, optionally a
//! private mount namespace with a fork bound over the workspace: see
//! `crate::command::place`), passing the
//! child's stdout and stderr through unchanged ([`Mode::Tee`]) or only capturing
//! them ([`Mode::Capture`]), capturing each stream up to a cap with a truncated
//! flag, a timeout that stops the child's whole process group, forwarding SIGINT,
//! SIGTERM and SIGHUP received by this process to the running children, and the
//! result ([`RunResult`]: exit code or signal, duration, outputs, flags, error).
//!
//! API (stable; other packages build on it):
//! ```ignore
//! let spec = Spec::new(argv).cwd(dir).env("K", "V").mode(Mode::Capture)
//!     .capture_limit(1 << 20).timeout(Some(Duration::from_secs(60)));
//! let r: RunResult = runner::run(&spec);
//! std::process::exit(r.status());
//! ```
//!
//! Behaviour and invariants:
//! - A command that cannot start is a result, not a panic or an `Err`: `error` says
//!   why, `status()` is 127 (not found) or 126 (not executable or other).
//! - With a timeout (or [`Spec::own_group`]) the child leads its own process
//!   group: at the deadline the group gets SIGTERM, and SIGKILL 1 s later if any
//!   member is left, so nothing the command started outlives the timeout. Signals
//!   this process receives are forwarded to the group. When the child gets its
//!   own group while this process owns the terminal, the terminal's foreground
//!   is handed to the child's group and taken back after, as a shell does.
//! - Without its own group the child shares this process's group: a terminal's
//!   Ctrl-C reaches it directly (not forwarded again); signals sent to this process
//!   alone (`kill PID`) are forwarded to the child.
//! - While any run is in flight this process does not die of SIGINT/SIGTERM/SIGHUP
//!   (the handler records it: [`interrupted`]), so the caller can still record the
//!   outcome; the child decides how to react.
//! - Output is read until both pipes reach end of file or, once the child exited,
//!   [`DRAIN_GRACE`] passes: processes the command left in the background holding
//!   the pipes do not keep the run open (their later output is dropped).
//! - Exit status: the child's code; 128 + N when killed by signal N.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Default cap of each captured stream.
pub const DEFAULT_CAPTURE_LIMIT: usize = 1 << 20;
/// How long output is still read after the child exited while something else (a
/// background process it left) keeps a pipe open.
pub const DRAIN_GRACE: Duration = Duration::from_millis(100);
/// Between the SIGTERM of a timeout and the SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(1);

/// What happens to the child's stdout and stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Written through to this process's stdout/stderr unchanged, and captured.
    Tee,
    /// Only captured.
    Capture,
}

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Program and arguments (`argv[0]` is looked up in `PATH`).
    pub argv: Vec<OsString>,
    /// Working directory (`None`: this process's).
    pub cwd: Option<PathBuf>,
    /// Variables set on top of this process's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Tee or capture only.
    pub mode: Mode,
    /// Bytes kept of each stream.
    pub capture_limit: usize,
    /// Stop the process group after this long.
    pub timeout: Option<Duration>,
    /// Give the child its own process group even without a timeout.
    pub own_group: bool,
    /// Connect the child's stdin to /dev/null (default: inherited).
    pub null_stdin: bool,
    /// Run in a private mount namespace with a fork bound over the workspace
    /// (`crate::command::place`); `cwd` is then not used (the bind's `dir` is).
    pub bind: Option<super::place::Bind>,
}

impl Spec {
    /// Run `argv` in this process's cwd and environment, teeing, 1 MiB caps, no
    /// timeout.
    pub fn new<I, S>(argv: I) -> Spec
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Spec {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: Vec::new(),
            mode: Mode::Tee,
            capture_limit: DEFAULT_CAPTURE_LIMIT,
            timeout: None,
            own_group: false,
            null_stdin: false,
            bind: None,
        }
    }

    /// Working directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Spec {
        self.cwd = Some(dir.into());
        self
    }

    /// Set one environment variable.
    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Spec {
        self.env.push((k.as_ref().into(), v.as_ref().into()));
        self
    }

    /// Tee or capture only.
    pub fn mode(mut self, m: Mode) -> Spec {
        self.mode = m;
        self
    }

    /// Cap of each captured stream.
    pub fn capture_limit(mut self, n: usize) -> Spec {
        self.capture_limit = n;
        self
    }

    /// Timeout (kills the whole process group).
    pub fn timeout(mut self, t: Option<Duration>) -> Spec {
        self.timeout = t;
        self
    }

    /// Whether the child leads its own process group (implied by a timeout).
    pub fn own_group(mut self, yes: bool) -> Spec {
        self.own_group = yes;
        self
    }

    /// Stdin from /dev/null instead of inherited (for parallel runs).
    pub fn null_stdin(mut self, yes: bool) -> Spec {
        self.null_stdin = yes;
        self
    }

    /// Run in a private mount namespace with this bind (see
    /// `crate::command::place`).
    pub fn bind(mut self, b: Option<super::place::Bind>) -> Spec {
        self.bind = b;
        self
    }

    /// Run in the fork mounted at `fork`, at the caller's relative place `rel`,
    /// placed as `at` says (seen at the workspace's path or the fork's): cwd (or
    /// the bind) and `PWD` set.
    pub fn placed(self, at: &super::place::Placement, fork: &std::path::Path, rel: &str) -> Spec {
        let (dir, bind) = at.start(fork, rel);
        let s = self.env("PWD", &dir);
        match bind {
            Some(b) => s.bind(Some(b)),
            None => s.cwd(dir),
        }
    }

    fn grouped(&self) -> bool {
        self.own_group || self.timeout.is_some()
    }
}

/// How a run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunResult {
    /// The child's pid (`None`: it never started).
    pub pid: Option<u32>,
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// From spawn to exit (or to the failure to start).
    pub duration: Duration,
    /// Captured stdout (at most the cap).
    pub stdout: Vec<u8>,
    /// Captured stderr (at most the cap).
    pub stderr: Vec<u8>,
    /// Stdout was longer than the cap.
    pub stdout_truncated: bool,
    /// Stderr was longer than the cap.
    pub stderr_truncated: bool,
    /// The timeout stopped it.
    pub timed_out: bool,
    /// Why it could not start (or could not be waited for).
    pub error: Option<String>,
    /// `ErrorKind::NotFound` when the program does not exist.
    pub not_found: bool,
}

impl RunResult {
    /// The status a shell would report: the exit code, 128 + signal, 127 for a
    /// program not found, 126 for any other failure to start.
    pub fn status(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            _ if self.not_found => 127,
            _ => 126,
        }
    }
}

/// Whether (and which) SIGINT, SIGTERM or SIGHUP this process received while runs
/// were in flight (the last one; 0 when none).
pub fn interrupted() -> i32 {
    LAST_SIGNAL.load(Ordering::SeqCst)
}

/// Catch SIGINT, SIGTERM and SIGHUP from now on (as [`run`] does on its first
/// call): for a caller that must not die of them between runs (`experiment`, which
/// cleans up its forks on interruption; see [`interrupted`]).
pub fn install_signal_handlers() {
    signals::install();
}

/// Make this process the subreaper of its descendants (`PR_SET_CHILD_SUBREAPER`):
/// processes the command leaves behind are reparented here, not to init, so their
/// parent chain still leads to this process. Best effort.
pub fn become_subreaper() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// Run `spec` to the end (see the module docs). Never panics on the child's
/// behaviour; a failure to start is reported in the result.
pub fn run(spec: &Spec) -> RunResult {
    let mut r = RunResult::default();
    let Some((prog, args)) = spec.argv.split_first() else {
        r.error = Some("no command given".into());
        return r;
    };
    signals::install();
    let grouped = spec.grouped();
    let fg = grouped && !spec.null_stdin && terminal_is_ours();
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if spec.null_stdin {
        cmd.stdin(Stdio::null());
    }
    let bound = match spec.bind.as_ref().map(super::place::prepare) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            r.error = Some(format!("cannot run {}: {e}", prog.to_string_lossy()));
            return r;
        }
    };
    match (bound, &spec.cwd) {
        (None, Some(d)) => {
            cmd.current_dir(d);
        }
        (Some(p), _) => {
            // SAFETY: `enter` makes only async-signal-safe calls.
            unsafe { cmd.pre_exec(move || super::place::enter(&p)) };
        }
        (None, None) => {}
    }
    if grouped {
        cmd.process_group(0);
    }
    if fg {
        // SAFETY: only async-signal-safe calls (signal, tcsetpgrp, getpid) between
        // fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                libc::tcsetpgrp(0, libc::getpid());
                libc::signal(libc::SIGTTOU, libc::SIG_DFL);
                Ok(())
            });
        }
    }
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            r.duration = start.elapsed();
            r.not_found = e.kind() == std::io::ErrorKind::NotFound;
            r.error = Some(format!("cannot run {}: {e}", prog.to_string_lossy()));
            return r;
        }
    };
    let pid = child.id();
    r.pid = Some(pid);
    signals::register(pid, grouped);
    if fg {
        give_terminal(pid as i32);
    }
    let out = child.stdout.take().expect("piped stdout");
    let err = child.stderr.take().expect("piped stderr");
    let mut pump = Pump::new(spec, out.as_raw_fd(), err.as_raw_fd());
    let status = pump.run(&mut child, spec, pid, grouped, start);
    r.duration = start.elapsed();
    if spec.bind.is_some() && grouped {
        // What the run left in its group would keep its mount namespace (a
        // copy of every mount) alive: it ends with the run.
        kill_group(pid, true, libc::SIGKILL);
    }
    signals::unregister(pid);
    if fg {
        // SAFETY: getpgrp has no preconditions.
        give_terminal(unsafe { libc::getpgrp() });
    }
    drop((out, err));
    match status {
        Ok(s) => {
            r.exit_code = s.code();
            r.signal = s.signal();
        }
        Err(e) => r.error = Some(format!("waiting for {}: {e}", prog.to_string_lossy())),
    }
    r.timed_out = pump.timed_out;
    r.stdout_truncated = pump.streams[0].truncated;
    r.stderr_truncated = pump.streams[1].truncated;
    r.stdout = std::mem::take(&mut pump.streams[0].buf);
    r.stderr = std::mem::take(&mut pump.streams[1].buf);
    r
}

/// Whether stdin is a terminal whose foreground group is this process's group.
fn terminal_is_ours() -> bool {
    // SAFETY: isatty, tcgetpgrp and getpgrp take no pointers.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// Make `pgid` the terminal's foreground group (SIGTTOU ignored meanwhile: we may
/// be in the background by now).
fn give_terminal(pgid: i32) {
    // SAFETY: signal and tcsetpgrp take no pointers; the old disposition is restored.
    unsafe {
        let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        libc::tcsetpgrp(0, pgid);
        libc::signal(libc::SIGTTOU, old);
    }
}

/// One output stream being read.
struct Stream {
    fd: RawFd,
    open: bool,
    buf: Vec<u8>,
    truncated: bool,
    /// Where to tee (1 or 2), if teeing.
    tee: Option<RawFd>,
}

impl Stream {
    /// Read what is available; false at end of file (or a read error).
    fn read(&mut self, limit: usize) -> bool {
        let mut chunk = [0u8; 64 << 10];
        // SAFETY: reading into a buffer we own, of its length.
        let n = unsafe { libc::read(self.fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return matches!(
                e.kind(),
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
            );
        }
        if n == 0 {
            return false;
        }
        let data = &chunk[..n as usize];
        if let Some(fd) = self.tee {
            write_all_fd(fd, data);
        }
        let room = limit.saturating_sub(self.buf.len());
        if data.len() > room {
            self.truncated = true;
        }
        self.buf.extend_from_slice(&data[..data.len().min(room)]);
        true
    }
}

/// Write everything to `fd` (best effort: a closed terminal loses the tee, not the
/// capture).
fn write_all_fd(fd: RawFd, mut data: &[u8]) {
    if fd == 1 {
        let _ = std::io::stdout().lock().write_all(data);
        let _ = std::io::stdout().flush();
        return;
    }
    while !data.is_empty() {
        // SAFETY: writing from a slice we borrow, of its length.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n <= 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        data = &data[n as usize..];
    }
}

/// The loop that reads both pipes and watches the child and the clock.
struct Pump {
    streams: [Stream; 2],
    limit: usize,
    timed_out: bool,
}

impl Pump {
    fn new(spec: &Spec, out: RawFd, err: RawFd) -> Pump {
        let tee = spec.mode == Mode::Tee;
        let s = |fd, to| Stream {
            fd,
            open: true,
            buf: Vec::new(),
            truncated: false,
            tee: tee.then_some(to),
        };
        Pump {
            streams: [s(out, 1), s(err, 2)],
            limit: spec.capture_limit,
            timed_out: false,
        }
    }

    /// Pump until the child exited and the pipes are done; returns its status.
    fn run(
        &mut self,
        child: &mut std::process::Child,
        spec: &Spec,
        pid: u32,
        grouped: bool,
        start: Instant,
    ) -> std::io::Result<std::process::ExitStatus> {
        let pidfd = pidfd_open(pid);
        let deadline = spec.timeout.map(|t| start + t);
        let mut kill_at: Option<Instant> = None;
        let mut status = None;
        let mut drain_until: Option<Instant> = None;
        loop {
            if status.is_none()
                && let Some(s) = child.try_wait()?
            {
                status = Some(s);
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            }
            let open = self.streams.iter().any(|s| s.open);
            match (status, drain_until) {
                (Some(s), _) if !open => return Ok(s),
                (Some(s), Some(d)) if Instant::now() >= d => return Ok(s),
                _ => {}
            }
            let now = Instant::now();
            if status.is_none() {
                if let Some(d) = deadline
                    && now >= d
                    && !self.timed_out
                {
                    self.timed_out = true;
                    kill_group(pid, grouped, libc::SIGTERM);
                    kill_at = Some(now + KILL_GRACE);
                }
                if let Some(k) = kill_at
                    && now >= k
                {
                    kill_group(pid, grouped, libc::SIGKILL);
                    kill_at = Some(now + KILL_GRACE);
                }
            }
            // The next moment something is due.
            let due = [deadline.filter(|_| !self.timed_out), kill_at, drain_until]
                .into_iter()
                .flatten()
                .min();
            let mut wait_ms = due.map_or(-1, |d| {
                d.saturating_duration_since(now).as_millis().min(60_000) as i32 + 1
            });
            if pidfd.is_none() && status.is_none() {
                // No pidfd: look at the child every 10 ms.
                wait_ms = if wait_ms < 0 { 10 } else { wait_ms.min(10) };
            }
            self.poll_once(pidfd.as_ref().filter(|_| status.is_none()), wait_ms);
        }
    }

    fn poll_once(&mut self, pidfd: Option<&std::os::fd::OwnedFd>, wait_ms: i32) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(3);
        let mut which = Vec::with_capacity(3);
        for (i, s) in self.streams.iter().enumerate() {
            if s.open {
                fds.push(libc::pollfd {
                    fd: s.fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
                which.push(Some(i));
            }
        }
        if let Some(p) = pidfd {
            fds.push(libc::pollfd {
                fd: p.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
            which.push(None);
        }
        // SAFETY: `fds` is a valid array of its length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms) };
        if n <= 0 {
            return;
        }
        for (p, w) in fds.iter().zip(which) {
            if let Some(i) = w
                && p.revents != 0
            {
                let limit = self.limit;
                let s = &mut self.streams[i];
                s.open = s.read(limit);
            }
        }
    }
}

fn kill_group(pid: u32, grouped: bool, sig: i32) {
    let target = if grouped { -(pid as i32) } else { pid as i32 };
    // SAFETY: kill takes no pointers.
    unsafe { libc::kill(target, sig) };
}

/// A pidfd of `pid` (readable once it exits), if the kernel has them.
fn pidfd_open(pid: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes integers and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    // SAFETY: a new fd owned by nobody else.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as RawFd) })
}

static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Forwarding of SIGINT, SIGTERM and SIGHUP to the running children: a handler that
/// writes the signal to a pipe (async-signal-safe), and a thread that reads it and
/// signals each registered child (its group when it has one).
mod signals {
    use super::*;

    static PIPE_W: AtomicI32 = AtomicI32::new(-1);
    /// Running children: (pid, leads its own group).
    static RUNNING: Mutex<Vec<(u32, bool)>> = Mutex::new(Vec::new());
    static INSTALLED: OnceLock<()> = OnceLock::new();
    /// Bit set in the byte sent through the pipe when the kernel sent the signal
    /// (a terminal's Ctrl-C to the whole foreground group).
    const FROM_KERNEL: u8 = 0x80;

    extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let code = unsafe { (*info).si_code };
        let mut b = sig as u8 & 0x7f;
        if code == libc::SI_KERNEL {
            b |= FROM_KERNEL;
        }
        let fd = PIPE_W.load(Ordering::Relaxed);
        // SAFETY: write(2) is async-signal-safe; one byte from the stack.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }

    pub(super) fn install() {
        INSTALLED.get_or_init(|| {
            let mut p = [0; 2];
            // SAFETY: `p` holds two fds.
            if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return;
            }
            PIPE_W.store(p[1], Ordering::SeqCst);
            let r = p[0];
            std::thread::spawn(move || forward(r));
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                // SAFETY: a zeroed sigaction with our handler and SA_SIGINFO is valid.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = on_signal as *const () as usize;
                    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                    libc::sigemptyset(&mut sa.sa_mask);
                    libc::sigaction(sig, &sa, std::ptr::null_mut());
                }
            }
        });
    }

    fn forward(r: RawFd) {
        let mut b = [0u8; 1];
        loop {
            // SAFETY: reading one byte into a buffer we own.
            let n = unsafe { libc::read(r, b.as_mut_ptr().cast(), 1) };
            if n != 1 {
                if n < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                    continue;
                }
                return;
            }
            let sig = (b[0] & 0x7f) as i32;
            let from_kernel = b[0] & FROM_KERNEL != 0;
            LAST_SIGNAL.store(sig, Ordering::SeqCst);
            for &(pid, grouped) in super::lock_running(&RUNNING).iter() {
                // A terminal's signal already reached a child in our group.
                if grouped || !from_kernel {
                    kill_group(pid, grouped, sig);
                }
            }
        }
    }

    pub(super) fn register(pid: u32, grouped: bool) {
        super::lock_running(&RUNNING).push((pid, grouped));
    }

    pub(super) fn unregister(pid: u32) {
        super::lock_running(&RUNNING).retain(|&(p, _)| p != pid);
    }
}

fn lock_running<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Spec {
        Spec::new(["sh", "-c", script]).mode(Mode::Capture)
    }

    #[test]
    fn captures_both_streams_and_exit_code() {
        let r = run(&sh("printf out; printf err >&2; exit 3"));
        assert_eq!(r.stdout, b"out");
        assert_eq!(r.stderr, b"err");
        assert_eq!(r.exit_code, Some(3));
        assert_eq!(r.status(), 3);
        assert!(r.pid.is_some() && r.error.is_none());
    }

    #[test]
    fn signal_status_is_128_plus() {
        let r = run(&sh("kill -TERM $$"));
        assert_eq!(r.signal, Some(libc::SIGTERM));
        assert_eq!(r.status(), 128 + libc::SIGTERM);
    }

    #[test]
    fn truncates_at_the_cap() {
        let r = run(&sh("head -c 5000 /dev/zero").capture_limit(1000));
        assert_eq!(r.stdout.len(), 1000);
        assert!(r.stdout_truncated && !r.stderr_truncated);
        let r = run(&sh("head -c 1000 /dev/zero").capture_limit(1000));
        assert!(!r.stdout_truncated);
    }

    #[test]
    fn missing_program_is_a_result() {
        let r = run(&Spec::new(["/no/such/program-xyz"]));
        assert!(r.not_found, "{r:?}");
        assert_eq!(r.status(), 127);
        assert!(r.error.as_deref().unwrap().contains("program-xyz"));
        assert_eq!(run(&Spec::new(Vec::<String>::new())).status(), 126);
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let t0 = Instant::now();
        // A grandchild in the background holds nothing open but must die too.
        let r = run(&sh("sleep 30 & echo $! ; sleep 30").timeout(Some(Duration::from_millis(300))));
        assert!(r.timed_out);
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let bg: i32 = String::from_utf8_lossy(&r.stdout).trim().parse().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: kill with signal 0 only checks existence.
        let alive = unsafe { libc::kill(bg, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{bg}/stat"))
                .is_ok_and(|s| s.contains(") Z"));
        assert!(!alive, "background process {bg} survived the timeout");
    }

    #[test]
    fn background_holder_does_not_keep_the_run_open() {
        let t0 = Instant::now();
        let r = run(&sh("sleep 5 & echo done"));
        assert_eq!(r.stdout, b"done\n");
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    }

    #[test]
    fn cwd_and_env() {
        let r = run(&sh("pwd; echo $RUNNER_T").cwd("/tmp").env("RUNNER_T", "v1"));
        assert_eq!(String::from_utf8_lossy(&r.stdout), "/tmp\nv1\n");
    }
}
