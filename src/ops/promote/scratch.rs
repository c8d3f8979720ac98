//! A private temporary directory for one promote ([`Scratch`]): the temporary index
//! and, where nothing may be written to the repository (patch, no git origin), a
//! temporary object directory or repository. Git runs as the repository's owner,
//! so what it writes here must belong to that owner — given without ever changing
//! the owner of a file by its path (issue 21, defect 7: a symlink swapped in between
//! `mkdir` and `chown` would have root give any file to the owner).
//!
//! Layout and invariants, when we are root and the repository belongs to someone
//! else (its owner runs git):
//! - the top directory (`treefork-promote-<random>` under the system temporary
//!   directory) is made by us, mode 0711, and stays ours: no one else can create,
//!   rename or replace a name in it, so a descriptor opened on a name we just made
//!   there is the directory we just made;
//! - everything the owner gets is made by `mkdirat` on the top's descriptor, opened
//!   `O_DIRECTORY | O_NOFOLLOW` and `fchown`ed through that descriptor: `work/`
//!   (where [`Scratch::path`] names files git writes, e.g. the index) and each
//!   [`Scratch::mkdir`];
//! - it is removed (without following links) when dropped.
//!
//! When we are not root, or the repository is ours, the same without ownership
//! changes (mode 0700).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A private temporary directory for one promote, removed when dropped.
pub(super) struct Scratch {
    /// The top directory (ours).
    dir: PathBuf,
    /// Its descriptor: every directory in it is made and given through it.
    fd: OwnedFd,
    /// Who runs git (owns what we create here), when not us.
    owner: Option<(u32, u32)>,
}

impl Scratch {
    /// A fresh directory under the system temporary directory, for git run by the
    /// owner of `repo` (see the module docs).
    pub fn new(repo: &Path) -> Result<Scratch> {
        Self::new_in(&std::env::temp_dir(), owner_of(repo)?)
    }

    /// A fresh directory in `base` for git run as `owner` (`None`: us).
    pub fn new_in(base: &Path, owner: Option<(u32, u32)>) -> Result<Scratch> {
        let mode = if owner.is_some() { 0o711 } else { 0o700 };
        for i in 0..16u32 {
            let t = crate::tree::Timespec::now();
            let tag =
                blake3::hash(format!("{}:{}:{}:{i}", std::process::id(), t.sec, t.nsec).as_bytes())
                    .to_hex()[..16]
                    .to_string();
            let dir = base.join(format!("treefork-promote-{tag}"));
            match std::fs::DirBuilder::new().mode(mode).create(&dir) {
                Ok(()) => {
                    let fd = open_dir(libc::AT_FDCWD, &dir)?;
                    let s = Scratch { dir, fd, owner };
                    // Ours, as made: a name in a sticky or private directory
                    // cannot be swapped by another uid.
                    // SAFETY: geteuid has no preconditions.
                    s.check_made(&s.fd, &s.dir, unsafe { libc::geteuid() })?;
                    s.mkdir("work")?;
                    return Ok(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&dir, e)),
            }
        }
        Err(Error::Conflict(
            "could not create a private temporary directory for promote".into(),
        ))
    }

    /// A new (private, mode 0700) directory `name` in the top directory, owned by
    /// whoever runs git: made and given through descriptors, never by path.
    pub fn mkdir(&self, name: &str) -> Result<PathBuf> {
        let p = self.dir.join(name);
        let c = CString::new(name)
            .map_err(|_| Error::Invalid(format!("scratch name {name:?} contains a NUL byte")))?;
        // SAFETY: valid dirfd and C string.
        if unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o700) } != 0 {
            return Err(Error::io(&p, std::io::Error::last_os_error()));
        }
        let fd = open_dir(self.fd.as_raw_fd(), Path::new(name))?;
        // SAFETY: geteuid has no preconditions.
        self.check_made(&fd, &p, unsafe { libc::geteuid() })?;
        if let Some((uid, gid)) = self.owner {
            // SAFETY: valid fd.
            if unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) } != 0 {
                return Err(Error::io(&p, std::io::Error::last_os_error()));
            }
        }
        Ok(p)
    }

    /// A path for a file git writes (inside `work/`, the owner's).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join("work").join(name)
    }

    /// The directory behind `fd` is one we just made at `p`: a directory of ours
    /// (`uid`). (Made in a directory no one else can write, that is all it can be.)
    fn check_made(&self, fd: &OwnedFd, p: &Path, uid: u32) -> Result<()> {
        // SAFETY: an all-zero stat is a valid out-buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and buffer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::io(p, std::io::Error::last_os_error()));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != uid {
            return Err(Error::Conflict(format!(
                "promote's temporary directory {} was replaced while it was being made",
                p.display()
            )));
        }
        Ok(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Removes links, never what they point to.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)`: a symlink at the
/// last component is refused (`ELOOP`/`ENOTDIR`), never followed.
fn open_dir(dirfd: i32, path: &Path) -> Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::Invalid(format!("path {} contains a NUL byte", path.display())))?;
    // SAFETY: valid dirfd and C string.
    let fd = unsafe {
        libc::openat(
            dirfd,
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(Error::io(path, std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The uid and gid git runs as on `repo` when that is not us (we are root and
/// it belongs to someone else), as in [`crate::lifecycle::git::command`].
fn owner_of(repo: &Path) -> Result<Option<(u32, u32)>> {
    let md = std::fs::metadata(repo).map_err(|e| Error::io(repo, e))?;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    Ok((root && md.uid() != 0).then_some((md.uid(), md.gid())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    const OWNER: u32 = 65534;

    fn root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    /// Run `script` with /bin/sh as [`OWNER`]; whether it succeeded.
    fn as_owner(script: &str) -> bool {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(script);
        // SAFETY: only async-signal-safe libc calls between fork and exec.
        unsafe {
            c.pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(OWNER) != 0
                    || libc::setuid(OWNER) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        c.status().unwrap().success()
    }

    /// The repository's owner (who runs git) gets directories it can write, but
    /// no way to make root change the owner of anything else: the names root
    /// creates and gives away live in a directory only root can write.
    #[test]
    fn the_owner_cannot_swap_what_root_gives_it() {
        if !root() {
            eprintln!("skipped: needs root");
            return;
        }
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "root's").unwrap();
        let s = Scratch::new_in(base.path(), Some((OWNER, OWNER))).unwrap();
        let top = std::fs::symlink_metadata(&s.dir).unwrap();
        assert_eq!(top.uid(), 0, "the top directory stays root's");
        assert_eq!(top.mode() & 0o7777, 0o711);
        // The owner can write where git writes...
        let work = s.path("index");
        assert!(as_owner(&format!("echo x > '{}'", work.display())));
        // ...but cannot plant a name where root will make (and give) the next
        // directory: the swap the old chown-by-path followed.
        let planted = s.dir.join("objects");
        assert!(!as_owner(&format!(
            "ln -s '{}' '{}'",
            victim.display(),
            planted.display()
        )));
        let objects = s.mkdir("objects").unwrap();
        let md = std::fs::symlink_metadata(&objects).unwrap();
        assert!(md.is_dir());
        assert_eq!(
            (md.uid(), md.gid(), md.mode() & 0o777),
            (OWNER, OWNER, 0o700)
        );
        assert!(as_owner(&format!("mkdir '{}/pack'", objects.display())));
        assert_eq!(std::fs::metadata(&victim).unwrap().uid(), 0);
        let dir = s.dir.clone();
        drop(s);
        assert!(!dir.exists());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's");
    }

    /// Whatever stands at a name root is about to make is never followed or given
    /// away: a symlink there (planted by anyone who could) fails the `mkdirat`
    /// and is never opened; a directory of someone else fails the check.
    #[test]
    fn a_planted_symlink_is_never_followed_or_given_away() {
        if !root() {
            eprintln!("skipped: needs root");
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "root's").unwrap();
        let s = Scratch::new_in(base.path(), Some((OWNER, OWNER))).unwrap();
        std::os::unix::fs::symlink(&victim, s.dir.join("repo")).unwrap();
        s.mkdir("repo").unwrap_err();
        assert_eq!(std::fs::metadata(&victim).unwrap().uid(), 0);
        // A directory of another uid.
        let other = s.dir.join("other");
        std::fs::create_dir(&other).unwrap();
        std::os::unix::fs::chown(&other, Some(OWNER), Some(OWNER)).unwrap();
        let fd = open_dir(s.fd.as_raw_fd(), Path::new("other")).unwrap();
        s.check_made(&fd, &other, 0).unwrap_err();
        let link = s.dir.join("link");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        open_dir(s.fd.as_raw_fd(), Path::new("link")).unwrap_err();
    }
}
