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
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A mount's id and the refusal of a mount that is not ours, owned by the leaf
/// [`crate::mount_id`] (so the layers below `fs` can name them); re-exported so
/// `fs::outside::*` paths keep working.
pub use crate::mount_id::{MountId, NotOurMount, is_not_our_mount, mount_error};

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

    /// The mountpoint as an entry of its parent, through a duplicate of the
    /// parent's descriptor (to remove the directory once the mount is gone, see
    /// [`crate::hostdir::Entry`]).
    pub fn entry(&self) -> io::Result<crate::hostdir::Entry> {
        let parent = self.parent.try_clone()?;
        let at = self.path.parent().unwrap_or(Path::new("/"));
        let name = OsStr::from_bytes(self.name.as_bytes());
        Ok(crate::hostdir::Entry::new(
            crate::hostdir::Dir::from_fd(parent, at),
            name,
        ))
    }

    /// Push the kernel's dirty pages of the mount to its server (`syncfs(2)`).
    pub fn syncfs(&self) -> io::Result<()> {
        in_child(&Job::new(&self.parent, &self.name, Call::Syncfs(self.id)))
    }

    /// Unmount it (EBUSY while in use).
    pub fn umount(&self) -> io::Result<()> {
        in_child(&Job::new(
            &self.parent,
            &self.name,
            Call::Umount(self.id, 0),
        ))
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
    fn with_id(&self, id: MountId) -> MountRef {
        MountRef {
            parent: self.parent.try_clone().expect("dup"),
            name: self.name.clone(),
            id,
            path: self.path.clone(),
        }
    }
}

/// What the child does on the mount.
#[derive(Clone, Copy)]
enum Call {
    /// Read the mount id of the mount root `name` into the parent's memory.
    Identify(*mut MountId),
    /// Check the id, `openat(O_DIRECTORY | O_NOFOLLOW)`, check it again, `syncfs`.
    Syncfs(MountId),
    /// Check the id, then `umount2` with these flags (`UMOUNT_NOFOLLOW` always added).
    Umount(MountId, libc::c_int),
    /// Check the id, then `statx` with `AT_STATX_FORCE_SYNC` (ENOTCONN: dead).
    Probe(MountId),
}

/// Stack of the child (it runs a handful of syscalls).
const CHILD_STACK: usize = 64 << 10;

/// The child's exit status for [`NotOurMount`] (beyond every errno).
const NOT_OURS: libc::c_int = 250;

/// The descriptor number the parent's directory gets in the child.
const DIR_FD: libc::c_int = 3;

/// `statx` attribute: the root of a mount.
const MOUNT_ROOT: u64 = libc::STATX_ATTR_MOUNT_ROOT as u64;

/// What the child reads: prepared by the parent before the clone.
struct Job {
    dirfd: libc::c_int,
    name: *const libc::c_char,
    call: Call,
    max_fd: libc::c_uint,
}

impl Job {
    fn new(parent: &OwnedFd, name: &CStr, call: Call) -> Job {
        Job {
            dirfd: parent.as_raw_fd(),
            name: name.as_ptr(),
            call,
            max_fd: max_fd(),
        }
    }
}

fn in_child(job: &Job) -> io::Result<()> {
    let mut stack = vec![0u8; CHILD_STACK];
    // The stack grows down from its (16-byte aligned) end.
    let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;
    // SAFETY: sigset_t is plain data, all zeroes a valid value.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers to owned sets. Every signal is blocked in this thread
    // while the child (which inherits the mask) shares our memory; the old mask is
    // put back once it has exited.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: CLONE_VM | CLONE_VFORK: the child shares our memory on its own
    // stack and this thread is suspended until the child exits, so `job`, what it
    // points to and `stack` outlive it; the child runs only raw syscalls (see
    // `entry`).
    let pid = unsafe {
        libc::clone(
            entry,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            job as *const Job as *mut libc::c_void,
        )
    };
    let err = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    drop(stack);
    if pid < 0 {
        return Err(err);
    }
    wait(pid)
}

/// The child's entry point (`clone`).
extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Job`, alive while the parent is suspended
    // (CLONE_VFORK); `child` never returns.
    unsafe { child(&*(arg as *const Job)) }
}

/// The highest descriptor number that can be open (for the fallback when
/// `close_range` is missing).
fn max_fd() -> libc::c_uint {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1 << 16;
    }
    r.rlim_cur.min(1 << 20) as libc::c_uint
}

/// `statx(dirfd, name, flags)` asking for the mount id (and `extra`); the id read
/// and whether `name` is a mount root, or the errno.
///
/// # Safety
/// Raw syscall; `name` a valid C string. Usable in the child.
unsafe fn mount_id_at(
    dirfd: libc::c_int,
    name: *const libc::c_char,
    flags: libc::c_int,
    extra: libc::c_uint,
) -> Result<(MountId, bool), libc::c_int> {
    // SAFETY: zeroed plain data; raw syscall on valid pointers.
    unsafe {
        let mut stx: libc::statx = std::mem::zeroed();
        let mask = libc::STATX_MNT_ID_UNIQUE | extra;
        let flags = flags | libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT;
        if libc::syscall(libc::SYS_statx, dirfd, name, flags, mask, &mut stx) != 0 {
            return Err(*libc::__errno_location());
        }
        let unique = stx.stx_mask & libc::STATX_MNT_ID_UNIQUE != 0;
        if !unique && stx.stx_mask & libc::STATX_MNT_ID == 0 {
            return Err(libc::ENOSYS);
        }
        let root =
            stx.stx_attributes_mask & MOUNT_ROOT != 0 && stx.stx_attributes & MOUNT_ROOT != 0;
        Ok((
            MountId {
                id: stx.stx_mnt_id,
                unique,
            },
            root,
        ))
    }
}

/// Whether `name` in `dirfd` is (Ok) the root of the mount `want`.
///
/// # Safety
/// As [`mount_id_at`].
unsafe fn check(
    dirfd: libc::c_int,
    name: *const libc::c_char,
    flags: libc::c_int,
    want: MountId,
) -> Result<(), libc::c_int> {
    // SAFETY: as the caller's.
    match unsafe { mount_id_at(dirfd, name, flags | libc::AT_STATX_DONT_SYNC, 0) } {
        Ok((id, true)) if id == want => Ok(()),
        Ok(_) => Err(NOT_OURS),
        Err(e) => Err(e),
    }
}

/// The child: keep the parent's directory as [`DIR_FD`], drop every other
/// inherited descriptor above stderr (so it holds no `/dev/fuse`), do the call,
/// exit with 0, the errno, or [`NOT_OURS`].
///
/// # Safety
/// Only in the child made by `in_child`.
unsafe fn child(job: &Job) -> ! {
    // SAFETY: raw syscalls on valid pointers (the job and what it points to
    // outlive them); no allocation, no locks.
    unsafe {
        let errno = || *libc::__errno_location();
        let r = if job.dirfd != DIR_FD && libc::dup2(job.dirfd, DIR_FD) != DIR_FD {
            Err(errno())
        } else {
            if libc::syscall(
                libc::SYS_close_range,
                (DIR_FD + 1) as libc::c_uint,
                libc::c_uint::MAX,
                0,
            ) != 0
            {
                for fd in (DIR_FD + 1) as libc::c_uint..job.max_fd {
                    libc::close(fd as libc::c_int);
                }
            }
            run(job.name, job.call)
        };
        let code = match r {
            Ok(()) => 0,
            Err(e) if e > 0 && e < 256 => e,
            Err(_) => libc::EIO,
        };
        libc::_exit(code)
    }
}

/// The call itself, on [`DIR_FD`].
///
/// # Safety
/// Only in the child, after [`child`] set up [`DIR_FD`].
unsafe fn run(name: *const libc::c_char, call: Call) -> Result<(), libc::c_int> {
    // SAFETY: raw syscalls on valid pointers; `Identify`'s pointer is the parent's
    // out-value, alive while it is suspended.
    unsafe {
        let errno = || *libc::__errno_location();
        match call {
            Call::Identify(out) => match mount_id_at(DIR_FD, name, libc::AT_STATX_DONT_SYNC, 0)? {
                (id, true) => {
                    *out = id;
                    Ok(())
                }
                (_, false) => Err(NOT_OURS),
            },
            Call::Syncfs(want) => {
                check(DIR_FD, name, 0, want)?;
                let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
                let fd = libc::openat(DIR_FD, name, flags);
                if fd < 0 {
                    return Err(errno());
                }
                // What was opened is that mount's root too (no swap in between).
                check(fd, c"".as_ptr(), libc::AT_EMPTY_PATH, want)?;
                if libc::syncfs(fd) != 0 {
                    return Err(errno());
                }
                Ok(())
            }
            Call::Umount(want, flags) => {
                check(DIR_FD, name, 0, want)?;
                // A single component relative to the parent, its last one never
                // followed: nothing else can be reached.
                if libc::fchdir(DIR_FD) != 0 {
                    return Err(errno());
                }
                if libc::umount2(name, flags | libc::UMOUNT_NOFOLLOW) != 0 {
                    return Err(errno());
                }
                Ok(())
            }
            Call::Probe(want) => {
                check(DIR_FD, name, 0, want)?;
                let flags = libc::AT_STATX_FORCE_SYNC;
                mount_id_at(DIR_FD, name, flags, libc::STATX_BASIC_STATS).map(drop)
            }
        }
    }
}

/// Wait for the child `pid`: its exit status 0 is success, any other is the
/// errno of the call that failed.
fn wait(pid: libc::pid_t) -> io::Result<()> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child, writing into `status`.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => Ok(()),
            NOT_OURS => Err(io::Error::other(NotOurMount)),
            code => Err(io::Error::from_raw_os_error(code)),
        }
    } else {
        Err(io::Error::other(format!(
            "the helper process for the mount was killed (wait status {status:#x})"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;
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
        assert!(
            m.id().unique,
            "kernel without STATX_MNT_ID_UNIQUE? {}",
            m.id()
        );
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
