//! Operations on directory listings: opendir, readdir, readdirplus, releasedir and
//! fsyncdir. Transport-neutral (see `request.rs`): a listing fills the transport's
//! reply buffer through a [`DirSink`] or [`DirPlusSink`].

use std::time::Duration;

use super::request::{DirPlusSink, DirSink, FOPEN_CACHE_DIR, FOPEN_KEEP_CACHE, Opened, Req, Stat};
use super::{TTL, TreeforkFs};
use crate::error::Error;
use crate::tree::Kind;

/// Entries per readdir reply we prepare (the kernel's buffer takes what fits; the
/// rest is read again from the next cookie).
const READDIR_PAGE: usize = 512;
/// Entries per readdirplus reply we prepare (each takes a kernel reference, given
/// back when it does not fit; ~25 fit in a 4 KiB buffer).
const READDIRPLUS_PAGE: usize = 64;

impl TreeforkFs {
    /// ENOSYS once INIT settled FUSE_NO_OPENDIR_SUPPORT; ENOTDIR for a non-directory.
    pub(crate) fn opendir(&self, _req: &Req, ino: u64, _flags: i32) -> Result<Opened, Error> {
        guarded!(self, "opendir", [ino], {
            if self.negotiation().no_opendir {
                return Err(Error::Posix(libc::ENOSYS));
            }
            match self.session.getattr(ino)? {
                // The kernel may keep listings: it drops them itself when an entry
                // changes through this mount, and checkout/restore invalidate every
                // directory whose entries they change.
                s if s.kind == Kind::Dir => Ok(Opened {
                    fh: 0,
                    open_flags: FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE,
                }),
                _ => Err(Error::Posix(libc::ENOTDIR)),
            }
        })
    }

    /// The entries after cookie `offset` (0: from the start; `.` and `..` first),
    /// into `sink` until it is full. Stateless: no open handle.
    pub(crate) fn readdir(
        &self,
        _req: &Req,
        ino: u64,
        _fh: u64,
        offset: u64,
        sink: &mut dyn DirSink,
    ) -> Result<(), Error> {
        guarded!(self, "readdir", [ino, offset], {
            let page = self
                .session
                .readdir_page(ino, offset, READDIR_PAGE, false)?;
            for (cookie, e, _) in page {
                if sink.add(e.ino, cookie, e.kind, &e.name) {
                    break;
                }
            }
            Ok(())
        })
    }

    /// Entries with their attributes, so `ls -l`, `du`, `git status` do not look up
    /// each name. Each entry added (except `.` and `..`, sent without a node id)
    /// counts a kernel reference, like a lookup; the page is read under one lock,
    /// and the references of entries that did not fit are given back.
    pub(crate) fn readdirplus(
        &self,
        _req: &Req,
        ino: u64,
        _fh: u64,
        offset: u64,
        sink: &mut dyn DirPlusSink,
    ) -> Result<(), Error> {
        guarded!(self, "readdirplus", [ino, offset], {
            let page = self
                .session
                .readdir_page(ino, offset, READDIRPLUS_PAGE, true)?;
            let mut unsent = Vec::new();
            let mut it = page.into_iter();
            for (cookie, e, st) in it.by_ref() {
                let full = match &st {
                    Some(s) => sink.add(cookie, &e.name, s, TTL),
                    None => {
                        let dot = Stat {
                            ino: 0,
                            kind: Kind::Dir,
                            attr: Default::default(),
                            blocks: 0,
                        };
                        sink.add(cookie, &e.name, &dot, Duration::ZERO)
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
            Ok(())
        })
    }

    pub(crate) fn releasedir(&self, _req: &Req, _ino: u64, _fh: u64) -> Result<(), Error> {
        guarded!(self, "releasedir", [], { Ok(()) })
    }

    /// Makes everything pending durable (the whole session).
    pub(crate) fn fsyncdir(
        &self,
        _req: &Req,
        _ino: u64,
        _fh: u64,
        _datasync: bool,
    ) -> Result<(), Error> {
        guarded!(self, "fsyncdir", [], { self.session.flush().map(|_| ()) })
    }
}
