//! The other FUSE requests: extended attributes, statfs and ioctl. The
//! `Filesystem` impl (mod.rs) forwards to them.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fuser::{Errno, FileHandle, INodeNo, ReplyEmpty, ReplyStatfs, ReplyXattr, Request};

use super::Changing;
use super::TreeforkFs;
use super::convert::{reply_empty, reply_xattr};

// fuser's handler signatures, kept as the `Filesystem` trait has them.
#[allow(clippy::too_many_arguments)]
impl TreeforkFs {
    pub(super) fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        guarded!(self, "statfs", [], {
            let (total, free, avail, used) = self.session.statfs();
            const B: u64 = 4096;
            let files = used + avail / B;
            reply.statfs(
                total / B,
                free / B,
                avail / B,
                files,
                avail / B,
                B as u32,
                255,
                B as u32,
            )
        })
    }

    pub(super) fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        self.changing(req.pid(), Changing::Ino(ino.0));
        guarded!(self, "setxattr", [ino, name, value.len(), flags], {
            reply_empty(
                self.session.setxattr(ino.0, name.as_bytes(), value, flags),
                reply,
            )
        })
    }

    pub(super) fn getxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        guarded!(self, "getxattr", [ino, name, size], {
            reply_xattr(self.session.getxattr(ino.0, name.as_bytes()), size, reply)
        })
    }

    pub(super) fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        guarded!(self, "listxattr", [ino, size], {
            reply_xattr(self.session.listxattr(ino.0), size, reply)
        })
    }

    pub(super) fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.changing(req.pid(), Changing::Ino(ino.0));
        guarded!(self, "removexattr", [ino, name], {
            reply_empty(self.session.removexattr(ino.0, name.as_bytes()), reply)
        })
    }

    /// No ioctl is supported. Answered ENOTTY (what a regular file answers an
    /// unknown ioctl), quietly: every `open()` by a Python program asks (isatty).
    pub(super) fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY)
    }
}
