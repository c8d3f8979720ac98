//! The store lock: one daemon per store.
//!
//! Owns: `STORE/lock`, held with `flock(LOCK_EX)` for the daemon's lifetime and
//! holding its pid. The kernel drops an flock when its holder dies (even by SIGKILL),
//! so a dead daemon never leaves the store locked; the pid is only for messages.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{Error, Result};

/// A held store lock; released on drop (or process death).
pub struct StoreLock {
    _file: File,
}

impl StoreLock {
    /// Take the lock of the store at `dir` (creating `dir`), or report who holds it.
    pub fn acquire(dir: &Path) -> Result<StoreLock> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join("lock");
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        // SAFETY: flock on a valid, owned fd.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut s = String::new();
                let _ = f.read_to_string(&mut s);
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                    pid: s.trim().parse().ok(),
                });
            }
            return Err(Error::io(&path, err));
        }
        f.set_len(0).map_err(|e| Error::io(&path, e))?;
        f.seek(SeekFrom::Start(0))
            .map_err(|e| Error::io(&path, e))?;
        writeln!(f, "{}", std::process::id()).map_err(|e| Error::io(&path, e))?;
        Ok(StoreLock { _file: f })
    }
}

/// Whether no daemon holds the lock of the store at `dir` (probe only; takes nothing).
pub fn is_free(dir: &Path) -> bool {
    let Ok(f) = File::open(dir.join("lock")) else {
        return true;
    };
    // SAFETY: flock on a valid fd; a shared probe lock is dropped right away.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    rc == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_until_release() {
        let d = tempfile::tempdir().unwrap();
        let a = StoreLock::acquire(d.path()).unwrap();
        let e = StoreLock::acquire(d.path()).err().unwrap();
        assert!(matches!(e, Error::Locked { pid: Some(p), .. } if p == std::process::id()));
        drop(a);
        StoreLock::acquire(d.path()).unwrap();
    }
}
