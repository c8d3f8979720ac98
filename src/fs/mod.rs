//! FUSE translation: the only module that names fuser.
//!
//! Every handler parses its arguments, calls one `Session` method, and replies once;
//! errors become errnos through `Error::errno` (the single mapping). No filesystem
//! logic lives here.
//!
//! Layout: this file holds [`TreeforkFs`], `init` and `destroy`, the panic guard and
//! the `Filesystem` impl, which forwards every other request to the inherent method
//! of the same name and signature in the file of its concern: `namespace.rs` (names
//! and attributes), `data.rs` (file contents and open files), `dir.rs` (listings) and
//! `misc.rs` (extended attributes, statfs, ioctl). `convert.rs` translates between
//! fuser's types and the session's and holds the replies several handlers share.
//!
//! Panics: every handler runs under `catch_unwind` ([`guarded!`]). A panic (a bug)
//! is logged with the request and its arguments and answered EIO (the unsent reply
//! answers it as it drops); the session's locks survive poisoning
//! (`Session::lock` repairs the table), so the mount keeps serving. Debug builds
//! panic on purpose on `setxattr` of [`crate::session::ops::DEBUG_PANIC_XATTR`]
//! (tests only).

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    FileHandle, Filesystem, INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLseek,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::session::Session;

/// How long the kernel may cache attributes, entries and negative entries. Every
/// change to a session goes through this mount's kernel requests, except checkout
/// and restore, which invalidate what they change explicitly (entries, including
/// names they create, and inodes); so the kernel can answer `stat`, `lookup` and
/// misses from its caches for long (what makes `git status`, `find` and builds run
/// at native speed when warm). An hour: with 60 s, a tree read a minute after it
/// was written paid a LOOKUP per path again (`grep -r` warm ran 4.6x native).
pub const TTL: Duration = Duration::from_secs(3600);

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

/// What a mutating request is about to change, noted before it runs.
pub(crate) enum Changing<'a> {
    /// An inode's content or attributes.
    Ino(u64),
    /// A name in a directory (created or removed).
    Name(u64, &'a [u8]),
}

impl TreeforkFs {
    /// Before a mutating request: its pid for the exec writer watch (free unless a
    /// recorded command runs) and the path for the touched-file set.
    pub(crate) fn changing(&self, pid: u32, what: Changing<'_>) {
        self.session.watch.note(pid);
        match what {
            Changing::Ino(ino) => self.session.touch_ino(ino),
            Changing::Name(parent, name) => self.session.touch_name(parent, name),
        }
    }

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
        // The kernel's own cache trimming is no access.
        if !op.ends_with("forget") {
            self.session.note_access();
        }
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

// After the guard macro: textual scoping makes it visible to these modules.
mod convert;
mod data;
mod dir;
mod kernel;
mod misc;
mod namespace;
pub mod outside;
pub(crate) mod request;
pub mod ring;

pub use kernel::KernelCache;

/// Implements `Filesystem` methods by forwarding each to the inherent method of the
/// same name and signature (in the file of its concern).
macro_rules! forward {
    ($(fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?);)*) => {
        $(
            fn $name(&self $(, $arg: $ty)*) {
                TreeforkFs::$name(self $(, $arg)*)
            }
        )*
    };
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

    forward! {
        // namespace.rs
        fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry);
        fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64);
        fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr);
        fn setattr(
            &self, req: &Request, ino: INodeNo, mode: Option<u32>, uid: Option<u32>,
            gid: Option<u32>, size: Option<u64>, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>,
            ctime: Option<SystemTime>, fh: Option<FileHandle>, crtime: Option<SystemTime>,
            chgtime: Option<SystemTime>, bkuptime: Option<SystemTime>,
            flags: Option<fuser::BsdFileFlags>, reply: ReplyAttr,
        );
        fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData);
        fn mknod(
            &self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32,
            reply: ReplyEntry,
        );
        fn mkdir(
            &self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32,
            reply: ReplyEntry,
        );
        fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty);
        fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty);
        fn symlink(
            &self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path,
            reply: ReplyEntry,
        );
        fn rename(
            &self, req: &Request, parent: INodeNo, name: &OsStr, newparent: INodeNo,
            newname: &OsStr, flags: RenameFlags, reply: ReplyEmpty,
        );
        fn link(
            &self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr,
            reply: ReplyEntry,
        );
        fn create(
            &self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32,
            reply: ReplyCreate,
        );
        // data.rs
        fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen);
        fn read(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, size: u32,
            flags: OpenFlags, lock_owner: Option<LockOwner>, reply: ReplyData,
        );
        fn write(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, data: &[u8],
            write_flags: WriteFlags, flags: OpenFlags, lock_owner: Option<LockOwner>,
            reply: ReplyWrite,
        );
        fn flush(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner,
            reply: ReplyEmpty,
        );
        fn release(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, flags: OpenFlags,
            lock_owner: Option<LockOwner>, flush: bool, reply: ReplyEmpty,
        );
        fn fsync(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty,
        );
        fn fallocate(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, length: u64, mode: i32,
            reply: ReplyEmpty,
        );
        fn lseek(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, offset: i64, whence: i32,
            reply: ReplyLseek,
        );
        // dir.rs
        fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen);
        fn readdir(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectory,
        );
        fn readdirplus(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64,
            reply: fuser::ReplyDirectoryPlus,
        );
        fn releasedir(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, flags: OpenFlags, reply: ReplyEmpty,
        );
        fn fsyncdir(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty,
        );
        // misc.rs
        fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs);
        fn setxattr(
            &self, req: &Request, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32,
            position: u32, reply: ReplyEmpty,
        );
        fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr);
        fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr);
        fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty);
        fn ioctl(
            &self, req: &Request, ino: INodeNo, fh: FileHandle, flags: fuser::IoctlFlags, cmd: u32,
            in_data: &[u8], out_size: u32, reply: fuser::ReplyIoctl,
        );
    }
}
