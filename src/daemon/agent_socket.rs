//! Agent socket files: bound at a path the user chose, and removed again, through
//! a descriptor of their directory checked once.
//!
//! Owns: [`bind`] (the directory opened without symbolic links and checked, a stale
//! socket replaced, the socket bound, its mode and owner set, its identity read)
//! and [`SocketFile`] (what is kept while the socket is served: the directory's
//! descriptor, the name and the socket's device and inode, through which it is
//! unlinked when dropped: at the unmount, or when the mount fails).
//!
//! Why: the socket's path is remembered with the session and bound again by a later
//! mount naming none (a remount, a resume after eviction), when the directory may
//! have changed hands: an agent that owns it can swap it for a symlink to a
//! root-only directory while the session is unmounted. By path, root would create
//! the socket there (owned by the agent) and, at unmount, remove a socket of that
//! name wherever the path then leads.
//!
//! The rule (the same at the first mount and at every remount): the directory is
//! reached without a symbolic link in any component (`openat2` with
//! `RESOLVE_NO_SYMLINKS`, see [`crate::hostdir`]), and it is owned by root, by the
//! daemon's uid or by the socket's agent uid; anything else refuses the mount, with
//! the reason (a remount then takes `--agent-socket` to serve another path). Every
//! later syscall goes through that descriptor: the connect that tells a stale
//! socket from a live one and the `bind` run on a thread of their own whose working
//! directory is the descriptor (`unshare(CLONE_FS)` + `fchdir`, umask 0177, so the
//! socket is born 0600), the owner set through an `O_PATH | O_NOFOLLOW` descriptor
//! checked to be the socket just bound, and the unlink at unmount made by
//! `unlinkat(dirfd, name)` only while `fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)`
//! shows the socket's own (device, inode).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use crate::control::AgentSocket;
use crate::error::{Error, Result};
use crate::hostdir::{self, Dir, FileId};

/// The longest socket name `bind` takes (`sun_path` holds 108 bytes with its NUL).
const MAX_NAME: usize = 107;

/// An agent socket file this daemon bound and serves: removed when dropped, only
/// if its directory still holds it under its name.
#[derive(Debug)]
pub(crate) struct SocketFile {
    dir: Dir,
    name: OsString,
    id: FileId,
    path: PathBuf,
}

impl SocketFile {
    /// Unlink the socket through its directory's descriptor, only if the name
    /// there is still this socket (anything else is left alone, and logged).
    fn remove(&self) {
        match self.dir.unlink_if(&self.name, self.id) {
            Ok(true) => {}
            Ok(false) => log::warn!(
                "agent socket {}: no longer the socket bound there; left alone",
                self.path.display()
            ),
            Err(e) => log::warn!(
                "agent socket {}: cannot remove it: {e}",
                self.path.display()
            ),
        }
    }
}

impl Drop for SocketFile {
    /// The socket is served as long as its file is held: dropped (the mount
    /// failed, or its entry left the mount table after the unmount), it is
    /// removed.
    fn drop(&mut self) {
        self.remove();
    }
}

/// Bind the agent socket `a` (mode 0600, owned by its uid when given) in its
/// checked directory. A stale socket there (nobody answers) is replaced; anything
/// else at the name is refused, never removed.
pub(crate) fn bind(a: &AgentSocket) -> Result<(UnixListener, SocketFile)> {
    let path = &a.path;
    let (dir, name) = open_checked(a)?;
    match dir.stat_at(&name) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFSOCK => {
            if in_dir(&dir, || UnixStream::connect(&name)).is_ok() {
                return Err(Error::Conflict(format!(
                    "agent socket {} is in use by a running server",
                    path.display()
                )));
            }
            dir.unlink_if(&name, FileId::of(&st))
                .map_err(|e| Error::io(path, e))?;
        }
        Ok(_) => {
            return Err(Error::Invalid(format!(
                "agent socket {} exists and is not a socket; refusing to replace it",
                path.display()
            )));
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(Error::io(path, e)),
    }
    let listener = in_dir(&dir, || {
        // SAFETY: umask only changes this thread's own (unshared) file mode mask.
        unsafe { libc::umask(0o177) };
        UnixListener::bind(&name)
    })
    .map_err(|e| Error::io(path, e))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let id = match dir.stat_at(&name) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFSOCK && st.st_uid == me => FileId::of(&st),
        _ => {
            return Err(Error::Conflict(format!(
                "agent socket {} was replaced while it was being set up",
                path.display()
            )));
        }
    };
    let file = SocketFile {
        dir,
        name,
        id,
        path: path.clone(),
    };
    if let Err(e) = secure(&file, a.uid) {
        drop(listener);
        return Err(e);
    }
    Ok((listener, file))
}

/// Open the socket's directory without symbolic links and check it: a directory
/// owned by root, the daemon's uid or the agent's uid. Returns it and the name.
fn open_checked(a: &AgentSocket) -> Result<(Dir, OsString)> {
    let path = &a.path;
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Error::Invalid(format!(
            "agent socket {} must name a file in a directory",
            path.display()
        )));
    };
    if name.len() > MAX_NAME {
        return Err(Error::Invalid(format!(
            "agent socket {}: its name is longer than {MAX_NAME} bytes",
            path.display()
        )));
    }
    let dir = Dir::open(parent).map_err(|e| refused(path, parent, e))?;
    let st = dir.stat().map_err(|e| Error::io(parent, e))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if st.st_uid != 0 && st.st_uid != me && Some(st.st_uid) != a.uid {
        let agent = a
            .uid
            .map(|u| format!(", uid {u} (the agent)"))
            .unwrap_or_default();
        return Err(Error::Forbidden(format!(
            "agent socket {}: its directory {} is owned by uid {}, not by root, uid {me} (the daemon){agent}; refusing to bind it there (pass --agent-socket to serve it elsewhere)",
            path.display(),
            parent.display(),
            st.st_uid
        )));
    }
    Ok((dir, name.to_os_string()))
}

fn refused(path: &Path, parent: &Path, e: io::Error) -> Error {
    let why = match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::EXDEV) => "goes through a symbolic link",
        Some(libc::ENOENT) => "does not exist",
        Some(libc::ENOTDIR) => "is not a directory",
        _ => return Error::io(parent, e),
    };
    Error::Invalid(format!(
        "agent socket {}: its directory {} {why}; name the real directory (pass --agent-socket to serve it elsewhere)",
        path.display(),
        parent.display()
    ))
}

/// Run `f` on a thread of its own whose working directory is `dir` (its file
/// system attributes unshared from the daemon's), so relative names in `f`
/// resolve in that very directory and nowhere else.
fn in_dir<T: Send>(dir: &Dir, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    let fd = dir.fd().as_raw_fd();
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: unshare(CLONE_FS) gives this thread its own cwd, root and
            // umask; fchdir to a descriptor we hold.
            unsafe {
                if libc::unshare(libc::CLONE_FS) != 0 || libc::fchdir(fd) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the socket thread panicked")))
    })
}

/// Set the socket's mode (0600) and owner (`uid`, when given) through an `O_PATH
/// | O_NOFOLLOW` descriptor of its name, checked to be the socket just bound.
fn secure(f: &SocketFile, uid: Option<u32>) -> Result<()> {
    let path = &f.path;
    let c = hostdir::component(OsStr::new(&f.name)).map_err(|e| Error::io(path, e))?;
    // SAFETY: valid directory fd and C string; the fd is owned below.
    let fd = unsafe {
        libc::openat(
            f.dir.fd().as_raw_fd(),
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(Error::io(path, io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let st = hostdir::fstat(&fd).map_err(|e| Error::io(path, e))?;
    if FileId::of(&st) != f.id {
        return Err(Error::Conflict(format!(
            "agent socket {} was replaced while it was being set up",
            path.display()
        )));
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        hostdir::proc_path(&fd),
        std::fs::Permissions::from_mode(0o600),
    )
    .map_err(|e| Error::io(path, e))?;
    if let Some(uid) = uid {
        // SAFETY: valid fd and an empty C string with AT_EMPTY_PATH.
        let rc = unsafe {
            libc::fchownat(
                fd.as_raw_fd(),
                c"".as_ptr(),
                uid,
                u32::MAX,
                libc::AT_EMPTY_PATH,
            )
        };
        if rc != 0 {
            return Err(Error::io(path, io::Error::last_os_error()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(path: &Path) -> AgentSocket {
        AgentSocket {
            path: path.to_path_buf(),
            uid: None,
        }
    }

    #[test]
    fn bound_through_the_directory_and_removed_only_if_still_ours() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let p = run.join("a.sock");
        let (l, f) = bind(&sock(&p)).unwrap();
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let md = std::fs::symlink_metadata(&p).unwrap();
        assert!(md.file_type().is_socket());
        assert_eq!(md.permissions().mode() & 0o777, 0o600);
        // In use: refused.
        assert!(matches!(bind(&sock(&p)), Err(Error::Conflict(_))));
        // The directory moved away and a symlink to another directory holding a
        // socket of that name in its place: that one stays, ours goes.
        let other = d.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let theirs = UnixListener::bind(other.join("a.sock")).unwrap();
        std::fs::rename(&run, d.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&other, &run).unwrap();
        drop(f);
        assert!(other.join("a.sock").exists());
        assert!(!d.path().join("moved/a.sock").exists());
        drop((l, theirs));
        // Bound again through the symlink: refused, nothing created there.
        std::fs::remove_file(other.join("a.sock")).unwrap();
        let e = bind(&sock(&p)).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!other.join("a.sock").exists());
        // A stale socket is replaced; a file is refused, never removed.
        std::fs::remove_file(&run).unwrap();
        std::fs::rename(d.path().join("moved"), &run).unwrap();
        drop(UnixListener::bind(&p).unwrap());
        drop(bind(&sock(&p)).unwrap());
        assert!(!p.exists());
        std::fs::write(&p, "x").unwrap();
        assert!(matches!(bind(&sock(&p)), Err(Error::Invalid(_))));
        assert!(p.exists());
    }

    #[test]
    fn a_directory_of_another_uid_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        std::fs::create_dir(&run).unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        std::os::unix::fs::chown(&run, Some(1234), None).unwrap();
        let e = bind(&sock(&run.join("a.sock"))).unwrap_err();
        assert!(matches!(e, Error::Forbidden(_)), "{e}");
        let a = AgentSocket {
            path: run.join("a.sock"),
            uid: Some(1234),
        };
        bind(&a).unwrap();
    }
}
