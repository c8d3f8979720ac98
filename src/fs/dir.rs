//! FUSE requests on directory listings: opendir, readdir, readdirplus, releasedir
//! and fsyncdir. The `Filesystem` impl (mod.rs) forwards to them.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use fuser::{
    Errno, FileHandle, FopenFlags, Generation, INodeNo, OpenFlags, ReplyDirectory, ReplyEmpty,
    ReplyOpen, Request,
};

use super::convert::{attr, errno, file_type, reply_empty};
use super::{TTL, TreeforkFs};
use crate::session::Stat;
use crate::tree::Kind;

/// Entries per readdir reply we prepare (the kernel's buffer takes what fits; the
/// rest is read again from the next cookie).
const READDIR_PAGE: usize = 512;
/// Entries per readdirplus reply we prepare (each takes a kernel reference, given
/// back when it does not fit; ~25 fit in a 4 KiB buffer).
const READDIRPLUS_PAGE: usize = 64;

impl TreeforkFs {
    pub(super) fn opendir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _flags: OpenFlags,
        reply: ReplyOpen,
    ) {
        guarded!(self, "opendir", [ino], {
            if self.no_opendir {
                return reply.error(Errno::ENOSYS);
            }
            match self.session.getattr(ino.0) {
                Ok(s) if s.kind == Kind::Dir => {
                    // The kernel may keep listings: it drops them itself when an entry
                    // changes through this mount, and checkout/restore invalidate every
                    // directory whose entries they change.
                    reply.opened(
                        FileHandle(0),
                        FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
                    )
                }
                Ok(_) => reply.error(Errno::ENOTDIR),
                Err(e) => reply.error(errno(e)),
            }
        })
    }

    pub(super) fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        guarded!(self, "readdir", [ino, offset], {
            let page = match self
                .session
                .readdir_page(ino.0, offset, READDIR_PAGE, false)
            {
                Ok(p) => p,
                Err(e) => return reply.error(errno(e)),
            };
            for (cookie, e, _) in page {
                if reply.add(
                    INodeNo(e.ino),
                    cookie,
                    file_type(e.kind),
                    OsStr::from_bytes(&e.name),
                ) {
                    break;
                }
            }
            reply.ok()
        })
    }

    /// Entries with their attributes, so `ls -l`, `du`, `git status` do not look up
    /// each name. Each entry returned (except `.` and `..`, sent without a node id)
    /// counts a kernel reference, like a lookup; the page is read under one lock.
    pub(super) fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: fuser::ReplyDirectoryPlus,
    ) {
        guarded!(self, "readdirplus", [ino, offset], {
            let page = match self
                .session
                .readdir_page(ino.0, offset, READDIRPLUS_PAGE, true)
            {
                Ok(p) => p,
                Err(e) => return reply.error(errno(e)),
            };
            let mut unsent = Vec::new();
            let mut it = page.into_iter();
            for (cookie, e, st) in it.by_ref() {
                let full = match &st {
                    Some(s) => reply.add(
                        INodeNo(e.ino),
                        cookie,
                        OsStr::from_bytes(&e.name),
                        &TTL,
                        &attr(s),
                        Generation(0),
                    ),
                    None => {
                        let a = Stat {
                            ino: 0,
                            kind: Kind::Dir,
                            attr: Default::default(),
                            blocks: 0,
                        };
                        reply.add(
                            INodeNo(0),
                            cookie,
                            OsStr::from_bytes(&e.name),
                            &Duration::ZERO,
                            &attr(&a),
                            Generation(0),
                        )
                    }
                };
                if full {
                    if st.is_some() {
                        unsent.push(e.ino);
                    }
                    break;
                }
            }
            // Give back the references of entries that did not fit.
            unsent.extend(it.filter(|(_, _, st)| st.is_some()).map(|(_, e, _)| e.ino));
            self.session.forget_many(&unsent);
            reply.ok()
        })
    }

    pub(super) fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        guarded!(self, "releasedir", [], { reply.ok() })
    }

    pub(super) fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        guarded!(self, "fsyncdir", [], {
            reply_empty(self.session.flush().map(|_| ()), reply)
        })
    }
}
