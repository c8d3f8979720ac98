//! Defect 1 of issue 21: unmount the mount, never a name.
//!
//! The agent forks with `--mount ~/a/victim`, renames `~/a` away and puts a symlink
//! `~/a -> <host>/a` in its place, where `<host>/a/victim` is a host filesystem. An
//! unmount of the fork by its path (discard, idle eviction, shutdown) used to
//! unmount the host's filesystem, then block the daemon for good waiting for the
//! fork's FUSE loop (its mount was still there). And before mounting, a dead FUSE
//! mount at a path the agent names (directly or through a symlink) was detached on
//! ENOTCONN alone.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{Agent, VictimGuard, host_mounts, victim_tmpfs};
use crate::harness::{Mount, bin, daemon_log, fuse_mounts_under};

/// How long a command that must not hang may take.
const LIMIT: Duration = Duration::from_secs(40);

/// `treefork --store STORE args` as the user; `None` if it did not finish within
/// [`LIMIT`] (it is killed then).
fn tf_within(store: &Path, args: &[&str]) -> Option<Output> {
    let mut child = Command::new(bin())
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child.wait_with_output().unwrap())
}

/// Whether `p` is a mountpoint (by `/proc/self/mountinfo`).
fn mounted(p: &Path) -> bool {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = p.to_str().unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(want))
}

/// The attack, set up: the agent's fork `f` is mounted at what is now
/// `home/b/victim`, and `home/a` is a symlink to `<tmp>/host/a`, whose `victim` is
/// a tmpfs holding `precious`.
struct Attack {
    /// First: fields drop in order, and the tmpfs must be gone before the agent's
    /// temporary directory is removed (else that removal stops at the mount and
    /// leaves the directory behind).
    _victim: VictimGuard,
    agent: Agent,
    victim: PathBuf,
    moved: PathBuf,
    host_before: Vec<(String, String)>,
}

impl Attack {
    fn new(extra: &[&str]) -> Attack {
        let agent = Agent::with_options(extra);
        let host_before = host_mounts();
        let host = agent.m.tmp.path().join("host");
        let victim = victim_tmpfs(&host.join("a/victim"));
        let guard = VictimGuard(victim.clone());
        let fork_mp = agent.home.join("a/victim");
        let home = agent.home.to_str().unwrap().to_string();
        agent.sh_ok(&format!("mkdir -p '{home}/a/victim'"));
        agent.cli_ok(&["fork", "f", "--mount", fork_mp.to_str().unwrap()]);
        assert!(mounted(&fork_mp), "the fork is not mounted");
        agent.sh_ok(&format!(
            "mv '{home}/a' '{home}/b' && ln -s '{}' '{home}/a'",
            host.join("a").display()
        ));
        let moved = agent.home.join("b/victim");
        assert!(
            mounted(&moved),
            "the fork's mount did not follow the rename"
        );
        assert!(
            fork_mp.join("precious").exists(),
            "the symlink is not in place"
        );
        Attack {
            _victim: guard,
            agent,
            victim,
            moved,
            host_before,
        }
    }

    /// The victim is still mounted with its file; the fork's mount is gone; the
    /// host's mounts are unchanged.
    fn assert_contained(&self) {
        assert!(
            mounted(&self.victim),
            "root unmounted the victim filesystem\n{}",
            daemon_log(&self.agent.m.store)
        );
        assert_eq!(
            fs::read_to_string(self.victim.join("precious")).unwrap(),
            "host data"
        );
        assert!(
            !mounted(&self.moved),
            "the fork is still mounted\n{}",
            daemon_log(&self.agent.m.store)
        );
        assert_eq!(host_mounts(), self.host_before);
    }

    /// A user command that must succeed within [`LIMIT`].
    fn user_within(&self, args: &[&str]) -> String {
        let store = &self.agent.m.store;
        let o = tf_within(store, args).unwrap_or_else(|| {
            panic!(
                "treefork {args:?} hung for {LIMIT:?}; victim mounted: {}\n{}",
                mounted(&self.victim),
                daemon_log(store)
            )
        });
        assert!(
            o.status.success(),
            "treefork {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            daemon_log(store)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

#[test]
fn discarding_a_fork_behind_a_swapped_ancestor_unmounts_only_the_fork() {
    let a = Attack::new(&[]);
    a.user_within(&["session", "discard", "f"]);
    a.assert_contained();
    a.agent.assert_daemon_answers();
    // Still serving: a checkpoint of the agent's session.
    a.agent.cli_ok(&["checkpoint", "-m", "after the attack"]);
}

#[test]
fn idle_eviction_of_a_fork_behind_a_swapped_ancestor_unmounts_only_the_fork() {
    let a = Attack::new(&[]);
    a.user_within(&["session", "extend", "f", "--ttl-idle", "1s"]);
    std::thread::sleep(Duration::from_secs(2));
    let v: serde_json::Value =
        serde_json::from_str(&a.user_within(&["session", "sweep", "--json"])).unwrap();
    let evicted = v["evicted"].as_array().cloned().unwrap_or_default();
    assert!(
        evicted.iter().any(|e| e["session"] == "f"),
        "f not evicted: {v}"
    );
    a.assert_contained();
    // The daemon's loop is free: it still answers and serves the agent.
    a.agent.assert_daemon_answers();
    a.agent.cli_ok(&["checkpoint", "-m", "after the attack"]);
}

#[test]
fn shutdown_with_a_fork_behind_a_swapped_ancestor_unmounts_only_the_fork() {
    let a = Attack::new(&[]);
    let store = a.agent.m.store.clone();
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(a.agent.m.daemon_pid(), libc::SIGTERM) };
    let t = Instant::now();
    while treefork::lock::StoreLock::acquire(&store).is_err() {
        assert!(
            t.elapsed() < LIMIT,
            "the daemon did not finish its shutdown; victim mounted: {}\n{}",
            mounted(&a.victim),
            daemon_log(&store)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    a.assert_contained();
    assert!(
        !mounted(&a.agent.m.mp),
        "the agent's session is still mounted"
    );
}

/// A FUSE mount of another store whose daemon was killed (it answers ENOTCONN),
/// in a directory the agent cannot search (so its CLI cannot canonicalize a path
/// to it and passes the path on as given).
fn dead_mount() -> Mount {
    let other = Mount::new();
    other.kill_daemon();
    let t = Instant::now();
    while !matches!(fs::symlink_metadata(&other.mp), Err(e) if e.raw_os_error() == Some(libc::ENOTCONN))
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the mount is not dead"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    other
}

#[test]
fn an_agent_cannot_make_the_daemon_detach_a_dead_mount_it_names() {
    let victim = dead_mount();
    let agent = Agent::new();
    let before = host_mounts();
    let (_, err) = agent.cli_err(&["fork", "g", "--mount", victim.mp.to_str().unwrap()]);
    assert!(
        mounted(&victim.mp),
        "the daemon detached a dead mount an agent named ({err})\n{}",
        daemon_log(&agent.m.store)
    );
    assert_eq!(
        fuse_mounts_under(victim.tmp.path()),
        vec![victim.mp.clone()]
    );
    assert_eq!(host_mounts(), before);
    agent.assert_daemon_answers();
}

/// Send one request line to the agent socket as the agent itself, without the CLI
/// (which canonicalizes paths): as a hostile agent would. The answer, raw.
fn raw_agent_request(agent: &Agent, req: &serde_json::Value) -> String {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let line = format!("{req}\n").into_bytes();
    let path = agent.sock.as_os_str().as_bytes().to_vec();
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    assert!(path.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(&path) {
        *d = *s as libc::c_char;
    }
    let mut c = Command::new("/bin/true");
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: between fork and exec only raw syscalls on data prepared before the
    // fork (no allocation); the child exits without exec'ing.
    unsafe {
        c.pre_exec(move || {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(super::AGENT_UID) != 0
                || libc::setuid(super::AGENT_UID) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if fd < 0 || libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut off = 0;
            while off < line.len() {
                let n = libc::write(fd, line[off..].as_ptr().cast(), line.len() - off);
                if n <= 0 {
                    libc::_exit(2);
                }
                off += n as usize;
            }
            libc::shutdown(fd, libc::SHUT_WR);
            let mut buf = [0u8; 4096];
            loop {
                let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                if n <= 0 {
                    break;
                }
                libc::write(1, buf.as_ptr().cast(), n as usize);
            }
            libc::_exit(0)
        });
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn an_agent_cannot_make_the_daemon_detach_a_dead_mount_through_a_symlink() {
    let victim = dead_mount();
    let agent = Agent::new();
    let link = agent.home.join("l");
    agent.sh_ok(&format!(
        "ln -s '{}' '{}'",
        victim.tmp.path().display(),
        link.display()
    ));
    let through = link.join(victim.mp.file_name().unwrap());
    let req = serde_json::json!({"v": 1, "op": "fork", "name": "g", "mountpoint": through});
    let answer = raw_agent_request(&agent, &req);
    assert!(answer.contains("\"ok\":false"), "{answer}");
    assert!(
        mounted(&victim.mp),
        "the daemon detached a dead mount through an agent's symlink ({answer})\n{}",
        daemon_log(&agent.m.store)
    );
    agent.assert_daemon_answers();
}
