//! The power-cut rig: loop devices, ext4 file systems, the freeze, treefork mounts —
//! each a guard undone on drop, also when the test fails. See `super` for the test;
//! `crate::fulldisk` uses it too, with a small inner file system to fill.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::bin;

// Commands and guards (every loop device, mount and freeze is undone on drop, also
// when the test fails).

/// Run `prog args`; stdout on success, a description of the failure otherwise.
pub(crate) fn run(prog: &str, args: &[&str]) -> Result<String, String> {
    let o = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| format!("{prog} {args:?}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{prog} {args:?}: {}\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Setup steps must work: a failure fails the test (CI runs as root).
fn must(prog: &str, args: &[&str]) -> String {
    run(prog, args).unwrap_or_else(|e| {
        panic!("power-cut setup failed (needs root, loop devices, e2fsprogs, util-linux; see scripts/install-test-tools.sh): {e}")
    })
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A loop device, detached on drop.
pub(crate) struct LoopDev(pub(crate) String);

impl LoopDev {
    pub(crate) fn attach(file: &Path) -> Result<LoopDev, String> {
        let dev = run("losetup", &["--find", "--show", s(file)])?;
        Ok(LoopDev(dev.trim().to_string()))
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        if let Err(e) = run("losetup", &["-d", &self.0]) {
            eprintln!("cleanup: {e}");
        }
    }
}

/// A mounted file system, unmounted on drop (lazily if busy).
pub(crate) struct Mounted(pub(crate) PathBuf);

impl Mounted {
    pub(crate) fn mount(dev: &str, dir: &Path) -> Result<Mounted, String> {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        run("mount", &["-t", "ext4", dev, s(dir)])?;
        Ok(Mounted(dir.to_path_buf()))
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if run("umount", &[s(&self.0)]).is_err()
            && let Err(e) = run("umount", &["-l", s(&self.0)])
        {
            eprintln!("cleanup: {e}");
        }
    }
}

/// A frozen file system, thawed on drop.
struct Frozen(PathBuf);

impl Drop for Frozen {
    fn drop(&mut self) {
        if let Err(e) = run("fsfreeze", &["-u", s(&self.0)]) {
            eprintln!("cleanup: {e}");
        }
    }
}

/// treefork mounts of one store, unmounted on drop; then the daemon (which exits with
/// its last mount) is waited for, and killed if it lingers, so the file system under
/// the store can be unmounted.
pub(crate) struct TfMounts {
    pub(crate) store: PathBuf,
    pub(crate) mps: Vec<PathBuf>,
}

impl TfMounts {
    pub(crate) fn new(store: &Path) -> TfMounts {
        TfMounts {
            store: store.to_path_buf(),
            mps: Vec::new(),
        }
    }

    /// Mount `session` on `mp` with extra environment for a daemon it starts.
    pub(crate) fn mount(
        &mut self,
        session: &str,
        mp: &Path,
        env: &[(&str, &str)],
    ) -> Result<(), String> {
        fs::create_dir_all(mp).map_err(|e| e.to_string())?;
        let o = tf_env(&self.store, &["mount", s(mp), "--session", session], env);
        self.mps.push(mp.to_path_buf());
        o.map(|_| ())
    }

    /// Unmount everything and wait for the daemon to be gone.
    pub(crate) fn close(&mut self) -> Result<(), String> {
        let mut err = Ok(());
        for mp in std::mem::take(&mut self.mps).into_iter().rev() {
            if let Err(e) = tf_env(&self.store, &["umount", s(&mp)], &[]) {
                treefork::daemon::detach(&mp);
                err = Err(e);
            }
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if self.store.exists() && treefork::lock::StoreLock::acquire(&self.store).is_err() {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            return err;
        }
        if let Some(pid) = fs::read_to_string(self.store.join("lock"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            // SAFETY: kill(2) with a pid read from the store's lock file (the daemon
            // we started for this store); at worst it fails with ESRCH.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            std::thread::sleep(Duration::from_millis(200));
        }
        err.and(Err(format!(
            "daemon of {} did not exit after its last umount",
            self.store.display()
        )))
    }
}

impl Drop for TfMounts {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            eprintln!("cleanup: {e}");
        }
    }
}

/// `treefork --store store args` with extra environment; stdout or the failure with the
/// daemon log.
pub(crate) fn tf_env(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let mut c = Command::new(bin());
    c.arg("--store")
        .arg(store)
        .args(args)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .env_remove(treefork::durable::UNSAFE_NO_SYNC_ENV);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().map_err(|e| e.to_string())?;
    if !o.status.success() {
        let log = fs::read_to_string(store.join("daemon.log")).unwrap_or_default();
        let tail: String = log.lines().rev().take(30).collect::<Vec<_>>().join("\n");
        return Err(format!(
            "treefork {args:?}: {}{}\n(daemon.log, newest first:\n{tail})",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

pub(crate) fn tf_json(store: &Path, args: &[&str]) -> Result<serde_json::Value, String> {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = tf_env(store, &full, &[])?;
    serde_json::from_str(&out).map_err(|e| format!("treefork {args:?}: bad JSON {e}: {out}"))
}

// ---------------------------------------------------------------------------------
// The rig: outer ext4 (on /dev/shm) holding the inner image, inner ext4 holding the
// store. Field order is drop order: treefork first, the outer loop device last.

pub(crate) struct Rig {
    pub(crate) live: TfMounts,
    _inner: Mounted,
    _inner_loop: LoopDev,
    outer_mnt: Mounted,
    _outer_loop: LoopDev,
    inner_img: PathBuf,
    pub(crate) store: PathBuf,
    /// Mountpoints, copies' mount dirs (on the root fs; nothing big is written there).
    pub(crate) work: tempfile::TempDir,
    /// Images (tmpfs).
    shm: tempfile::TempDir,
}

pub(crate) fn check_prerequisites() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        // SAFETY: no preconditions; cannot fail.
        unsafe { libc::geteuid() },
        0,
        "the power-cut test needs root (loop devices, mount, fsfreeze); CI runs as root"
    );
    assert!(
        Path::new("/dev/fuse").exists(),
        "the power-cut test needs /dev/fuse"
    );
    for tool in [
        "losetup",
        "mkfs.ext4",
        "e2fsck",
        "fsfreeze",
        "mount",
        "umount",
        "cp",
    ] {
        let found = std::env::var("PATH")
            .unwrap_or_default()
            .split(':')
            .chain(["/usr/sbin", "/sbin"])
            .any(|d| Path::new(d).join(tool).exists());
        assert!(
            found,
            "the power-cut test needs `{tool}`: run scripts/install-test-tools.sh"
        );
    }
}

impl Rig {
    /// Build the rig and mount session `s` (its daemon started with `env`).
    pub(crate) fn new(env: &[(&str, &str)]) -> Rig {
        Rig::sized(env, "512M")
    }

    /// [`Rig::new`] with an inner file system (the store's) of `inner_size`
    /// (`truncate -s` syntax).
    pub(crate) fn sized(env: &[(&str, &str)], inner_size: &str) -> Rig {
        check_prerequisites();
        let shm = tempfile::Builder::new()
            .prefix("tf-powercut-")
            .tempdir_in("/dev/shm")
            .unwrap();
        let work = tempfile::Builder::new()
            .prefix("tf-powercut-")
            .tempdir()
            .unwrap();
        let outer_img = shm.path().join("outer.img");
        must("truncate", &["-s", "640M", s(&outer_img)]);
        let outer_loop = LoopDev::attach(&outer_img).unwrap_or_else(|e| panic!("setup: {e}"));
        must("mkfs.ext4", &["-q", "-F", &outer_loop.0]);
        let outer_mnt = Mounted::mount(&outer_loop.0, &work.path().join("outer"))
            .unwrap_or_else(|e| panic!("setup: {e}"));
        let inner_img = outer_mnt.0.join("inner.img");
        must("truncate", &["-s", inner_size, s(&inner_img)]);
        let inner_loop = LoopDev::attach(&inner_img).unwrap_or_else(|e| panic!("setup: {e}"));
        // No lazy init: no background thread writing inode tables during the cuts.
        must(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                &inner_loop.0,
            ],
        );
        let inner = Mounted::mount(&inner_loop.0, &work.path().join("inner"))
            .unwrap_or_else(|e| panic!("setup: {e}"));
        let store = inner.0.join("store");
        let mut live = TfMounts::new(&store);
        live.mount("s", &work.path().join("mnt"), env)
            .unwrap_or_else(|e| panic!("setup: {e}"));
        Rig {
            live,
            _inner: inner,
            _inner_loop: inner_loop,
            outer_mnt,
            _outer_loop: outer_loop,
            inner_img,
            store,
            work,
            shm,
        }
    }

    pub(crate) fn mp(&self) -> PathBuf {
        self.work.path().join("mnt")
    }

    /// The cut: freeze the outer file system, copy the inner image, thaw.
    pub(crate) fn cut(&self, cycle: u32) -> PathBuf {
        let copy = self.shm.path().join(format!("cut-{cycle}.img"));
        let t = Instant::now();
        must("fsfreeze", &["-f", s(&self.outer_mnt.0)]);
        let thaw = Frozen(self.outer_mnt.0.clone());
        must("cp", &["--sparse=always", s(&self.inner_img), s(&copy)]);
        drop(thaw);
        eprintln!("cycle {cycle}: cut (frozen {:?})", t.elapsed());
        copy
    }
}
