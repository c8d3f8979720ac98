//! Operations on file contents and open files: open, read, write, flush, release,
//! fsync, fallocate and lseek. Transport-neutral (see `request.rs`); the transports
//! call them.

use super::Changing;
use super::TreeforkFs;
use super::request::{FOPEN_KEEP_CACHE, FUSE_WRITE_KILL_SUIDGID, Opened, Req};
use crate::error::Error;

impl TreeforkFs {
    /// ENOSYS once INIT settled FUSE_NO_OPEN_SUPPORT (the kernel then stops asking).
    pub(crate) fn open(&self, _req: &Req, ino: u64, flags: i32) -> Result<Opened, Error> {
        guarded!(self, "open", [ino, flags], {
            // Nothing per open file needs the daemon: an open file pins its kernel inode
            // (so its lookup count keeps an unlinked file alive), O_TRUNC comes as a
            // SETATTR, and files keep their page cache (KEEP_CACHE is the kernel's
            // default without open).
            if self.negotiation().no_open {
                return Err(Error::Posix(libc::ENOSYS));
            }
            let write = flags & libc::O_ACCMODE != libc::O_RDONLY;
            self.session.open_handle(ino, write)?;
            Ok(Opened {
                fh: 0,
                open_flags: FOPEN_KEEP_CACHE,
            })
        })
    }

    /// At most `size` bytes at `offset` (fewer at the end of the file).
    pub(crate) fn read(
        &self,
        _req: &Req,
        ino: u64,
        _fh: u64,
        offset: u64,
        size: u32,
    ) -> Result<Vec<u8>, Error> {
        guarded!(self, "read", [ino, offset, size], {
            self.session.read(ino, offset, size).inspect_err(|e| {
                self.log_read_failure(ino, e);
            })
        })
    }

    /// `write_flags`: the request's `write_flags` (only
    /// [`FUSE_WRITE_KILL_SUIDGID`] is read). Answers the bytes written.
    pub(crate) fn write(
        &self,
        req: &Req,
        ino: u64,
        _fh: u64,
        offset: u64,
        data: &[u8],
        write_flags: u32,
    ) -> Result<u32, Error> {
        crate::failpoint::fuse_write_delay();
        self.changing(req.pid, Changing::Ino(ino));
        guarded!(
            self,
            "write",
            [ino, offset, len = data.len(), write_flags],
            {
                if write_flags & FUSE_WRITE_KILL_SUIDGID != 0 && self.session.kill_suidgid(ino)? {
                    self.inval_attr(ino);
                }
                self.session.write(ino, offset, data)
            }
        )
    }

    /// Nothing to do on close(2) (data reaches us by writeback; fsync is the
    /// durability point): ENOSYS makes the kernel stop sending FLUSH.
    pub(crate) fn flush(
        &self,
        _req: &Req,
        _ino: u64,
        _fh: u64,
        _lock_owner: u64,
    ) -> Result<(), Error> {
        guarded!(self, "flush", [], { Err(Error::Posix(libc::ENOSYS)) })
    }

    pub(crate) fn release(&self, _req: &Req, ino: u64, _fh: u64) -> Result<(), Error> {
        guarded!(self, "release", [ino], {
            self.session.release(ino);
            Ok(())
        })
    }

    /// Makes everything pending durable (the whole session, not only `ino`).
    pub(crate) fn fsync(
        &self,
        _req: &Req,
        ino: u64,
        _fh: u64,
        _datasync: bool,
    ) -> Result<(), Error> {
        guarded!(self, "fsync", [ino], {
            self.session.flush()?;
            // Sealing may have changed st_blocks.
            self.inval_attr(ino);
            Ok(())
        })
    }

    pub(crate) fn fallocate(
        &self,
        req: &Req,
        ino: u64,
        _fh: u64,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> Result<(), Error> {
        self.changing(req.pid, Changing::Ino(ino));
        guarded!(self, "fallocate", [ino, offset, length, mode], {
            self.session.fallocate(ino, offset, length, mode)
        })
    }

    /// SEEK_DATA / SEEK_HOLE: the offset found.
    pub(crate) fn lseek(
        &self,
        _req: &Req,
        ino: u64,
        _fh: u64,
        offset: i64,
        whence: i32,
    ) -> Result<i64, Error> {
        guarded!(self, "lseek", [ino, offset, whence], {
            if offset < 0 {
                return Err(Error::Posix(libc::ENXIO));
            }
            let o = self.session.seek_data_hole(ino, offset as u64, whence)?;
            Ok(o as i64)
        })
    }
}

/// A failed read of a file logs at most one line per file per this interval (a
/// big read of a lazy file whose remote is down fails once per block).
const READ_FAILURE_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

impl TreeforkFs {
    /// Log a read that failed for want of data (a remote failure, a missing or
    /// corrupt object): one line naming the session and the file's path, rate
    /// limited per file (see [`READ_FAILURE_LOG_EVERY`]).
    fn log_read_failure(&self, ino: u64, e: &Error) {
        use std::collections::HashMap;
        use std::sync::{Mutex, OnceLock};
        use std::time::Instant;
        if !matches!(
            e,
            Error::Remote { .. } | Error::Corrupt { .. } | Error::Missing(_)
        ) {
            return;
        }
        static LAST: OnceLock<Mutex<HashMap<(String, u64), Instant>>> = OnceLock::new();
        let key = (self.session.name().to_string(), ino);
        {
            let mut last = LAST.get_or_init(Default::default).lock().unwrap();
            let now = Instant::now();
            if last
                .get(&key)
                .is_some_and(|t| now.duration_since(*t) < READ_FAILURE_LOG_EVERY)
            {
                return;
            }
            if last.len() >= 4096 {
                last.retain(|_, t| now.duration_since(*t) < READ_FAILURE_LOG_EVERY);
            }
            last.insert(key, now);
        }
        let path = self.session.lock().path_of(ino);
        log::error!(
            "session {}: read of {path} failed ({}): {e}",
            self.session.name(),
            e.code()
        );
    }
}
