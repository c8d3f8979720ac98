//! FUSE translation: the only module that names fuser.
//!
//! Every handler parses its arguments, calls one `Session` method, and replies once;
//! errors become errnos through `Error::errno` (the single mapping). No filesystem
//! logic lives here.
//!
//! Panics: every handler runs under `catch_unwind` ([`guarded!`]). A panic (a bug)
//! is logged with the request and its arguments and answered EIO (the unsent reply
//! answers it as it drops); the session's locks survive poisoning
//! (`Session::lock` repairs the table), so the mount keeps serving. Debug builds
//! panic on purpose on `setxattr` of [`crate::session::ops::DEBUG_PANIC_XATTR`]
//! (tests only).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::error::Error;
use crate::session::ops::{Caller, NewNode, SetAttr};
use crate::session::{Session, Stat};
use crate::tree::{Kind, Timespec};

/// How long the kernel may cache attributes, entries and negative entries. Every
/// change to a session goes through this mount's kernel requests, except checkout
/// and restore, which invalidate what they change explicitly (entries, including
/// names they create, and inodes); so the kernel can answer `stat`, `lookup` and
/// misses from its caches for long (what makes `git status`, `find` and builds run
/// at native speed when warm). An hour: with 60 s, a tree read a minute after it
/// was written paid a LOOKUP per path again (`grep -r` warm ran 4.6x native).
pub const TTL: Duration = Duration::from_secs(3600);

/// Entries per readdir reply we prepare (the kernel's buffer takes what fits; the
/// rest is read again from the next cookie).
const READDIR_PAGE: usize = 512;
/// Entries per readdirplus reply we prepare (each takes a kernel reference, given
/// back when it does not fit; ~25 fit in a 4 KiB buffer).
const READDIRPLUS_PAGE: usize = 64;

/// The FUSE filesystem of one mounted session.
pub struct TreeforkFs {
    session: Arc<Session>,
    /// Set once the mount exists; used to drop the kernel's cached attributes when
    /// they go stale without a request the kernel would see (allocation after fsync).
    notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
    /// The kernel supports FUSE_NO_OPEN_SUPPORT: `open` answers ENOSYS once and the
    /// kernel stops sending OPEN/RELEASE for files (two round trips per open(2)).
    no_open: bool,
    /// The kernel supports FUSE_NO_OPENDIR_SUPPORT: likewise for directories; it
    /// then caches listings by default (FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE).
    no_opendir: bool,
}

impl TreeforkFs {
    /// Serve `session`; `notifier` is filled in by the caller after mounting.
    pub fn new(session: Arc<Session>, notifier: Arc<std::sync::OnceLock<fuser::Notifier>>) -> Self {
        TreeforkFs {
            session,
            notifier,
            no_open: false,
            no_opendir: false,
        }
    }
}

impl TreeforkFs {
    /// Drop the kernel's cached attributes of `ino` after the daemon changed them
    /// on its own (a negative offset touches no page-cache locks: safe inside a
    /// request).
    fn inval_attr(&self, ino: INodeNo) {
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_inode(ino, -1, 0);
        }
    }
}

/// Run a handler body, catching a panic: log it with the request (`op` and the
/// listed arguments) and let the reply the body owned answer EIO as it drops.
macro_rules! guarded {
    ($self:ident, $op:literal, [$($arg:expr),*], $body:block) => {
        $self.guarded(
            $op,
            || format!(concat!($(stringify!($arg), "={:?} ",)*), $($arg),*),
            || $body,
        )
    };
}

impl TreeforkFs {
    fn guarded(&self, op: &str, args: impl FnOnce() -> String, body: impl FnOnce()) {
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
            let why = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(non-text panic)".into());
            log::error!(
                "session {}: {op} {}panicked: {why}; answered EIO, the mount keeps serving",
                self.session.name(),
                args()
            );
        }
    }
}

/// The credentials a chown's set-group-id rule needs: the caller's groups (primary
/// and supplementary, from `/proc/<pid>/status`; the kernel does not send them).
fn caller(req: &Request) -> Caller {
    let mut groups = vec![req.gid()];
    if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", req.pid())) {
        for line in status.lines() {
            if let Some(g) = line.strip_prefix("Groups:") {
                groups.extend(g.split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
            }
        }
    }
    Caller {
        privileged: req.uid() == 0,
        groups,
    }
}

fn errno(e: Error) -> Errno {
    Errno::from_i32(e.errno())
}

fn to_system(t: Timespec) -> SystemTime {
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::new(t.sec as u64, t.nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + Duration::from_nanos(t.nsec as u64)
    }
}

fn from_system(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        },
        Err(e) => {
            let d = e.duration();
            let mut sec = -(d.as_secs() as i64);
            let mut nsec = d.subsec_nanos();
            if nsec > 0 {
                sec -= 1;
                nsec = 1_000_000_000 - nsec;
            }
            Timespec { sec, nsec }
        }
    }
}

fn time_or_now(t: TimeOrNow) -> Timespec {
    match t {
        TimeOrNow::Now => Timespec::now(),
        TimeOrNow::SpecificTime(s) => from_system(s),
    }
}

fn file_type(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDev => FileType::CharDevice,
        Kind::BlockDev => FileType::BlockDevice,
    }
}

fn attr(s: &Stat) -> FileAttr {
    let a = &s.attr;
    FileAttr {
        ino: INodeNo(s.ino),
        size: a.size,
        blocks: s.blocks,
        atime: to_system(a.atime),
        mtime: to_system(a.mtime),
        ctime: to_system(a.ctime),
        crtime: to_system(a.ctime),
        kind: file_type(s.kind),
        perm: a.perm as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: 4096,
        flags: 0,
    }
}

fn reply_entry(r: Result<Stat, Error>, reply: ReplyEntry) {
    match r {
        Ok(s) => reply.entry(&TTL, &attr(&s), Generation(0)),
        Err(e) => reply.error(errno(e)),
    }
}

/// A lookup miss as a *negative entry* (node id 0 with a timeout), which the kernel
/// caches, instead of ENOENT, which it would ask again every time.
fn reply_lookup(r: Result<Stat, Error>, reply: ReplyEntry) {
    match r {
        Err(Error::Posix(libc::ENOENT)) => {
            let negative = Stat {
                ino: 0,
                kind: Kind::File,
                attr: Default::default(),
                blocks: 0,
            };
            reply.entry(&TTL, &attr(&negative), Generation(0))
        }
        r => reply_entry(r, reply),
    }
}

fn reply_empty(r: Result<(), Error>, reply: ReplyEmpty) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

fn reply_xattr(r: Result<Vec<u8>, Error>, size: u32, reply: ReplyXattr) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(errno(e)),
    }
}

impl Filesystem for TreeforkFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // The kernel's writeback cache is on unless TREEFORK_WRITEBACK=0 (a
        // diagnostic, used by the bench's `treefork-nowb` target). Measured both ways
        // in one run (bench/RESULTS.md): off, every close(2) stops costing a GETATTR
        // and unlink/rename/link stop costing a SETATTR of the kernel's cached
        // c/mtime, but every write(2) becomes a synchronous round trip: 4 KiB random
        // writes 19,536 -> 3,864 IOPS; geomean 2.06x -> 2.10x native.
        let wb = std::env::var("TREEFORK_WRITEBACK").map_or(true, |v| v != "0");
        if wb
            && config
                .add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE)
                .is_err()
        {
            log::info!("kernel does not offer writeback cache");
        }
        for cap in [
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_CACHE_SYMLINKS,
            InitFlags::FUSE_BIG_WRITES,
            InitFlags::FUSE_DO_READDIRPLUS,
            // We clear set-user/group-id on write, truncate and chown ourselves;
            // in exchange the kernel stops asking for security.capability before
            // every write(2) (it sets SB_NOSEC).
            InitFlags::FUSE_HANDLE_KILLPRIV_V2,
            InitFlags::FUSE_READDIRPLUS_AUTO,
        ] {
            if config.add_capabilities(cap).is_err() {
                log::info!("kernel does not offer {cap:?}");
            }
        }
        // Not ATOMIC_O_TRUNC: with no_open the kernel would skip the truncation;
        // without it, O_TRUNC arrives as a SETATTR (size 0).
        self.no_open = config
            .add_capabilities(InitFlags::FUSE_NO_OPEN_SUPPORT)
            .is_ok();
        // Listings are stateless (cookies, see `Entries`), so nothing per open
        // directory needs the daemon either.
        self.no_opendir = config
            .add_capabilities(InitFlags::FUSE_NO_OPENDIR_SUPPORT)
            .is_ok();
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_background(64);
        log::info!("session {} serving", self.session.name());
        Ok(())
    }

    fn destroy(&mut self) {
        guarded!(self, "destroy", [], {
            if let Err(e) = self.session.flush() {
                log::error!("session {}: final flush failed: {e}", self.session.name());
            }
        })
    }

    /// No ioctl is supported. Answered ENOTTY (what a regular file answers an
    /// unknown ioctl), quietly: every `open()` by a Python program asks (isatty).
    fn ioctl(
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

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        guarded!(self, "lookup", [parent, name], {
            reply_lookup(self.session.lookup(parent.0, name.as_bytes()), reply)
        })
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        guarded!(self, "forget", [ino, nlookup], {
            self.session.forget(ino.0, nlookup)
        })
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        guarded!(self, "getattr", [ino], {
            match self.session.getattr(ino.0) {
                Ok(s) => reply.attr(&TTL, &attr(&s)),
                Err(e) => reply.error(errno(e)),
            }
        })
    }

    fn setattr(
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

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        guarded!(self, "readlink", [ino], {
            match self.session.readlink(ino.0) {
                Ok(t) => reply.data(&t),
                Err(e) => reply.error(errno(e)),
            }
        })
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
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

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
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

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        guarded!(self, "unlink", [parent, name], {
            reply_empty(self.session.remove(parent.0, name.as_bytes(), false), reply)
        })
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        guarded!(self, "rmdir", [parent, name], {
            reply_empty(self.session.remove(parent.0, name.as_bytes(), true), reply)
        })
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
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

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
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

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        guarded!(self, "link", [ino, newparent, newname], {
            reply_entry(
                self.session.link(ino.0, newparent.0, newname.as_bytes()),
                reply,
            )
        })
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
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

    fn read(
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
                Err(e) => reply.error(errno(e)),
            }
        })
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
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

    fn flush(
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

    fn release(
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

    fn fsync(
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

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
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

    fn readdir(
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
    fn readdirplus(
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

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        guarded!(self, "releasedir", [], { reply.ok() })
    }

    fn fsyncdir(
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

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
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

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        guarded!(self, "setxattr", [ino, name, value.len(), flags], {
            reply_empty(
                self.session.setxattr(ino.0, name.as_bytes(), value, flags),
                reply,
            )
        })
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        guarded!(self, "getxattr", [ino, name, size], {
            reply_xattr(self.session.getxattr(ino.0, name.as_bytes()), size, reply)
        })
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        guarded!(self, "listxattr", [ino, size], {
            reply_xattr(self.session.listxattr(ino.0), size, reply)
        })
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        guarded!(self, "removexattr", [ino, name], {
            reply_empty(self.session.removexattr(ino.0, name.as_bytes()), reply)
        })
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
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

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        guarded!(self, "fallocate", [ino, offset, length, mode], {
            reply_empty(self.session.fallocate(ino.0, offset, length, mode), reply)
        })
    }

    fn lseek(
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
