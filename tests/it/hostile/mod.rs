//! The hostile suite: every attack on the containment of the root daemon (issue 21),
//! run as an unprivileged uid (65534) through its agent socket and inside its
//! workspace, asserting that the host's mounts, other sessions and history are intact
//! and that the daemon still answers.
//!
//! One file per defect; this module holds what they share: [`Agent`] (a session
//! mounted for uid 65534 with an agent socket, the CLI and a shell run as that uid),
//! snapshots of the host's mounts, the daemon's memory (its peak reset and read).

mod branches;
mod cleanup;
mod contain;
mod exhaust;
mod gitcommit;
mod merge;
mod placed;
mod poisoned;
mod remote;
mod small;
mod sockdir;
pub(crate) mod ui;
mod unmount;
mod visibility;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{Mount, bin, daemon_log, tf_ok};

/// The uid (and gid) the hostile agent runs as.
pub const AGENT_UID: u32 = 65534;

/// A session mounted for a hostile agent: agent socket owned by [`AGENT_UID`], the
/// workspace root owned by it too, a copy of the CLI it can execute, and a home
/// directory of its own outside the workspace (for `fork --mount`).
pub struct Agent {
    /// The mount (its store, mountpoint and session `s`).
    pub m: Mount,
    /// The agent socket.
    pub sock: PathBuf,
    /// A directory owned by the agent, searchable by everyone, outside the workspace.
    pub home: PathBuf,
    /// The CLI binary, copied where the agent can run it.
    pub exe: PathBuf,
    _dir: tempfile::TempDir,
}

impl Agent {
    /// Session `s` of a fresh store, mounted with an agent socket for [`AGENT_UID`].
    pub fn new() -> Agent {
        Self::with_options(&[])
    }

    /// As [`Agent::new`], with extra `mount` arguments.
    pub fn with_options(extra: &[&str]) -> Agent {
        let dir = tempfile::Builder::new()
            .prefix("tf-hostile-")
            .tempdir()
            .unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let sock = dir.path().join("agent.sock");
        let uid = AGENT_UID.to_string();
        let mut args = vec![
            "--agent-socket",
            sock.to_str().unwrap(),
            "--agent-uid",
            uid.as_str(),
        ];
        args.extend_from_slice(extra);
        let m = Mount::with_options("s", &args);
        fs::set_permissions(m.tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&m.mp, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
        let home = m.tmp.path().join("agent-home");
        fs::create_dir(&home).unwrap();
        std::os::unix::fs::chown(&home, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
        fs::set_permissions(&home, fs::Permissions::from_mode(0o755)).unwrap();
        let exe = dir.path().join("treefork");
        // A hard link where it can be (no disk: a copy per test was 400 MB), else
        // a copy; either way reachable by the agent through searchable parents.
        if fs::hard_link(bin(), &exe).is_err() {
            fs::copy(bin(), &exe).unwrap();
        }
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
        Agent {
            m,
            sock,
            home,
            exe,
            _dir: dir,
        }
    }

    /// Run the CLI as the agent against its socket (`--json`), from the workspace.
    pub fn cli(&self, args: &[&str]) -> Output {
        let mut c = Command::new(&self.exe);
        c.arg("--json")
            .arg("--socket")
            .arg(&self.sock)
            .args(args)
            .current_dir(&self.m.mp);
        as_agent(&mut c);
        output_retrying(&mut c)
    }

    /// [`Agent::cli`] that must succeed; its JSON answer.
    pub fn cli_ok(&self, args: &[&str]) -> Value {
        let o = self.cli(args);
        assert!(
            o.status.success(),
            "agent: treefork {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            daemon_log(&self.m.store)
        );
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}: {:?}", o.stdout))
    }

    /// [`Agent::cli`] that must fail; its exit status and standard error.
    pub fn cli_err(&self, args: &[&str]) -> (i32, String) {
        let o = self.cli(args);
        assert!(
            !o.status.success(),
            "agent: treefork {args:?} unexpectedly succeeded: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// Run `script` with `/bin/sh -c` as the agent in its workspace, with
    /// `TREEFORK_SOCKET` naming its socket and `TF` its CLI.
    pub fn sh(&self, script: &str) -> Output {
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(script)
            .current_dir(&self.m.mp)
            .env("TREEFORK_SOCKET", &self.sock)
            .env("TF", &self.exe)
            .env("HOME", &self.home);
        as_agent(&mut c);
        c.output().expect("spawn sh as the agent")
    }

    /// [`Agent::sh`] that must succeed; its standard output.
    pub fn sh_ok(&self, script: &str) -> String {
        let o = self.sh(script);
        assert!(
            o.status.success(),
            "agent: sh -c {script:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The user's CLI (`--json`) on this store, acting on the workspace.
    pub fn user_ok(&self, args: &[&str]) -> Value {
        let mut full = vec!["--json", "-C", self.m.mp.to_str().unwrap()];
        full.extend_from_slice(args);
        serde_json::from_str(&tf_ok(&self.m.store, &full)).unwrap()
    }

    /// The daemon still answers the user (status of the session) within 30 s.
    pub fn assert_daemon_answers(&self) {
        let t = Instant::now();
        let v = self.user_ok(&["status"]);
        assert!(v.get("changes").is_some(), "{v}");
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "daemon slow to answer"
        );
    }

    /// Peak resident memory of the daemon so far (KiB, `VmHWM`).
    pub fn daemon_peak_rss_kib(&self) -> u64 {
        proc_status_kib(self.m.daemon_pid(), "VmHWM:")
    }

    /// Reset the daemon's peak resident memory (`VmHWM`) to what it holds now.
    pub fn reset_daemon_peak(&self) {
        fs::write(format!("/proc/{}/clear_refs", self.m.daemon_pid()), "5").unwrap();
    }

    /// Resident memory of the daemon now (KiB, `VmRSS`).
    pub fn daemon_rss_kib(&self) -> u64 {
        proc_status_kib(self.m.daemon_pid(), "VmRSS:")
    }
}

/// Run `c`, again while its program is busy being written (`ETXTBSY`): the CLI
/// copied for the agent can be held open for writing, for an instant, by a child
/// another test thread forked while the copy was being made.
pub fn output_retrying(c: &mut Command) -> Output {
    for _ in 0..100 {
        match c.output() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            r => return r.unwrap_or_else(|e| panic!("spawn {c:?}: {e}")),
        }
    }
    panic!("spawn {c:?}: text file busy for 2 s")
}

/// Make `c` run as [`AGENT_UID`] with no supplementary groups.
pub fn as_agent(c: &mut Command) {
    c.env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .env("HOME", "/nonexistent");
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        c.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(AGENT_UID) != 0
                || libc::setuid(AGENT_UID) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A field of `/proc/PID/status` in KiB.
pub fn proc_status_kib(pid: i32, field: &str) -> u64 {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// `(mount id, mountpoint)` of every mount of this process's namespace that is
/// not under `/tmp` (where the tests, running in parallel, make and remove theirs):
/// the host's mounts, which no attack may change.
pub fn host_mounts() -> Vec<(String, String)> {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut v: Vec<(String, String)> = info
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() > 4 && !f[4].starts_with("/tmp/")).then(|| (f[0].into(), f[4].into()))
        })
        .collect();
    v.sort();
    v
}

/// Mount a small tmpfs at `dir` (a victim filesystem for the tests); returns it.
pub fn victim_tmpfs(dir: &Path) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let o = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "victim"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    fs::write(dir.join("precious"), "host data").unwrap();
    dir.to_path_buf()
}

/// Unmounts a victim filesystem at the end of a test, even a failed one.
pub struct VictimGuard(pub PathBuf);
impl Drop for VictimGuard {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
