//! Mountpoint safety: where the daemon (often root) may put a mount, and which
//! mount it may take away.
//!
//! Owns: resolving a requested mountpoint exactly once ([`open_mountpoint`]: `openat2`
//! with `RESOLVE_NO_SYMLINKS`, `O_PATH | O_DIRECTORY`, the parent directory first,
//! then the final name relative to it), every check on it (directory, owner for
//! agents, empty, not already a mount) done on that descriptor, creating a missing
//! mountpoint with `mkdirat` on checked parent descriptors, the FUSE `mount(2)`
//! itself, made through `/proc/self/fd/N` of the same descriptor ([`mount_fuse`]) so
//! the path is never resolved again, identifying the new mount
//! ([`MountDir::identify_mount`]: the parent's descriptor, the name and the mount
//! id, through which every later `syncfs` and unmount goes, see
//! [`crate::fs::outside`]), and detaching a stale mount ([`detach_stale`],
//! [`detach`]).
//!
//! Invariants: a mount lands on the very directory that was checked, whatever is
//! renamed or swapped for a symlink meanwhile; a mountpoint requested by an agent is
//! a directory owned by the agent's uid (or created by us, inside one, and given to
//! it); a mount made for an agent is `nosuid,nodev`. Nothing is detached by a path:
//! only a mount reached without symlinks and verified by id at the moment of the
//! `umount2`; for an agent's path, only a mount whose id this store's registry
//! recorded when it made it (a dead daemon's leftover), never one answering
//! ENOTCONN alone.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

pub use crate::control::MountFor;
use crate::error::{Error, Result};
use crate::fs::outside::{MountId, MountRef, mount_error};

/// A checked mountpoint: an `O_PATH` descriptor of the directory and the path it
/// was requested as (for messages and the registry).
#[derive(Debug)]
pub struct MountDir {
    fd: OwnedFd,
    path: PathBuf,
    for_: MountFor,
}

impl MountDir {
    /// The path the mountpoint was requested as.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Who the mount is made for.
    pub fn made_for(&self) -> MountFor {
        self.for_
    }

    /// The owner (uid, gid) of the directory.
    pub fn owner(&self) -> Result<(u32, u32)> {
        let st = fstat(&self.fd, &self.path)?;
        Ok((st.st_uid, st.st_gid))
    }

    /// Identify the mount just made on this directory (see
    /// [`crate::fs::outside::MountRef`]): every later syscall on it goes through
    /// its parent's descriptor and is checked against the id read now. The
    /// directory is found where it is now (`/proc/self/fd/N`): an agent may have
    /// renamed it after it was checked and before the mount landed on it; once
    /// mounted it cannot move (EBUSY), but its ancestors can, so a miss is retried.
    pub fn identify_mount(&self) -> Result<MountRef> {
        let mut last = std::io::Error::from_raw_os_error(libc::ENOENT);
        for i in 0..10 {
            if i > 0 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let now = std::fs::read_link(self.proc_path()).map_err(|e| Error::io(&self.path, e))?;
            let (Some(parent), Some(name)) = (now.parent(), now.file_name()) else {
                break;
            };
            match open_dir_nofollow(libc::AT_FDCWD, parent)
                .and_then(|p| MountRef::identify(p, name, &self.path))
            {
                Ok(m) => return Ok(m),
                Err(e) => {
                    log::info!(
                        "{}: the new mount not found at {} yet: {e}",
                        self.path.display(),
                        now.display()
                    );
                    last = e;
                }
            }
        }
        Err(mount_error(&self.path, last))
    }

    fn proc_path(&self) -> PathBuf {
        crate::hostdir::proc_path(&self.fd)
    }
}

fn cstr(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::Invalid(format!("path {} contains a NUL byte", p.display())))
}

/// `openat2(dirfd, path, O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS)`
/// (see [`crate::hostdir`]).
fn open_dir_nofollow(dirfd: i32, path: &Path) -> std::io::Result<OwnedFd> {
    crate::hostdir::open_dir(dirfd, path)
}

fn fstat(fd: &OwnedFd, path: &Path) -> Result<libc::stat> {
    crate::hostdir::fstat(fd).map_err(|e| Error::io(path, e))
}

/// Whether the directory behind `fd` is the root of a mount.
fn is_mount_root(fd: &OwnedFd, path: &Path) -> Result<bool> {
    // SAFETY: an all-zero statx is a valid out-buffer.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, empty C string with AT_EMPTY_PATH, valid buffer.
    let rc = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BASIC_STATS,
            &mut stx,
        )
    };
    if rc != 0 {
        return Err(Error::io(path, std::io::Error::last_os_error()));
    }
    let bit = libc::STATX_ATTR_MOUNT_ROOT as u64;
    Ok(stx.stx_attributes_mask & bit != 0 && stx.stx_attributes & bit != 0)
}

fn refused_path(path: &Path, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOENT) => {
            Error::Invalid(format!("mountpoint {} does not exist", path.display()))
        }
        Some(libc::ELOOP) | Some(libc::EXDEV) => Error::Invalid(format!(
            "mountpoint {} goes through a symbolic link; name the real directory",
            path.display()
        )),
        Some(libc::ENOTDIR) => {
            Error::Invalid(format!("mountpoint {} is not a directory", path.display()))
        }
        _ => Error::io(path, e),
    }
}

fn not_owned(path: &Path, uid: u32) -> Error {
    Error::Forbidden(format!(
        "fork on an agent socket: the mountpoint {} must be a directory owned by uid {uid} (the agent), \
         or be created in one; for experiments and bisects the user can point the forks there with \
         `treefork config forks_dir=DIR`",
        path.display()
    ))
}

/// Open the mountpoint `path` once, for `who`, and check it: absolute, reached
/// without symbolic links, a directory, owned by the agent (agents), empty, and not
/// already a mount. A missing directory is created when `create` (as `git worktree
/// add` does), each level with `mkdirat` on the checked descriptor of its parent;
/// for an agent the deepest existing ancestor must be its own and what is created
/// is given to it. A stale mount there is detached first when it is provably ours
/// or, for the user, dead (see [`detach_stale`]; `ours_dead`: the id this store's
/// registry recorded for a mount at `path` no live daemon serves, see
/// [`super::Daemon::dead_mount_of_ours`]).
pub fn open_mountpoint(
    path: &Path,
    who: MountFor,
    create: bool,
    ours_dead: &dyn Fn() -> Option<MountId>,
) -> Result<MountDir> {
    if !path.is_absolute() {
        return Err(Error::Invalid(format!(
            "mountpoint {} must be an absolute path",
            path.display()
        )));
    }
    let (Some(parent_path), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Error::Invalid(format!(
            "mountpoint {} must name a directory below /",
            path.display()
        )));
    };
    detach_stale(path, who, ours_dead);
    let opened = open_dir_nofollow(libc::AT_FDCWD, parent_path).and_then(|parent| {
        let fd = open_dir_nofollow(parent.as_raw_fd(), Path::new(name))?;
        Ok((parent, fd))
    });
    let fd = match opened {
        Ok((_, fd)) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) && create => create_dirs(path, who)?.1,
        Err(e) => return Err(refused_path(path, e)),
    };
    let st = fstat(&fd, path)?;
    if let MountFor::Agent { uid, .. } = who
        && st.st_uid != uid
    {
        return Err(not_owned(path, uid));
    }
    if is_mount_root(&fd, path)? {
        return Err(Error::Conflict(format!(
            "{} is already a mount point",
            path.display()
        )));
    }
    let dir = MountDir {
        fd,
        path: path.to_path_buf(),
        for_: who,
    };
    let mut rd = std::fs::read_dir(dir.proc_path()).map_err(|e| Error::io(path, e))?;
    if rd.next().is_some() {
        return Err(Error::Invalid(format!(
            "mountpoint {} is not empty",
            path.display()
        )));
    }
    Ok(dir)
}

/// Detach a stale mount at `path` before mounting there. The path is resolved
/// without symlinks and the mount found there identified by id; it is detached
/// (through that identity) only when it is the very mount this store's registry
/// recorded for `path` and no live daemon serves (`ours_dead`; with a reusable
/// pre-6.8 id, it must also be dead), or, for the user (never for an agent), a
/// FUSE mount whose server is gone (a `stat` forced to the server answers
/// ENOTCONN). Anything else is left alone (the mount then fails: already a mount
/// point).
fn detach_stale(path: &Path, who: MountFor, ours_dead: &dyn Fn() -> Option<MountId>) {
    let Some(m) = find_mount(path) else {
        return;
    };
    let dead = || m.is_dead().unwrap_or(false);
    let why = if ours_dead() == Some(m.id()) && (m.id().unique || dead()) {
        "mount left by a dead daemon of this store"
    } else if matches!(who, MountFor::User) && dead() {
        "stale FUSE mount (its daemon died)"
    } else {
        return;
    };
    log::warn!("{}: {why}; detaching it ({})", path.display(), m.id());
    if let Err(e) = m.detach() {
        log::warn!("{}: cannot detach it: {e}", path.display());
    }
}

/// The mount whose root is at `path`, reached without symlinks, if there is one.
fn find_mount(path: &Path) -> Option<MountRef> {
    let (parent, name) = (path.parent()?, path.file_name()?);
    let parent = open_dir_nofollow(libc::AT_FDCWD, parent).ok()?;
    MountRef::identify(parent, name, path).ok()
}

/// Create the missing levels of `path` below its deepest existing ancestor, each
/// with `mkdirat` on the checked descriptor of its parent; returns the last one
/// and its parent's.
fn create_dirs(path: &Path, who: MountFor) -> Result<(OwnedFd, OwnedFd)> {
    let comps: Vec<Component> = path.components().collect();
    if comps.iter().any(|c| matches!(c, Component::ParentDir)) {
        return Err(Error::Invalid(format!(
            "mountpoint {} must not contain '..'",
            path.display()
        )));
    }
    // The deepest ancestor that exists (the root always does).
    let mut n = comps.len() - 1;
    let mut parent = loop {
        let anc: PathBuf = comps[..n].iter().collect();
        match open_dir_nofollow(libc::AT_FDCWD, &anc) {
            Ok(fd) => break fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && n > 1 => n -= 1,
            Err(e) => return Err(refused_path(&anc, e)),
        }
    };
    if let MountFor::Agent { uid, .. } = who {
        let anc: PathBuf = comps[..n].iter().collect();
        if fstat(&parent, &anc)?.st_uid != uid {
            return Err(not_owned(path, uid));
        }
    }
    let mut above = None;
    for comp in &comps[n..] {
        let name = Path::new(comp.as_os_str());
        let c = cstr(name)?;
        // SAFETY: valid dirfd and C string.
        if unsafe { libc::mkdirat(parent.as_raw_fd(), c.as_ptr(), 0o755) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(Error::io(path, e));
            }
        }
        let fd = open_dir_nofollow(parent.as_raw_fd(), name).map_err(|e| refused_path(path, e))?;
        if let MountFor::Agent { uid, gid } = who {
            // SAFETY: valid fd, empty C string with AT_EMPTY_PATH.
            let rc = unsafe {
                libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH)
            };
            if rc != 0 {
                return Err(Error::io(path, std::io::Error::last_os_error()));
            }
        }
        above = Some(std::mem::replace(&mut parent, fd));
    }
    log::info!("created mountpoint {}", path.display());
    let above = above
        .ok_or_else(|| Error::Invalid(format!("mountpoint {} already exists", path.display())))?;
    Ok((above, parent))
}

/// Mount a FUSE file system on `dir` through its descriptor; returns the
/// `/dev/fuse` descriptor to serve it with. `fsname` is shown as the mount source.
/// Always `nosuid`; `nodev` too when made for an agent.
pub fn mount_fuse(dir: &MountDir, fsname: &str) -> Result<OwnedFd> {
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map_err(|e| Error::io("/dev/fuse", e))?;
    let dev = OwnedFd::from(dev);
    let st = fstat(&dir.fd, &dir.path)?;
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let opts = format!(
        "fd={},rootmode={:o},user_id={uid},group_id={gid},default_permissions,allow_other",
        dev.as_raw_fd(),
        st.st_mode & libc::S_IFMT
    );
    let mut flags = libc::MS_NOSUID;
    if matches!(dir.for_, MountFor::Agent { .. }) {
        flags |= libc::MS_NODEV;
    }
    let source = CString::new(fsname).map_err(|_| Error::Invalid("NUL in fsname".into()))?;
    let target = cstr(&dir.proc_path())?;
    let opts = CString::new(opts).expect("no NUL");
    // SAFETY: valid C strings; the target is a magic link to our own O_PATH fd, so
    // the kernel mounts on exactly that directory.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            c"fuse".as_ptr(),
            flags,
            opts.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(Error::io(&dir.path, std::io::Error::last_os_error()));
    }
    Ok(dev)
}

/// Whether `p` is listed as a mount point in /proc/self/mountinfo.
pub fn is_mountpoint(p: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = p.to_string_lossy();
    info.lines().any(|l| {
        l.split(' ')
            .nth(4)
            .map(|m| unescape_mount(m) == want)
            .unwrap_or(false)
    })
}

fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Lazily detach the mount whose root is at `mp`, reached without symlinks and
/// verified by id at the moment of the detach (from a child process: see
/// [`crate::fs::outside`]); whether it was detached.
pub fn detach(mp: &Path) -> bool {
    find_mount(mp).is_some_and(|m| m.detach().is_ok())
}

/// [`detach`] only a dead FUSE mount (a `stat` forced to its server answers
/// ENOTCONN): for `umount` of a mount whose daemon died.
pub fn detach_dead(mp: &Path) -> bool {
    find_mount(mp).is_some_and(|m| m.is_dead().unwrap_or(false) && m.detach().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_are_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, d.path().join("link")).unwrap();
        let e =
            open_mountpoint(&d.path().join("link"), MountFor::User, true, &|| None).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        open_mountpoint(&real, MountFor::User, false, &|| None).unwrap();
        // Created through the link's parent: never through the link itself.
        let e = open_mountpoint(&d.path().join("link/sub"), MountFor::User, true, &|| None)
            .unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!real.join("sub").exists());
    }

    #[test]
    fn missing_levels_are_created_and_checked() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b/c");
        let m = open_mountpoint(&p, MountFor::User, true, &|| None).unwrap();
        assert!(p.is_dir());
        assert_eq!(m.path(), p);
        std::fs::write(p.join("f"), "x").unwrap();
        let e = open_mountpoint(&p, MountFor::User, true, &|| None).unwrap_err();
        assert!(e.to_string().contains("not empty"), "{e}");
        let e = open_mountpoint(&d.path().join("x"), MountFor::User, false, &|| None).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        // An agent needs its own ancestor.
        let agent = MountFor::Agent {
            uid: 65534,
            gid: 65534,
        };
        let e = open_mountpoint(&d.path().join("q"), agent, true, &|| None).unwrap_err();
        assert!(matches!(e, Error::Forbidden(_)), "{e}");
        assert!(!d.path().join("q").exists());
        let own = d.path().join("own");
        std::fs::create_dir(&own).unwrap();
        std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
        open_mountpoint(&own.join("w"), agent, true, &|| None).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(own.join("w")).unwrap().uid(), 65534);
    }
}
