//! The other operations: extended attributes, statfs and ioctl. Transport-neutral
//! (see `request.rs`); the transports call them.

use super::Changing;
use super::request::{Req, Statfs, Xattr};
use super::{TreeforkFs, show};
use crate::error::Error;

impl TreeforkFs {
    pub(crate) fn statfs(&self, _req: &Req, _ino: u64) -> Result<Statfs, Error> {
        guarded!(self, "statfs", [], {
            let (total, free, avail, used) = self.session.statfs();
            const B: u64 = 4096;
            Ok(Statfs {
                blocks: total / B,
                bfree: free / B,
                bavail: avail / B,
                files: used + avail / B,
                ffree: avail / B,
                bsize: B as u32,
                namelen: 255,
                frsize: B as u32,
            })
        })
    }

    /// `flags`: XATTR_CREATE, XATTR_REPLACE. `position` is macOS's (unused).
    pub(crate) fn setxattr(
        &self,
        req: &Req,
        ino: u64,
        name: &[u8],
        value: &[u8],
        flags: i32,
        _position: u32,
    ) -> Result<(), Error> {
        self.changing(req.pid, Changing::Ino(ino));
        guarded!(
            self,
            "setxattr",
            [ino, name = show(name), len = value.len(), flags],
            { self.session.setxattr(ino, name, value, flags) }
        )
    }

    /// `size` 0 asks the value's size; a value longer than `size` is ERANGE.
    pub(crate) fn getxattr(
        &self,
        _req: &Req,
        ino: u64,
        name: &[u8],
        size: u32,
    ) -> Result<Xattr, Error> {
        guarded!(self, "getxattr", [ino, name = show(name), size], {
            xattr_answer(self.session.getxattr(ino, name)?, size)
        })
    }

    /// The names, each NUL-terminated; `size` as for [`TreeforkFs::getxattr`].
    pub(crate) fn listxattr(&self, _req: &Req, ino: u64, size: u32) -> Result<Xattr, Error> {
        guarded!(self, "listxattr", [ino, size], {
            xattr_answer(self.session.listxattr(ino)?, size)
        })
    }

    pub(crate) fn removexattr(&self, req: &Req, ino: u64, name: &[u8]) -> Result<(), Error> {
        self.changing(req.pid, Changing::Ino(ino));
        guarded!(self, "removexattr", [ino, name = show(name)], {
            self.session.removexattr(ino, name)
        })
    }

    /// No ioctl is supported. Answered ENOTTY (what a regular file answers an
    /// unknown ioctl), quietly: every `open()` by a Python program asks (isatty).
    /// On success it would answer the ioctl's result and its output bytes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ioctl(
        &self,
        _req: &Req,
        _ino: u64,
        _fh: u64,
        _flags: u32,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
    ) -> Result<(i32, Vec<u8>), Error> {
        Err(Error::Posix(libc::ENOTTY))
    }
}

/// A value (or name list) as the caller asked it: its size when `size` is 0,
/// ERANGE when it does not fit `size`, else the bytes.
pub(super) fn xattr_answer(v: Vec<u8>, size: u32) -> Result<Xattr, Error> {
    if size == 0 {
        Ok(Xattr::Size(v.len() as u32))
    } else if v.len() > size as usize {
        Err(Error::Posix(libc::ERANGE))
    } else {
        Ok(Xattr::Data(v))
    }
}
