//! The transport-neutral vocabulary of [`TreeforkFs`](super::TreeforkFs)'s operations:
//! what a transport parses a request into and what the core answers.
//!
//! Owns: the caller ([`Req`]), the inputs that are more than plain integers and
//! byte strings ([`SetTime`], [`SetattrIn`], the write flag the core reads), the
//! listing sinks a transport fills its reply buffer through ([`DirSink`],
//! [`DirPlusSink`]) and the answers that are more than a [`Stat`] or a number
//! ([`Looked`], [`Opened`], [`Created`], [`Xattr`], [`Statfs`]). Names no fuser type:
//! each transport encodes these into what its kernel channel wants (the /dev/fuse
//! adapter through fuser, `dev.rs`; FUSE over io_uring its own `fuse_*` structs).
//! Every `Stat` answered as an entry or attributes is valid for [`TTL`](super::TTL).

use std::time::Duration;

pub(crate) use crate::session::Stat;
pub(crate) use crate::tree::Kind;
use crate::tree::Timespec;

/// The process a request comes from, as the kernel's request header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Req {
    /// Its effective user id.
    pub uid: u32,
    /// Its effective group id.
    pub gid: u32,
    /// Its thread group id (0 when the kernel does not know it).
    pub pid: u32,
}

/// A time a `setattr` sets: the server's current time, or a given one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetTime {
    /// `UTIME_NOW` (FATTR_ATIME_NOW / FATTR_MTIME_NOW).
    Now,
    /// A given time.
    At(Timespec),
}

impl SetTime {
    /// The time to store: [`SetTime::Now`] resolved by the one clock the core reads
    /// ([`Timespec::now`]).
    pub(crate) fn resolve(self) -> Timespec {
        match self {
            SetTime::Now => Timespec::now(),
            SetTime::At(t) => t,
        }
    }
}

/// What a `setattr` changes: each field `Some` when its FATTR_* bit is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SetattrIn {
    /// New permission bits (the file type bits are ignored).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate or extend).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SetTime>,
    /// New modification time.
    pub mtime: Option<SetTime>,
    /// New change time (FATTR_CTIME; the kernel sends it alone for a chown).
    pub ctime: Option<Timespec>,
    /// The open file the change came through (FATTR_FH), unused by the core.
    pub fh: Option<u64>,
}

/// `FUSE_WRITE_KILL_SUIDGID` (include/uapi/linux/fuse.h): the write's `write_flags`
/// bit asking the server to clear set-user/group-id (with HANDLE_KILLPRIV_V2).
pub(crate) const FUSE_WRITE_KILL_SUIDGID: u32 = 1 << 2;

/// A readdir reply buffer a transport fills.
pub(crate) trait DirSink {
    /// Add one entry (`cookie`: the offset the next readdir after it starts from).
    /// Returns true when the buffer is full: the entry was not added and the listing
    /// stops there (like fuser's `ReplyDirectory::add`).
    fn add(&mut self, ino: u64, cookie: u64, kind: Kind, name: &[u8]) -> bool;
}

/// A readdirplus reply buffer a transport fills.
pub(crate) trait DirPlusSink {
    /// Add one entry: its dirent (node id `stat.ino`, type `stat.kind`) and its
    /// entry (node id `stat.ino`, attributes `stat`, entry and attribute timeouts
    /// `ttl`). `.` and `..` come with node id 0, default attributes and a zero
    /// `ttl` (no entry, no kernel reference). Returns true when the buffer is full:
    /// the entry was not added (the core gives back its reference) and the listing
    /// stops there.
    fn add(&mut self, cookie: u64, name: &[u8], stat: &Stat, ttl: Duration) -> bool;
}

/// A lookup's answer.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Looked {
    /// The name exists: an entry (it counts one kernel reference to `ino`).
    Found(Stat),
    /// The name does not exist: answered as a *negative entry* (node id 0 with the
    /// entry timeout), which the kernel caches, instead of ENOENT, which it would
    /// ask again every time.
    Negative,
}

impl Looked {
    /// The entry to encode, the same for both: a [`Looked::Negative`] is node id 0
    /// with default attributes of a regular file, valid for [`TTL`](super::TTL).
    pub(crate) fn entry(self) -> Stat {
        match self {
            Looked::Found(s) => s,
            Looked::Negative => Stat {
                ino: 0,
                kind: Kind::File,
                attr: Default::default(),
                blocks: 0,
            },
        }
    }
}

/// `FOPEN_KEEP_CACHE` (include/uapi/linux/fuse.h): keep the page cache on open.
pub(crate) const FOPEN_KEEP_CACHE: u32 = 1 << 1;
/// `FOPEN_CACHE_DIR`: the kernel may cache the directory's listing.
pub(crate) const FOPEN_CACHE_DIR: u32 = 1 << 3;

/// An `open`'s or `opendir`'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Opened {
    /// The file handle the kernel passes back (always 0: the core keeps no state per
    /// open file).
    pub fh: u64,
    /// `FOPEN_*` bits ([`FOPEN_KEEP_CACHE`], [`FOPEN_CACHE_DIR`]).
    pub open_flags: u32,
}

/// A `create`'s answer: the new entry and its open file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Created {
    /// The new file (an entry: one kernel reference).
    pub stat: Stat,
    /// The file handle (always 0).
    pub fh: u64,
    /// `FOPEN_*` bits.
    pub open_flags: u32,
}

/// A `getxattr`'s or `listxattr`'s answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Xattr {
    /// The caller asked the size (request size 0): the value's length.
    Size(u32),
    /// The value (it fits the size asked; otherwise the core answers ERANGE).
    Data(Vec<u8>),
}

/// A `statfs`'s answer (`struct fuse_kstatfs` without padding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Statfs {
    /// Total blocks of `frsize` bytes.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Free blocks an unprivileged caller may use.
    pub bavail: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Preferred I/O size.
    pub bsize: u32,
    /// Longest name.
    pub namelen: u32,
    /// Fragment (block) size.
    pub frsize: u32,
}
