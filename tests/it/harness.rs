//! Test harness: real treefork mounts in temporary directories, driven through the CLI.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The treefork binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_treefork")
}

/// The S3 credentials of the test servers (`remote::S3Server`): every treefork
/// process the harness starts gets them (so daemons reach the test servers), and
/// never the developer's own (`AWS_SESSION_TOKEN`, `AWS_PROFILE` and the
/// credentials file are cleared).
pub const TEST_AWS_ENV: [(&str, &str); 2] = [
    ("AWS_ACCESS_KEY_ID", "treefork-test-key"),
    ("AWS_SECRET_ACCESS_KEY", "tf-test-secret-c41f7e9b02"),
];
/// AWS variables the harness removes from every treefork process.
pub const CLEARED_AWS_ENV: [&str; 3] = [
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
];

/// Run treefork with `--store store` and `args`.
pub fn tf(store: &Path, args: &[&str]) -> Output {
    tf_env(store, args, &TEST_AWS_ENV, &[])
}

/// Run treefork with `--store store` and `args`, the environment variables
/// `set` set and `remove` removed (instead of [`TEST_AWS_ENV`]).
pub fn tf_env(store: &Path, args: &[&str], set: &[(&str, &str)], remove: &[&str]) -> Output {
    let mut c = Command::new(bin());
    c.arg("--store")
        .arg(store)
        .args(args)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET");
    for k in TEST_AWS_ENV.iter().map(|(k, _)| *k).chain(CLEARED_AWS_ENV) {
        c.env_remove(k);
    }
    for k in remove {
        c.env_remove(k);
    }
    c.envs(set.iter().copied()).output().expect("run treefork")
}

/// Run treefork and require success; returns stdout.
pub fn tf_ok(store: &Path, args: &[&str]) -> String {
    let o = tf(store, args);
    assert!(
        o.status.success(),
        "treefork {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(store)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Unmount `mp` of `store`, retrying for a few seconds while it is busy: under a
/// parallel test run another test's short-lived process can hold a reference for a
/// moment. A mount still busy after that fails the test, naming the processes
/// whose cwd or open files are inside it.
pub fn umount_ok(store: &Path, mp: &Path) {
    for _ in 0..50 {
        let o = tf(store, &["umount", mp.to_str().unwrap()]);
        if o.status.success() {
            return;
        }
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("is busy"), "umount {} failed: {e}", mp.display());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!(
        "{} stayed busy; holders: {:?}\n{}",
        mp.display(),
        holders(mp),
        daemon_log(store)
    );
}

/// Processes whose cwd or an open file is under `dir` (pid, command, path).
fn holders(dir: &Path) -> Vec<(String, String, PathBuf)> {
    let mut out = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
        let mut links: Vec<PathBuf> = std::fs::read_link(p.path().join("cwd"))
            .into_iter()
            .collect();
        for fd in std::fs::read_dir(p.path().join("fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            links.extend(std::fs::read_link(fd.path()));
        }
        for l in links.into_iter().filter(|l| l.starts_with(dir)) {
            out.push((pid.clone(), comm.trim().to_string(), l));
        }
    }
    out
}

/// Wait until the daemon of `store` is gone (it exits after its last unmount).
pub fn wait_daemon_gone(store: &Path) {
    for _ in 0..1000 {
        if let Ok(l) = treefork::lock::StoreLock::acquire(store) {
            drop(l);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the daemon of {} did not exit", store.display());
}

/// The daemon log of a store (for failure messages).
pub fn daemon_log(store: &Path) -> String {
    std::fs::read_to_string(store.join("daemon.log")).unwrap_or_default()
}

/// A mounted session in a temporary store.
pub struct Mount {
    /// Keeps the temporary tree alive.
    pub tmp: tempfile::TempDir,
    /// Store directory.
    pub store: PathBuf,
    /// Mountpoint.
    pub mp: PathBuf,
    /// Session name.
    pub session: String,
}

impl Mount {
    /// A fresh store with session `s` mounted.
    pub fn new() -> Mount {
        Self::with_session("s")
    }

    /// A fresh store with the named session mounted.
    pub fn with_session(session: &str) -> Mount {
        Self::with_options(session, &[])
    }

    /// A fresh store with the named session mounted with extra `mount` arguments.
    pub fn with_options(session: &str, extra: &[&str]) -> Mount {
        let tmp = tempfile::Builder::new()
            .prefix("tf-test-")
            .tempdir()
            .unwrap();
        let store = tmp.path().join("store");
        let mp = tmp.path().join("mnt");
        std::fs::create_dir_all(&mp).unwrap();
        let m = Mount {
            tmp,
            store,
            mp,
            session: session.to_string(),
        };
        m.mount_with(extra);
        m
    }

    /// A session `session` of the store at `store`, to be mounted on `mp` (not mounted
    /// yet); `tmp` is kept alive with it. For tests that need the store somewhere
    /// special (e.g. on a size-limited filesystem).
    pub fn at(tmp: tempfile::TempDir, store: PathBuf, mp: PathBuf, session: &str) -> Mount {
        std::fs::create_dir_all(&mp).unwrap();
        Mount {
            tmp,
            store,
            mp,
            session: session.to_string(),
        }
    }

    /// A fresh temporary directory with `store` and `mnt` paths in it, session
    /// `session`: nothing made or mounted yet.
    pub fn unmounted(session: &str) -> Mount {
        let tmp = tempfile::Builder::new()
            .prefix("tf-test-")
            .tempdir()
            .unwrap();
        let store = tmp.path().join("store");
        let mp = tmp.path().join("mnt");
        Mount::at(tmp, store, mp, session)
    }

    /// A fresh store whose daemon runs with the debug failpoint `spec`
    /// (`TREEFORK_DEBUG_FAILPOINT`, see `src/failpoint.rs`), session `s` mounted.
    pub fn with_failpoint(spec: &str) -> Mount {
        Self::with_env(&[(treefork::failpoint::ENV, spec)])
    }

    /// A fresh store whose daemon runs with the environment variables `env` set,
    /// session `s` mounted.
    pub fn with_env(env: &[(&str, &str)]) -> Mount {
        let m = Mount::unmounted("s");
        let o = Command::new(bin())
            .arg("--store")
            .arg(&m.store)
            .args(["mount", m.mp.to_str().unwrap(), "--session", "s"])
            .env_remove("TREEFORK_STORE")
            .env_remove("TREEFORK_SOCKET")
            .envs(TEST_AWS_ENV.iter().copied())
            .envs(env.iter().copied())
            .output()
            .expect("run treefork");
        assert!(
            o.status.success(),
            "mount failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        m
    }

    /// Mount (again).
    pub fn mount(&self) {
        self.mount_with(&[]);
    }

    /// Mount (again) with extra `mount` arguments.
    pub fn mount_with(&self, extra: &[&str]) {
        let mut args = vec![
            "mount",
            self.mp.to_str().unwrap(),
            "--session",
            &self.session,
        ];
        args.extend_from_slice(extra);
        tf_ok(&self.store, &args);
    }

    /// Unmount cleanly.
    pub fn umount(&self) {
        tf_ok(&self.store, &["umount", self.mp.to_str().unwrap()]);
    }

    /// Unmount and mount again.
    pub fn remount(&self) {
        self.umount();
        self.mount();
    }

    /// Pid of the daemon serving this store.
    pub fn daemon_pid(&self) -> i32 {
        std::fs::read_to_string(self.store.join("lock"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// SIGKILL the daemon and wait until it is gone.
    pub fn kill_daemon(&self) {
        let pid = self.daemon_pid();
        if let Err(holders) = self.kill_daemon_within(std::time::Duration::from_secs(5)) {
            // Free the machine for the other tests before failing this one.
            abort_fuse_connections(&self.store);
            panic!("daemon {pid} did not die; lock held by {holders:?}");
        }
    }

    /// SIGKILL the daemon and wait up to `limit` for its store lock to be
    /// released (the zombie keeps its pid, but the lock goes at death); on
    /// timeout, the processes holding the lock (diagnostics).
    pub fn kill_daemon_within(&self, limit: std::time::Duration) -> Result<(), Vec<String>> {
        let pid = self.daemon_pid();
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let t = std::time::Instant::now();
        while t.elapsed() < limit {
            if treefork::lock::StoreLock::acquire(&self.store).is_ok() {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let lock = self.store.join("lock");
        let mut holders = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            if let Ok(fds) = std::fs::read_dir(e.path().join("fd")) {
                for fd in fds.flatten() {
                    if std::fs::read_link(fd.path()).is_ok_and(|t| t == lock) {
                        let cmd = std::fs::read_to_string(e.path().join("cmdline"))
                            .unwrap_or_default()
                            .replace('\0', " ");
                        let stack =
                            std::fs::read_to_string(e.path().join("stack")).unwrap_or_default();
                        holders.push(format!(
                            "{}: {cmd}\n{stack}",
                            e.file_name().to_string_lossy()
                        ));
                    }
                }
            }
        }
        Err(holders)
    }

    /// Path inside the mount.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.mp.join(rel)
    }
}

impl Drop for Mount {
    /// Unmounts this mount, then every other FUSE mount the test left under its
    /// tmp directory (forks, experiments, extra sessions; deepest first), so a
    /// failing test leaks no mount and no daemon into the rest of the run.
    fn drop(&mut self) {
        let mut mps = vec![self.mp.clone()];
        let mut rest = fuse_mounts_under(self.tmp.path());
        rest.retain(|p| *p != self.mp);
        rest.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        mps.extend(rest);
        for mp in mps {
            let o = tf(&self.store, &["umount", mp.to_str().unwrap()]);
            if !o.status.success() {
                treefork::daemon::detach(&mp);
            }
        }
    }
}

/// `(mountpoint, FUSE connection minor)` of every FUSE mount at or under `dir`.
fn fuse_mounts_with_minor(dir: &Path) -> Vec<(PathBuf, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out = Vec::new();
    for l in info.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        if f.len() > 4
            && Path::new(f[4]).starts_with(dir)
            && l.contains(" - fuse ")
            && let Some((_, minor)) = f[2].split_once(':')
        {
            out.push((PathBuf::from(f[4]), minor.to_string()));
        }
    }
    out
}

/// Every FUSE mountpoint at or under `dir`.
pub fn fuse_mounts_under(dir: &Path) -> Vec<PathBuf> {
    fuse_mounts_with_minor(dir)
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// Abort (through fusectl) the FUSE connection of every mount whose tmp
/// directory holds `store`: what frees a daemon stuck waiting on its own mount
/// and every process waiting on such a mount. Cleanup for a failing test only.
pub fn abort_fuse_connections(store: &Path) {
    let Some(tmp) = store.parent() else { return };
    let ctl = Path::new("/sys/fs/fuse/connections");
    if std::fs::read_dir(ctl).is_ok_and(|mut d| d.next().is_none()) {
        let _ = Command::new("mount")
            .args(["-t", "fusectl", "none"])
            .arg(ctl)
            .status();
    }
    for (_, minor) in fuse_mounts_with_minor(tmp) {
        let _ = std::fs::write(ctl.join(minor).join("abort"), "1");
    }
}

/// `treefork --store S -C MP args...` for the workspace of `m`.
pub fn ws(m: &Mount, args: &[&str]) -> Output {
    let mut full = vec!["-C", m.mp.to_str().unwrap()];
    full.extend_from_slice(args);
    tf(&m.store, &full)
}

/// Like [`ws`], requiring success; returns stdout.
pub fn ws_ok(m: &Mount, args: &[&str]) -> String {
    let o = ws(m, args);
    assert!(
        o.status.success(),
        "treefork {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `treefork -C DIR ARGS` on the store of `m` (DIR: another workspace of it).
pub fn ws_in(m: &Mount, dir: &Path, args: &[&str]) -> Output {
    let mut a = vec!["-C", dir.to_str().unwrap()];
    a.extend_from_slice(args);
    tf(&m.store, &a)
}

/// Like [`ws_in`], requiring success; returns stdout.
pub fn ws_in_ok(m: &Mount, dir: &Path, args: &[&str]) -> String {
    let o = ws_in(m, dir, args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A fork `name` of the session of `m`, mounted beside it at `<tmp>/<name>`.
pub fn fork_beside(m: &Mount, name: &str) -> PathBuf {
    let dir = m.tmp.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    ws_ok(m, &["fork", name, "--mount", dir.to_str().unwrap()]);
    dir
}

/// Write `data` to `path` (creating its directory) and fsync it.
pub fn write_synced(path: &Path, data: &[u8]) {
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

/// Run a shell command in `dir`, requiring success; returns stdout.
pub fn sh(dir: &Path, script: &str) -> String {
    let o = Command::new("bash")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("run bash");
    assert!(
        o.status.success(),
        "script failed: {script}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Deterministic pseudo-random bytes (xorshift64*), different per seed.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Run git in `repo` as this process (root) with a test identity; the raw output.
pub fn git_raw(repo: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git is installed")
}

/// [`git_raw`] that must succeed; its stdout, trimmed.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let o = git_raw(repo, args);
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The path of the git on this process's PATH (for wrappers that stand in for
/// it on a daemon's PATH and exec the real one).
pub fn real_git() -> String {
    let o = Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .expect("sh runs");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}
