//! FUSE requests on file contents and open files: open, read, write, flush,
//! release, fsync, fallocate and lseek. The `Filesystem` impl (mod.rs) forwards to
//! them.

use fuser::{
    Errno, FileHandle, FopenFlags, INodeNo, LockOwner, OpenFlags, ReplyData, ReplyEmpty,
    ReplyLseek, ReplyOpen, ReplyWrite, Request, WriteFlags,
};

use super::Changing;
use super::TreeforkFs;
use super::convert::{errno, reply_empty};

// fuser's handler signatures, kept as the `Filesystem` trait has them.
#[allow(clippy::too_many_arguments)]
impl TreeforkFs {
    pub(super) fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        guarded!(self, "open", [ino, flags], {
            // Nothing per open file needs the daemon: an open file pins its kernel inode
            // (so its lookup count keeps an unlinked file alive), O_TRUNC comes as a
            // SETATTR, and files keep their page cache (KEEP_CACHE is the kernel's
            // default without open).
            if self.no_open {
                return reply.error(Errno::ENOSYS);
            }
            let write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
            match self.session.open_handle(ino.0, write) {
                Ok(_) => reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE),
                Err(e) => reply.error(errno(e)),
            }
        })
    }

    pub(super) fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        guarded!(self, "read", [ino, offset, size], {
            match self.session.read(ino.0, offset, size) {
                Ok(d) => reply.data(&d),
                Err(e) => {
                    self.log_read_failure(ino.0, &e);
                    reply.error(errno(e))
                }
            }
        })
    }

    pub(super) fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        crate::failpoint::fuse_write_delay();
        self.changing(req.pid(), Changing::Ino(ino.0));
        guarded!(self, "write", [ino, offset, data.len(), write_flags], {
            if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
                match self.session.kill_suidgid(ino.0) {
                    Ok(true) => self.inval_attr(ino),
                    Ok(false) => {}
                    Err(e) => return reply.error(errno(e)),
                }
            }
            match self.session.write(ino.0, offset, data) {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(errno(e)),
            }
        })
    }

    pub(super) fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        guarded!(self, "flush", [], {
            // Nothing to do on close(2) (data reaches us by writeback; fsync is the
            // durability point): ENOSYS makes the kernel stop sending FLUSH.
            reply.error(Errno::ENOSYS)
        })
    }

    pub(super) fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        guarded!(self, "release", [ino], {
            self.session.release(ino.0);
            reply.ok()
        })
    }

    pub(super) fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        guarded!(self, "fsync", [ino], {
            let r = self.session.flush().map(|_| ());
            if r.is_ok() {
                // Sealing may have changed st_blocks.
                self.inval_attr(ino);
            }
            reply_empty(r, reply)
        })
    }

    pub(super) fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.changing(req.pid(), Changing::Ino(ino.0));
        guarded!(self, "fallocate", [ino, offset, length, mode], {
            reply_empty(self.session.fallocate(ino.0, offset, length, mode), reply)
        })
    }

    pub(super) fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        guarded!(self, "lseek", [ino, offset, whence], {
            if offset < 0 {
                return reply.error(Errno::ENXIO);
            }
            match self.session.seek_data_hole(ino.0, offset as u64, whence) {
                Ok(o) => reply.offset(o as i64),
                Err(e) => reply.error(errno(e)),
            }
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
    fn log_read_failure(&self, ino: u64, e: &crate::error::Error) {
        use crate::error::Error;
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
