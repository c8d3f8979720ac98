//! The fuser-session server of /dev/fuse: [`DevFs`], fuser's `Filesystem` over the
//! shared core [`TreeforkFs`], with fuser's worker threads per mount. Not the
//! default: every mount's /dev/fuse connection is served by the shared pool
//! (`fs::devpool`); this one is kept for side-by-side comparisons
//! (`TREEFORK_FUSE_SERVER=fuser`, `bench/fsbench.py`'s `treefork-fuser`, `bench/scale.py`).
//!
//! Owns: INIT's capability negotiation (what the kernel is asked for, and the facts
//! it settles, written into the core), `destroy`, and per request the translation
//! fuser args -> neutral args (`convert.rs`), one call of the core's method of the
//! same name, and the encoding of its answer into fuser's reply. The only file
//! naming fuser's reply types. No filesystem logic lives here.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow, WriteFlags,
};

use super::convert::{attr, errno, file_type, from_system, req, set_time};
use super::request::{
    Created, DirPlusSink, DirSink, Kind, Looked, Opened, SetattrIn, Stat, Statfs, Xattr,
};
use super::{Negotiated, TTL, TreeforkFs};
use crate::error::Error;

/// fuser's `Filesystem` for one mount's `/dev/fuse` connection.
pub struct DevFs {
    core: Arc<TreeforkFs>,
    /// Offer FUSE_OVER_IO_URING in INIT (off: the io_uring transport is not
    /// served yet).
    offer_io_uring: bool,
}

impl DevFs {
    /// Serve `core` (from [`TreeforkFs::new`]; other transports share it).
    pub fn new(core: Arc<TreeforkFs>) -> DevFs {
        DevFs {
            core,
            offer_io_uring: false,
        }
    }

    /// Whether INIT offers FUSE_OVER_IO_URING (default off); the kernel's answer is
    /// in the core's `negotiation()`.
    pub fn offer_io_uring(mut self, yes: bool) -> DevFs {
        self.offer_io_uring = yes;
        self
    }
}

/// A fuser reply that carries one kind of answer.
trait Answer: Sized {
    type Ok;
    fn ok(self, v: Self::Ok);
    fn fail(self, e: fuser::Errno);
    fn answer(self, r: Result<Self::Ok, Error>) {
        match r {
            Ok(v) => self.ok(v),
            Err(e) => self.fail(errno(e)),
        }
    }
}

macro_rules! answers {
    ($($reply:ty: $t:ty => |$r:ident, $v:ident| $ok:expr;)*) => {$(
        impl Answer for $reply {
            type Ok = $t;
            fn ok(self, $v: $t) {
                let $r = self;
                $ok
            }
            fn fail(self, e: fuser::Errno) {
                self.error(e)
            }
        }
    )*};
}

answers! {
    ReplyEntry: Stat => |r, s| r.entry(&TTL, &attr(&s), Generation(0));
    ReplyAttr: Stat => |r, s| r.attr(&TTL, &attr(&s));
    ReplyEmpty: () => |r, _v| r.ok();
    ReplyData: Vec<u8> => |r, d| r.data(&d);
    ReplyWrite: u32 => |r, n| r.written(n);
    ReplyLseek: i64 => |r, o| r.offset(o);
    ReplyOpen: Opened => |r, o| r.opened(FileHandle(o.fh), fopen(o.open_flags));
    ReplyCreate: Created => |r, c| r.created(
        &TTL, &attr(&c.stat), Generation(0), FileHandle(c.fh), fopen(c.open_flags),
    );
    ReplyStatfs: Statfs => |r, s| r.statfs(
        s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
    );
    ReplyXattr: Xattr => |r, x| match x {
        Xattr::Size(n) => r.size(n),
        Xattr::Data(d) => r.data(&d),
    };
    ReplyIoctl: (i32, Vec<u8>) => |r, x| r.ioctl(x.0, &x.1);
}

fn fopen(bits: u32) -> FopenFlags {
    FopenFlags::from_bits_retain(bits)
}

fn name(n: &OsStr) -> &[u8] {
    n.as_bytes()
}

impl DirSink for ReplyDirectory {
    fn add(&mut self, ino: u64, cookie: u64, kind: Kind, name: &[u8]) -> bool {
        ReplyDirectory::add(
            self,
            INodeNo(ino),
            cookie,
            file_type(kind),
            OsStr::from_bytes(name),
        )
    }
}

impl DirPlusSink for ReplyDirectoryPlus {
    fn add(&mut self, cookie: u64, name: &[u8], stat: &Stat, ttl: Duration) -> bool {
        ReplyDirectoryPlus::add(
            self,
            INodeNo(stat.ino),
            cookie,
            OsStr::from_bytes(name),
            &ttl,
            &attr(stat),
            Generation(0),
        )
    }
}

/// A listing: the core fills the reply's buffer, then it is sent.
macro_rules! listing {
    ($r:expr, $reply:ident) => {
        match $r {
            Ok(()) => $reply.ok(),
            Err(e) => $reply.error(errno(e)),
        }
    };
}

impl DevFs {
    /// What this connection asks of the kernel; what INIT settles.
    fn negotiate(&self, config: &mut KernelConfig) -> Negotiated {
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
        let no_open = config
            .add_capabilities(InitFlags::FUSE_NO_OPEN_SUPPORT)
            .is_ok();
        // Listings are stateless (cookies, see `Entries`), so nothing per open
        // directory needs the daemon either.
        let no_opendir = config
            .add_capabilities(InitFlags::FUSE_NO_OPENDIR_SUPPORT)
            .is_ok();
        // The hook of the io_uring transport (issue 24): off until it serves.
        let over_io_uring = self.offer_io_uring
            && config
                .add_capabilities(InitFlags::FUSE_OVER_IO_URING)
                .inspect_err(|_| log::info!("kernel does not offer FUSE_OVER_IO_URING"))
                .is_ok();
        Negotiated {
            no_open,
            no_opendir,
            over_io_uring,
        }
    }
}

// fuser's handler signatures, kept as the `Filesystem` trait has them.
#[allow(clippy::too_many_arguments)]
impl Filesystem for DevFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let n = self.negotiate(config);
        self.core.negotiated(n);
        let _ = config.set_max_write(super::ring::MAX_WRITE as u32);
        let _ = config.set_max_background(64);
        log::info!("session {} serving", self.core.session.name());
        Ok(())
    }

    fn destroy(&mut self) {
        self.core.destroy()
    }

    // Names and attributes (namespace.rs).

    fn lookup(&self, r: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEntry) {
        let looked = self.core.lookup(&req(r), parent.0, name(n));
        reply.answer(looked.map(Looked::entry))
    }

    fn forget(&self, _r: &Request, ino: INodeNo, nlookup: u64) {
        self.core.forget(ino.0, nlookup)
    }

    fn getattr(&self, r: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        reply.answer(self.core.getattr(&req(r), ino.0, fh.map(|f| f.0)))
    }

    fn setattr(
        &self,
        r: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let a = SetattrIn {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
            ctime: ctime.map(from_system),
            fh: fh.map(|f| f.0),
        };
        reply.answer(self.core.setattr(&req(r), ino.0, &a))
    }

    fn readlink(&self, r: &Request, ino: INodeNo, reply: ReplyData) {
        reply.answer(self.core.readlink(&req(r), ino.0))
    }

    fn mknod(
        &self,
        r: &Request,
        parent: INodeNo,
        n: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.answer(self.core.mknod(&req(r), parent.0, name(n), mode, rdev))
    }

    fn mkdir(
        &self,
        r: &Request,
        parent: INodeNo,
        n: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        reply.answer(self.core.mkdir(&req(r), parent.0, name(n), mode))
    }

    fn unlink(&self, r: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        reply.answer(self.core.unlink(&req(r), parent.0, name(n)))
    }

    fn rmdir(&self, r: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        reply.answer(self.core.rmdir(&req(r), parent.0, name(n)))
    }

    fn symlink(&self, r: &Request, parent: INodeNo, n: &OsStr, target: &Path, reply: ReplyEntry) {
        let target = target.as_os_str().as_bytes();
        reply.answer(self.core.symlink(&req(r), parent.0, name(n), target))
    }

    fn rename(
        &self,
        r: &Request,
        parent: INodeNo,
        n: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (from, to) = ((parent.0, name(n)), (newparent.0, name(newname)));
        reply.answer(
            self.core
                .rename(&req(r), from.0, from.1, to.0, to.1, flags.bits()),
        )
    }

    fn link(
        &self,
        r: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.answer(self.core.link(&req(r), ino.0, newparent.0, name(newname)))
    }

    fn create(
        &self,
        r: &Request,
        parent: INodeNo,
        n: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        reply.answer(self.core.create(&req(r), parent.0, name(n), mode, flags))
    }

    // File contents and open files (data.rs).

    fn open(&self, r: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        reply.answer(self.core.open(&req(r), ino.0, flags.0))
    }

    fn read(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        reply.answer(self.core.read(&req(r), ino.0, fh.0, offset, size))
    }

    fn write(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let wf = write_flags.bits();
        reply.answer(self.core.write(&req(r), ino.0, fh.0, offset, data, wf))
    }

    fn flush(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.answer(self.core.flush(&req(r), ino.0, fh.0, lock_owner.0))
    }

    fn release(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.answer(self.core.release(&req(r), ino.0, fh.0))
    }

    fn fsync(&self, r: &Request, ino: INodeNo, fh: FileHandle, ds: bool, reply: ReplyEmpty) {
        reply.answer(self.core.fsync(&req(r), ino.0, fh.0, ds))
    }

    fn fallocate(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let res = self
            .core
            .fallocate(&req(r), ino.0, fh.0, offset, length, mode);
        reply.answer(res)
    }

    fn lseek(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        reply.answer(self.core.lseek(&req(r), ino.0, fh.0, offset, whence))
    }

    // Listings (dir.rs).

    fn opendir(&self, r: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        reply.answer(self.core.opendir(&req(r), ino.0, flags.0))
    }

    fn readdir(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        listing!(
            self.core.readdir(&req(r), ino.0, fh.0, offset, &mut reply),
            reply
        )
    }

    fn readdirplus(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        listing!(
            self.core
                .readdirplus(&req(r), ino.0, fh.0, offset, &mut reply),
            reply
        )
    }

    fn releasedir(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        reply.answer(self.core.releasedir(&req(r), ino.0, fh.0))
    }

    fn fsyncdir(&self, r: &Request, ino: INodeNo, fh: FileHandle, ds: bool, reply: ReplyEmpty) {
        reply.answer(self.core.fsyncdir(&req(r), ino.0, fh.0, ds))
    }

    // Extended attributes, statfs, ioctl (misc.rs).

    fn statfs(&self, r: &Request, ino: INodeNo, reply: ReplyStatfs) {
        reply.answer(self.core.statfs(&req(r), ino.0))
    }

    fn setxattr(
        &self,
        r: &Request,
        ino: INodeNo,
        n: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        let res = self
            .core
            .setxattr(&req(r), ino.0, name(n), value, flags, position);
        reply.answer(res)
    }

    fn getxattr(&self, r: &Request, ino: INodeNo, n: &OsStr, size: u32, reply: ReplyXattr) {
        reply.answer(self.core.getxattr(&req(r), ino.0, name(n), size))
    }

    fn listxattr(&self, r: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        reply.answer(self.core.listxattr(&req(r), ino.0, size))
    }

    fn removexattr(&self, r: &Request, ino: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        reply.answer(self.core.removexattr(&req(r), ino.0, name(n)))
    }

    fn ioctl(
        &self,
        r: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        let res = self
            .core
            .ioctl(&req(r), ino.0, fh.0, flags.bits(), cmd, in_data, out_size);
        reply.answer(res)
    }
}
