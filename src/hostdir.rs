//! Directories of the host reached without symbolic links, and what the daemon
//! (often root) creates or removes in them, through their descriptors.
//!
//! Owns: opening a directory with `openat2(RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)` as an `O_PATH` descriptor ([`open_dir`], [`Dir`]), the
//! identity of a file ([`FileId`]: device and inode, read with `fstatat(...,
//! AT_SYMLINK_NOFOLLOW)`), and removal of one entry of such a directory by a single
//! name: an empty directory ([`Dir::remove_dir`]), a directory only while the name
//! still is the directory a descriptor holds ([`remove_dir_of`]), a mountpoint by
//! its name in the parent's descriptor kept since the mount was made ([`Entry`]),
//! a file only while the name still is the file that was made ([`Dir::unlink_if`]).
//!
//! Why: agents own directories on the host (a fork's mountpoint, an agent socket's
//! directory) and rename them or plant symlinks at will. A path resolved again
//! later leads wherever the agent points it; a descriptor opened without symlinks
//! when the directory was made or checked keeps naming that very directory
//! (renames of it or of its ancestors included), and `unlinkat(dirfd, name)` with
//! a single component reaches nothing else.
//!
//! Invariants: no function here follows a symbolic link, in any component; a name
//! given to an `*at` call is one component (no `/`, not `.` or `..`); what is
//! removed by identity is checked right before the `unlinkat` (a swap in between
//! takes write access to that directory, and what it could swap in there it could
//! remove itself).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The identity of a file: its device and inode numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl FileId {
    /// The identity in a `stat`.
    pub fn of(st: &libc::stat) -> FileId {
        FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }
}

/// A directory opened without symbolic links (`O_PATH`), with the path it was
/// opened as (for messages).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    /// Open the directory `path` (absolute) without following a symbolic link in
    /// any component.
    pub fn open(path: &Path) -> io::Result<Dir> {
        Ok(Dir {
            fd: open_dir(libc::AT_FDCWD, path)?,
            path: path.to_path_buf(),
        })
    }

    /// A directory descriptor already opened without symbolic links.
    pub fn from_fd(fd: OwnedFd, path: &Path) -> Dir {
        Dir {
            fd,
            path: path.to_path_buf(),
        }
    }

    /// The path it was opened as.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its descriptor.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// `fstat` of the directory.
    pub fn stat(&self) -> io::Result<libc::stat> {
        fstat(&self.fd)
    }

    /// `fstatat(name, AT_SYMLINK_NOFOLLOW)`: the entry `name` itself.
    pub fn stat_at(&self, name: &OsStr) -> io::Result<libc::stat> {
        stat_at(self.fd.as_raw_fd(), &component(name)?)
    }

    /// Remove the empty directory `name` of this directory (`unlinkat(...,
    /// AT_REMOVEDIR)`; a symbolic link of that name is not removed: ENOTDIR).
    pub fn remove_dir(&self, name: &OsStr) -> io::Result<()> {
        unlink_at(self.fd.as_raw_fd(), &component(name)?, libc::AT_REMOVEDIR)
    }

    /// Remove the file `name` of this directory only if it is still the file
    /// `id`; whether it was removed.
    pub fn unlink_if(&self, name: &OsStr, id: FileId) -> io::Result<bool> {
        let c = component(name)?;
        match stat_at(self.fd.as_raw_fd(), &c) {
            Ok(st) if FileId::of(&st) == id && !is_dir(&st) => {}
            Ok(_) => return Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(false),
            Err(e) => return Err(e),
        }
        unlink_at(self.fd.as_raw_fd(), &c, 0).map(|_| true)
    }

    /// `/proc/self/fd/N` of the descriptor: a path to this very directory (a
    /// magic link, so only for calls that take no other path through it).
    pub fn proc_path(&self) -> PathBuf {
        proc_path(&self.fd)
    }
}

/// An entry of a directory held by its descriptor: a directory the daemon made
/// or checked there (a mountpoint), to remove by its name in that very parent.
#[derive(Debug)]
pub struct Entry {
    parent: Dir,
    name: OsString,
}

impl Entry {
    /// The entry `name` of `parent`.
    pub fn new(parent: Dir, name: &OsStr) -> Entry {
        Entry {
            parent,
            name: name.to_os_string(),
        }
    }

    /// Its path, as the parent was opened.
    pub fn path(&self) -> PathBuf {
        self.parent.path.join(&self.name)
    }

    /// Remove the (empty) directory of this name in the parent; with
    /// `parent_too`, then the parent itself once empty, if its path still names
    /// it ([`remove_dir_of`]). Whether the entry was removed (not when gone, not a
    /// directory any more, or not empty).
    pub fn remove_dir(&self, parent_too: bool) -> io::Result<bool> {
        let removed = match self.parent.remove_dir(&self.name) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) || gone(&e) => false,
            Err(e) => return Err(e),
        };
        if parent_too {
            remove_dir_of(&self.parent.fd, &self.parent.path)?;
        }
        Ok(removed)
    }
}

/// `/proc/self/fd/N` of `fd`.
pub fn proc_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Remove the empty directory `fd` holds, which was made or checked at `path`,
/// from its parent (`path`'s parent, opened without symbolic links), only while
/// `path`'s name there is still that directory. Whether it was removed: not when
/// it was renamed or replaced (by a symlink, another directory), nor when it is
/// not empty.
pub fn remove_dir_of(fd: &OwnedFd, path: &Path) -> io::Result<bool> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let want = FileId::of(&fstat(fd)?);
    let parent = match Dir::open(parent) {
        Ok(p) => p,
        Err(e) if gone(&e) => return Ok(false),
        Err(e) => return Err(e),
    };
    match parent.stat_at(name) {
        Ok(st) if is_dir(&st) && FileId::of(&st) == want => {}
        Ok(_) => return Ok(false),
        Err(e) if gone(&e) => return Ok(false),
        Err(e) => return Err(e),
    }
    match parent.remove_dir(name) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) || gone(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Remove the empty directory `path` (absolute): its parent is opened without
/// symbolic links, then `unlinkat(parent, name, AT_REMOVEDIR)`. Whether it was
/// removed (not when missing, not a directory, not empty, or reached only
/// through a symlink). For a directory no descriptor was kept of.
pub fn remove_empty_dir(path: &Path) -> io::Result<bool> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let r = Dir::open(parent).and_then(|p| p.remove_dir(name));
    match r {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) || gone(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Errors that mean "not there as a directory reached without symlinks".
fn gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EXDEV)
    )
}

fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// `name` as one path component: not empty, no `/`, not `.` or `..`, no NUL.
pub fn component(name: &OsStr) -> io::Result<CString> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `openat2(dirfd, path, O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_MAGICLINKS)`: ELOOP when any component is a symbolic link.
pub fn open_dir(dirfd: RawFd, path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open_how is plain data; all-zero is its default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: valid C string and a properly sized open_how; the fd returned is owned
    // by nobody else.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor from openat2.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `fstat(fd)`.
pub fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// `fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)`.
fn stat_at(dirfd: RawFd, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, C string and buffer.
    if unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn unlink_at(dirfd: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: valid fd and C string.
    if unsafe { libc::unlinkat(dirfd, name.as_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn symlinks_are_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir_all(real.join("x")).unwrap();
        symlink(&real, d.path().join("link")).unwrap();
        let e = Dir::open(&d.path().join("link")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        assert!(!remove_empty_dir(&d.path().join("link/x")).unwrap());
        assert!(real.join("x").is_dir());
        // The link itself is no directory to remove.
        let top = Dir::open(d.path()).unwrap();
        assert_eq!(
            top.remove_dir(OsStr::new("link"))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ENOTDIR)
        );
        for bad in ["", ".", "..", "a/b"] {
            assert!(top.remove_dir(OsStr::new(bad)).is_err(), "{bad:?}");
        }
        assert!(remove_empty_dir(&real.join("x")).unwrap());
        assert!(!real.join("x").exists());
    }

    #[test]
    fn a_kept_descriptor_removes_only_its_own_directory() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let fd = open_dir(libc::AT_FDCWD, &a).unwrap();
        // Renamed, with a symlink to another empty directory in its place.
        let other = d.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::rename(&a, d.path().join("moved")).unwrap();
        symlink(&other, &a).unwrap();
        assert!(!remove_dir_of(&fd, &a).unwrap());
        assert!(other.is_dir() && d.path().join("moved").is_dir());
        // Another directory of that name: not it either.
        std::fs::remove_file(&a).unwrap();
        std::fs::create_dir(&a).unwrap();
        assert!(!remove_dir_of(&fd, &a).unwrap());
        assert!(a.is_dir());
        // Back in place: removed.
        std::fs::remove_dir(&a).unwrap();
        std::fs::rename(d.path().join("moved"), &a).unwrap();
        assert!(remove_dir_of(&fd, &a).unwrap());
        assert!(!a.exists());
    }

    #[test]
    fn a_file_is_unlinked_only_while_it_is_the_same() {
        let d = tempfile::tempdir().unwrap();
        let dir = Dir::open(d.path()).unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, "1").unwrap();
        let id = FileId::of(&dir.stat_at(OsStr::new("f")).unwrap());
        std::fs::rename(&f, d.path().join("g")).unwrap();
        std::fs::write(&f, "2").unwrap();
        assert!(!dir.unlink_if(OsStr::new("f"), id).unwrap());
        assert!(f.exists());
        std::fs::remove_file(&f).unwrap();
        assert!(!dir.unlink_if(OsStr::new("f"), id).unwrap());
        std::fs::rename(d.path().join("g"), &f).unwrap();
        assert!(dir.unlink_if(OsStr::new("f"), id).unwrap());
        assert!(!f.exists());
    }
}
