//! Syscalls on a mount this process serves, made from a short-lived child process,
//! through what identifies the mount rather than through its path.
//!
//! Owns: [`MountRef`] (a mount as it was made: an `O_PATH` descriptor of the
//! mountpoint's parent directory, the final name, and the mount's id from `statx`
//! `STATX_MNT_ID_UNIQUE`, or `STATX_MNT_ID` on kernels before 6.8) and every syscall
//! on such a mount: [`MountRef::identify`], [`MountRef::syncfs`],
//! [`MountRef::umount`], [`MountRef::detach`], [`MountRef::is_dead`]. Each is run by
//! a child process that first closes every descriptor it inherited except the
//! parent's.
//!
//! Why not a path: the daemon is root and mountpoints are often chosen by agents,
//! who own the directories above them. `umount2(path, UMOUNT_NOFOLLOW)` resolves
//! `path` again and guards only its last component: an agent that renames an
//! ancestor away and puts a symlink in its place makes root unmount whatever the
//! symlink leads to. A mountpoint itself cannot be renamed or removed while mounted
//! (EBUSY), so only its ancestors can move, and the parent's descriptor follows
//! them. The child checks, with `statx(parent, name, AT_SYMLINK_NOFOLLOW |
//! AT_STATX_DONT_SYNC)`, that `name` is still a mount root with the recorded id, and
//! only then acts: `fchdir(parent)` + `umount2(name, flags | UMOUNT_NOFOLLOW)` (a
//! single component, never a symlink), or `openat(parent, name, O_NOFOLLOW)` +
//! the same id check on the open descriptor + `syncfs`. Anything else there is
//! [`NotOurMount`]: reported, left alone. (A descriptor of the mount root itself
//! would pin the mount and make every non-lazy unmount fail with EBUSY: hence the
//! parent's.) `statx` asking only for the mount id, with `AT_STATX_DONT_SYNC`,
//! sends the FUSE server nothing.
//!
//! Why a child: a thread that makes a syscall on a FUSE mount (the open of its
//! root, the writeback that `syncfs` and an unmount wait for) sleeps
//! UNINTERRUPTIBLY once its request has been handed to the server, until the
//! request is answered or the connection is aborted. The kernel aborts a
//! connection when the last `/dev/fuse` descriptor closes. If the daemon is
//! killed (kill -9) while one of ITS OWN threads waits on its own mount, nobody
//! answers, and the descriptor is closed only when that very process finishes
//! exiting, which its stuck thread prevents: the daemon never dies and the mount
//! hangs until someone writes to `/sys/fs/fuse/connections/N/abort` (seen in the
//! kill -9 crash loop: a daemon stuck in `request_wait_answer` under `open`).
//! The child holds no `/dev/fuse` descriptor, so a kill of the daemon closes the
//! last one, the connection aborts, the child's wait ends with an error and the
//! child exits; the daemon, blocked in `waitpid` (killable), dies at once.
//!
//! Invariant: no daemon thread makes a syscall on a path inside a mount it
//! serves; what it must do there goes through this module. (Reading
//! `/proc/self/mountinfo` and `/proc/PID/{cwd,fd}` links does not enter the mount.)
//! Invariant: nothing is unmounted, detached or synced unless the name under the
//! parent's descriptor is, at that moment, the root of the mount with the recorded id.
//!
//! The child is made like `posix_spawn` makes one: `clone(CLONE_VM |
//! CLONE_VFORK)` on a small stack of its own, every signal blocked, this thread
//! suspended until the child exits. A `fork` would copy the daemon's page tables:
//! with a 100k-file workspace loaded that cost ~5-10 ms per call (measured: a
//! checkpoint 8.6 -> 18.9 ms, a branch 0.9 -> 7.2 ms), growing with the daemon's
//! memory. The child shares our memory, so it runs only raw syscalls (no
//! allocation, no locks) on data prepared before the clone, then `_exit`; its
//! descriptor table and working directory are its own copies (no CLONE_FILES, no
//! CLONE_FS), so closing descriptors and `fchdir` leave ours alone. A kill of the
//! daemon ends the suspended thread (the vfork wait is killable) while the child
//! keeps the memory it needs.

use std::ffi::{CStr, CString, OsStr};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The id of a mount, as `statx` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountId {
    /// The id.
    pub id: u64,
    /// Whether it is `STATX_MNT_ID_UNIQUE` (never reused while the system runs),
    /// not the reusable `STATX_MNT_ID`.
    pub unique: bool,
}

impl fmt::Display for MountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.unique { "unique " } else { "" };
        write!(f, "{kind}mount id {}", self.id)
    }
}

/// The name under a mount's parent directory is no longer the root of that mount
/// (another mount, a plain directory or a symlink is there now): nothing was done.
#[derive(Debug)]
pub struct NotOurMount;

impl fmt::Display for NotOurMount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the path no longer names this mount (something was renamed or replaced); it was left alone")
    }
}

impl std::error::Error for NotOurMount {}

/// Whether `e` is a [`NotOurMount`] refusal.
pub fn is_not_our_mount(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<NotOurMount>())
}

/// A mount identified once: the `O_PATH` descriptor of its mountpoint's parent
/// directory (resolved by the caller without symlinks), the final name, and the
/// mount's id. Every syscall on it re-checks, through the descriptor, that the name
/// is still the root of that very mount.
#[derive(Debug)]
pub struct MountRef {
    parent: OwnedFd,
    name: CString,
    id: MountId,
    path: PathBuf,
}

impl MountRef {
    /// Identify the mount whose root is `name` in the directory `parent` (an
    /// `O_PATH` descriptor); `path` is how it is named in messages. Fails with
    /// [`NotOurMount`] when `name` is not a mount root.
    pub fn identify(parent: OwnedFd, name: &OsStr, path: &Path) -> io::Result<MountRef> {
        let name = CString::new(name.as_bytes())?;
        if name.as_bytes().is_empty() || name.as_bytes().contains(&b'/') {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut out = MountId {
            id: 0,
            unique: false,
        };
        in_child(&Job::new(&parent, &name, Call::Identify(&mut out)))?;
        Ok(MountRef {
            parent,
            name,
            id: out,
            path: path.to_path_buf(),
        })
    }

    /// The mount's id.
    pub fn id(&self) -> MountId {
        self.id
    }

    /// The path it was mounted at (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Push the kernel's dirty pages of the mount to its server (`syncfs(2)`).
    pub fn syncfs(&self) -> io::Result<()> {
        in_child(&Job::new(&self.parent, &self.name, Call::Syncfs(self.id)))
    }

    /// Unmount it (EBUSY while in use).
    pub fn umount(&self) -> io::Result<()> {
        in_child(&Job::new(&self.parent, &self.name, Call::Umount(self.id, 0)))
    }

    /// Detach it lazily.
    pub fn detach(&self) -> io::Result<()> {
        let call = Call::Umount(self.id, libc::MNT_DETACH);
        in_child(&Job::new(&self.parent, &self.name, call))
    }

    /// Whether it is a FUSE mount whose server is gone: a `stat` of its root that
    /// must reach the server answers ENOTCONN. (Asks a live server for attributes.)
    pub fn is_dead(&self) -> io::Result<bool> {
        let call = Call::Probe(self.id);
        match in_child(&Job::new(&self.parent, &self.name, call)) {
            Ok(()) => Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// A copy with another id (to test the verification).
    #[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// `O_PATH` descriptor of a directory.
    fn opath(p: &Path) -> OwnedFd {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(p)
            .unwrap();
        OwnedFd::from(f)
    }

    use std::os::unix::fs::OpenOptionsExt;

    fn tmpfs(p: &Path) {
        std::fs::create_dir_all(p).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tf-unit"])
            .arg(p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::write(p.join("mark"), "x").unwrap();
    }

    /// Unmounts what a failed test left.
    struct Lazy(PathBuf);
    impl Drop for Lazy {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }

    fn root() -> bool {
        // SAFETY: no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn not_a_mount_root_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("plain")).unwrap();
        std::os::unix::fs::symlink("/", d.path().join("link")).unwrap();
        for name in ["plain", "link"] {
            let e = MountRef::identify(opath(d.path()), OsStr::new(name), d.path()).unwrap_err();
            assert!(is_not_our_mount(&e), "{name}: {e}");
        }
        let e = MountRef::identify(opath(d.path()), OsStr::new("missing"), d.path()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn a_wrong_id_is_refused_and_nothing_is_unmounted() {
        if !root() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let mp = d.path().join("m");
        tmpfs(&mp);
        let _g = Lazy(mp.clone());
        let m = MountRef::identify(opath(d.path()), OsStr::new("m"), &mp).unwrap();
        assert!(m.id().unique, "kernel without STATX_MNT_ID_UNIQUE? {}", m.id());
        let wrong = m.with_id(MountId {
            id: m.id().id + 1,
            unique: true,
        });
        for r in [wrong.umount(), wrong.detach(), wrong.syncfs()] {
            assert!(is_not_our_mount(r.as_ref().unwrap_err()), "{r:?}");
        }
        assert!(mp.join("mark").exists(), "unmounted through a wrong id");
        m.syncfs().unwrap();
        assert!(!m.is_dead().unwrap());
        m.umount().unwrap();
        assert!(!mp.join("mark").exists());
        // Gone: the name is a plain directory now.
        assert!(is_not_our_mount(&m.umount().unwrap_err()));
    }

    #[test]
    fn a_renamed_ancestor_and_a_symlink_in_its_place_do_not_redirect() {
        if !root() {
            return;
        }
        // The attack of issue 21: the mount at a/m, a renamed to b, a symlink
        // a -> victim (whose m is another filesystem).
        let d = tempfile::tempdir().unwrap();
        let ours = d.path().join("a/m");
        let victim = d.path().join("victim/m");
        tmpfs(&ours);
        let _g1 = Lazy(d.path().join("b/m"));
        tmpfs(&victim);
        let _g2 = Lazy(victim.clone());
        let m = MountRef::identify(opath(&d.path().join("a")), OsStr::new("m"), &ours).unwrap();
        std::fs::rename(d.path().join("a"), d.path().join("b")).unwrap();
        std::os::unix::fs::symlink(d.path().join("victim"), d.path().join("a")).unwrap();
        m.umount().unwrap();
        assert!(victim.join("mark").exists(), "the victim was unmounted");
        assert!(!d.path().join("b/m/mark").exists(), "ours is still mounted");
    }
}
