//! Operations on names and attributes: lookup, forget, getattr, setattr, readlink,
//! the creations (mknod, mkdir, symlink, create, link), unlink, rmdir and rename.
//! Transport-neutral (see `request.rs`); the transports call them.

use super::Changing;
use super::convert::caller;
use super::request::{Created, FOPEN_KEEP_CACHE, Looked, Req, SetattrIn, Stat};
use super::{TreeforkFs, show};
use crate::error::Error;
use crate::session::posix::{NewNode, SetAttr};
use crate::tree::Kind;

impl TreeforkFs {
    /// A miss is [`Looked::Negative`] (the kernel caches it for the TTL).
    pub(crate) fn lookup(&self, _req: &Req, parent: u64, name: &[u8]) -> Result<Looked, Error> {
        guarded!(self, "lookup", [parent, name = show(name)], {
            match self.session.lookup(parent, name) {
                Ok(s) => Ok(Looked::Found(s)),
                Err(Error::Posix(libc::ENOENT)) => Ok(Looked::Negative),
                Err(e) => Err(e),
            }
        })
    }

    /// The kernel drops `nlookup` references to `ino` (FUSE_BATCH_FORGET: one call
    /// per node, as fuser's default `batch_forget` does).
    pub(crate) fn forget(&self, ino: u64, nlookup: u64) {
        let _ = guarded!(self, "forget", [ino, nlookup], {
            self.session.forget(ino, nlookup);
            Ok(())
        });
    }

    pub(crate) fn getattr(&self, _req: &Req, ino: u64, _fh: Option<u64>) -> Result<Stat, Error> {
        guarded!(self, "getattr", [ino], { self.session.getattr(ino) })
    }

    pub(crate) fn setattr(&self, req: &Req, ino: u64, a: &SetattrIn) -> Result<Stat, Error> {
        self.changing(req.pid, Changing::Ino(ino));
        let SetattrIn {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
            ctime,
            fh: _,
        } = *a;
        guarded!(
            self,
            "setattr",
            [ino, mode, uid, gid, size, atime, mtime, ctime],
            {
                let a = SetAttr {
                    mode,
                    uid,
                    gid,
                    size,
                    atime: atime.map(|t| t.resolve()),
                    mtime: mtime.map(|t| t.resolve()),
                    ctime,
                    // Truncation by an unprivileged caller (uid 0 stands for
                    // CAP_FSETID) drops them.
                    kill_suidgid: size.is_some() && req.uid != 0,
                    // A chown, also chown(-1, -1): the kernel strips the mode it
                    // computed and sends only a ctime then (no other request sends
                    // a bare ctime: utimensat(OMIT, OMIT) sends nothing).
                    chown: (uid.is_some()
                        || gid.is_some()
                        || (ctime.is_some()
                            && [mode, size.map(|_| 0)].iter().all(Option::is_none)
                            && atime.is_none()
                            && mtime.is_none()))
                    .then(|| caller(req)),
                };
                self.session.setattr(ino, a)
            }
        )
    }

    pub(crate) fn readlink(&self, _req: &Req, ino: u64) -> Result<Vec<u8>, Error> {
        guarded!(self, "readlink", [ino], { self.session.readlink(ino) })
    }

    /// A regular file or a special file (fifo, socket, device); anything else EINVAL.
    pub(crate) fn mknod(
        &self,
        req: &Req,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u32,
    ) -> Result<Stat, Error> {
        self.changing(req.pid, Changing::Name(parent, name));
        guarded!(self, "mknod", [parent, name = show(name), mode, rdev], {
            let node = match Kind::from_mode(mode) {
                Some(Kind::File) => NewNode::File,
                Some(k @ (Kind::Fifo | Kind::Socket | Kind::CharDev | Kind::BlockDev)) => {
                    NewNode::Special(k, rdev)
                }
                _ => return Err(Error::Posix(libc::EINVAL)),
            };
            self.session
                .create_node(parent, name, node, mode, req.uid, req.gid)
        })
    }

    pub(crate) fn mkdir(
        &self,
        req: &Req,
        parent: u64,
        name: &[u8],
        mode: u32,
    ) -> Result<Stat, Error> {
        self.changing(req.pid, Changing::Name(parent, name));
        guarded!(self, "mkdir", [parent, name = show(name), mode], {
            self.session
                .create_node(parent, name, NewNode::Dir, mode, req.uid, req.gid)
        })
    }

    pub(crate) fn unlink(&self, req: &Req, parent: u64, name: &[u8]) -> Result<(), Error> {
        self.changing(req.pid, Changing::Name(parent, name));
        guarded!(self, "unlink", [parent, name = show(name)], {
            self.session.remove(parent, name, false)
        })
    }

    pub(crate) fn rmdir(&self, req: &Req, parent: u64, name: &[u8]) -> Result<(), Error> {
        self.changing(req.pid, Changing::Name(parent, name));
        guarded!(self, "rmdir", [parent, name = show(name)], {
            self.session.remove(parent, name, true)
        })
    }

    pub(crate) fn symlink(
        &self,
        req: &Req,
        parent: u64,
        link_name: &[u8],
        target: &[u8],
    ) -> Result<Stat, Error> {
        self.changing(req.pid, Changing::Name(parent, link_name));
        guarded!(
            self,
            "symlink",
            [parent, link_name = show(link_name), target = show(target)],
            {
                self.session.create_node(
                    parent,
                    link_name,
                    NewNode::Symlink(target),
                    0o777,
                    req.uid,
                    req.gid,
                )
            }
        )
    }

    /// `flags`: RENAME_NOREPLACE, RENAME_EXCHANGE (renameat2).
    pub(crate) fn rename(
        &self,
        req: &Req,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<(), Error> {
        self.session.watch.note(req.pid);
        self.session.touch_rename(parent, name, newparent, newname);
        guarded!(
            self,
            "rename",
            [
                parent,
                name = show(name),
                newparent,
                newname = show(newname),
                flags
            ],
            { self.session.rename(parent, name, newparent, newname, flags) }
        )
    }

    pub(crate) fn link(
        &self,
        req: &Req,
        ino: u64,
        newparent: u64,
        newname: &[u8],
    ) -> Result<Stat, Error> {
        self.changing(req.pid, Changing::Name(newparent, newname));
        guarded!(self, "link", [ino, newparent, newname = show(newname)], {
            self.session.link(ino, newparent, newname)
        })
    }

    /// A new regular file, opened (the open counted as `open` counts it).
    pub(crate) fn create(
        &self,
        req: &Req,
        parent: u64,
        name: &[u8],
        mode: u32,
        _flags: i32,
    ) -> Result<Created, Error> {
        self.changing(req.pid, Changing::Name(parent, name));
        guarded!(self, "create", [parent, name = show(name), mode], {
            let s =
                self.session
                    .create_node(parent, name, NewNode::File, mode, req.uid, req.gid)?;
            let stat = self.session.open_handle(s.ino, false)?;
            Ok(Created {
                stat,
                fh: 0,
                open_flags: FOPEN_KEEP_CACHE,
            })
        })
    }
}
