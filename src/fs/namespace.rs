//! FUSE requests on names and attributes: lookup, forget, getattr, setattr,
//! readlink, the creations (mknod, mkdir, symlink, create, link), unlink, rmdir and
//! rename. The `Filesystem` impl (mod.rs) forwards to them.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    Errno, FileHandle, FopenFlags, Generation, INodeNo, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyEmpty, ReplyEntry, Request, TimeOrNow,
};

use super::Changing;
use super::convert::{
    attr, caller, errno, from_system, reply_empty, reply_entry, reply_lookup, time_or_now,
};
use super::{TTL, TreeforkFs};
use crate::session::ops::{NewNode, SetAttr};
use crate::tree::Kind;

// fuser's handler signatures, kept as the `Filesystem` trait has them.
#[allow(clippy::too_many_arguments)]
impl TreeforkFs {
    pub(super) fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        guarded!(self, "lookup", [parent, name], {
            reply_lookup(self.session.lookup(parent.0, name.as_bytes()), reply)
        })
    }

    pub(super) fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        guarded!(self, "forget", [ino, nlookup], {
            self.session.forget(ino.0, nlookup)
        })
    }

    pub(super) fn getattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        guarded!(self, "getattr", [ino], {
            match self.session.getattr(ino.0) {
                Ok(s) => reply.attr(&TTL, &attr(&s)),
                Err(e) => reply.error(errno(e)),
            }
        })
    }

    pub(super) fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.changing(req.pid(), Changing::Ino(ino.0));
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
                    atime: atime.map(time_or_now),
                    mtime: mtime.map(time_or_now),
                    ctime: ctime.map(from_system),
                    // Truncation by an unprivileged caller (uid 0 stands for
                    // CAP_FSETID) drops them.
                    kill_suidgid: size.is_some() && req.uid() != 0,
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
                match self.session.setattr(ino.0, a) {
                    Ok(s) => reply.attr(&TTL, &attr(&s)),
                    Err(e) => reply.error(errno(e)),
                }
            }
        )
    }

    pub(super) fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        guarded!(self, "readlink", [ino], {
            match self.session.readlink(ino.0) {
                Ok(t) => reply.data(&t),
                Err(e) => reply.error(errno(e)),
            }
        })
    }

    pub(super) fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.changing(req.pid(), Changing::Name(parent.0, name.as_bytes()));
        guarded!(self, "mknod", [parent, name, mode, rdev], {
            let node = match Kind::from_mode(mode) {
                Some(Kind::File) => NewNode::File,
                Some(k @ (Kind::Fifo | Kind::Socket | Kind::CharDev | Kind::BlockDev)) => {
                    NewNode::Special(k, rdev)
                }
                _ => return reply.error(Errno::EINVAL),
            };
            let r = self.session.create_node(
                parent.0,
                name.as_bytes(),
                node,
                mode,
                req.uid(),
                req.gid(),
            );
            reply_entry(r, reply)
        })
    }

    pub(super) fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        self.changing(req.pid(), Changing::Name(parent.0, name.as_bytes()));
        guarded!(self, "mkdir", [parent, name, mode], {
            let r = self.session.create_node(
                parent.0,
                name.as_bytes(),
                NewNode::Dir,
                mode,
                req.uid(),
                req.gid(),
            );
            reply_entry(r, reply)
        })
    }

    pub(super) fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.changing(req.pid(), Changing::Name(parent.0, name.as_bytes()));
        guarded!(self, "unlink", [parent, name], {
            reply_empty(self.session.remove(parent.0, name.as_bytes(), false), reply)
        })
    }

    pub(super) fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.changing(req.pid(), Changing::Name(parent.0, name.as_bytes()));
        guarded!(self, "rmdir", [parent, name], {
            reply_empty(self.session.remove(parent.0, name.as_bytes(), true), reply)
        })
    }

    pub(super) fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.changing(req.pid(), Changing::Name(parent.0, link_name.as_bytes()));
        guarded!(self, "symlink", [parent, link_name, target], {
            let r = self.session.create_node(
                parent.0,
                link_name.as_bytes(),
                NewNode::Symlink(target.as_os_str().as_bytes()),
                0o777,
                req.uid(),
                req.gid(),
            );
            reply_entry(r, reply)
        })
    }

    pub(super) fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.session.watch.note(req.pid());
        self.session
            .touch_rename(parent.0, name.as_bytes(), newparent.0, newname.as_bytes());
        guarded!(self, "rename", [parent, name, newparent, newname, flags], {
            let r = self.session.rename(
                parent.0,
                name.as_bytes(),
                newparent.0,
                newname.as_bytes(),
                flags.bits(),
            );
            reply_empty(r, reply)
        })
    }

    pub(super) fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.changing(req.pid(), Changing::Name(newparent.0, newname.as_bytes()));
        guarded!(self, "link", [ino, newparent, newname], {
            reply_entry(
                self.session.link(ino.0, newparent.0, newname.as_bytes()),
                reply,
            )
        })
    }

    pub(super) fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        self.changing(req.pid(), Changing::Name(parent.0, name.as_bytes()));
        guarded!(self, "create", [parent, name, mode], {
            let r = self.session.create_node(
                parent.0,
                name.as_bytes(),
                NewNode::File,
                mode,
                req.uid(),
                req.gid(),
            );
            match r.and_then(|s| self.session.open_handle(s.ino, false)) {
                Ok(s) => reply.created(
                    &TTL,
                    &attr(&s),
                    Generation(0),
                    FileHandle(0),
                    FopenFlags::FOPEN_KEEP_CACHE,
                ),
                Err(e) => reply.error(errno(e)),
            }
        })
    }
}
