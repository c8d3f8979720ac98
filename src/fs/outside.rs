//! Syscalls on a mount this process serves, made from a short-lived child process.
//!
//! Owns: [`syncfs`], [`umount`] and [`detach`] of a mountpoint, each run by a
//! child process that first closes every descriptor it inherited.
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
//!
//! The child is made like `posix_spawn` makes one: `clone(CLONE_VM |
//! CLONE_VFORK)` on a small stack of its own, every signal blocked, this thread
//! suspended until the child exits. A `fork` would copy the daemon's page tables:
//! with a 100k-file workspace loaded that cost ~5-10 ms per call (measured: a
//! checkpoint 8.6 -> 18.9 ms, a branch 0.9 -> 7.2 ms), growing with the daemon's
//! memory. The child shares our memory, so it runs only raw syscalls (no
//! allocation, no locks) on data prepared before the clone, then `_exit`; its
//! descriptor table is its own copy (no CLONE_FILES), so closing them leaves
//! ours alone. A kill of the daemon ends the suspended thread (the vfork wait is
//! killable) while the child keeps the memory it needs.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What the child does on the mountpoint.
#[derive(Clone, Copy)]
enum Call {
    /// `open(O_DIRECTORY | O_NOFOLLOW)` then `syncfs`.
    Syncfs,
    /// `umount2` with these flags (`UMOUNT_NOFOLLOW` always added).
    Umount(libc::c_int),
}

/// Push the kernel's dirty pages of the mount at `mp` to its server (`syncfs(2)`).
pub fn syncfs(mp: &Path) -> io::Result<()> {
    in_child(mp, Call::Syncfs)
}

/// Unmount `mp` (never following a final symlink).
pub fn umount(mp: &Path) -> io::Result<()> {
    in_child(mp, Call::Umount(0))
}

/// Lazily detach whatever is mounted at `mp` (never following a final symlink).
pub fn detach(mp: &Path) -> io::Result<()> {
    in_child(mp, Call::Umount(libc::MNT_DETACH))
}

/// Stack of the child (it runs a handful of syscalls).
const CHILD_STACK: usize = 64 << 10;

/// What the child reads: prepared by the parent before the clone.
struct Job {
    path: *const libc::c_char,
    call: Call,
    max_fd: libc::c_uint,
}

fn in_child(mp: &Path, call: Call) -> io::Result<()> {
    let path = CString::new(mp.as_os_str().as_bytes())?;
    let job = Job {
        path: path.as_ptr(),
        call,
        max_fd: max_fd(),
    };
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
    // stack and this thread is suspended until the child exits, so `job`, `path`
    // and `stack` outlive it; the child runs only raw syscalls (see `entry`).
    let pid = unsafe {
        libc::clone(
            entry,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &job as *const Job as *mut libc::c_void,
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
    unsafe {
        let job = &*(arg as *const Job);
        child(CStr::from_ptr(job.path), job.call, job.max_fd)
    }
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

/// The child: drop every inherited descriptor above stderr (so it holds no
/// `/dev/fuse`), do `call`, exit with 0 or the errno.
///
/// # Safety
/// Only in the child made by `in_child`.
unsafe fn child(path: &CStr, call: Call, max_fd: libc::c_uint) -> ! {
    // SAFETY: raw syscalls on valid pointers (the C string outlives them); no
    // allocation, no locks.
    unsafe {
        let errno = || *libc::__errno_location();
        if libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            0,
        ) != 0
        {
            for fd in 3..max_fd {
                libc::close(fd as libc::c_int);
            }
        }
        let r = match call {
            Call::Syncfs => {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                );
                if fd < 0 || libc::syncfs(fd) != 0 {
                    errno()
                } else {
                    0
                }
            }
            Call::Umount(flags) => {
                if libc::umount2(path.as_ptr(), flags | libc::UMOUNT_NOFOLLOW) != 0 {
                    errno()
                } else {
                    0
                }
            }
        };
        // An errno beyond an exit status's range still reads as a failure.
        libc::_exit(if r > 0 && r < 256 {
            r
        } else if r == 0 {
            0
        } else {
            libc::EIO
        })
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

    #[test]
    fn syncfs_of_a_directory_succeeds_and_errors_carry_the_errno() {
        let d = tempfile::tempdir().unwrap();
        syncfs(d.path()).unwrap();
        let missing = d.path().join("missing");
        assert_eq!(
            syncfs(&missing).unwrap_err().raw_os_error(),
            Some(libc::ENOENT)
        );
        let f = d.path().join("file");
        std::fs::write(&f, "x").unwrap();
        assert_eq!(syncfs(&f).unwrap_err().raw_os_error(), Some(libc::ENOTDIR));
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        // Never followed (O_DIRECTORY | O_NOFOLLOW on a symlink: ENOTDIR).
        let e = syncfs(&link).unwrap_err().raw_os_error();
        assert!(matches!(e, Some(libc::ENOTDIR | libc::ELOOP)), "{e:?}");
        // Not a mountpoint (EPERM when not root).
        let e = umount(d.path()).unwrap_err().raw_os_error();
        assert!(matches!(e, Some(libc::EINVAL | libc::EPERM)), "{e:?}");
    }
}
