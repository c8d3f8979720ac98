//! Conversions between fuser's types and the session's (times, kinds, attributes,
//! errnos, the caller's credentials), and the replies several handlers share.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileType, Generation, INodeNo, ReplyEmpty, ReplyEntry, ReplyXattr, Request,
    TimeOrNow,
};

use super::TTL;
use crate::error::Error;
use crate::session::Stat;
use crate::session::ops::Caller;
use crate::tree::{Kind, Timespec};

/// The credentials a chown's set-group-id rule needs: the caller's groups (primary
/// and supplementary, from `/proc/<pid>/status`; the kernel does not send them).
pub(super) fn caller(req: &Request) -> Caller {
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

pub(super) fn errno(e: Error) -> Errno {
    Errno::from_i32(e.errno())
}

pub(super) fn to_system(t: Timespec) -> SystemTime {
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::new(t.sec as u64, t.nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + Duration::from_nanos(t.nsec as u64)
    }
}

pub(super) fn from_system(t: SystemTime) -> Timespec {
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

pub(super) fn time_or_now(t: TimeOrNow) -> Timespec {
    match t {
        TimeOrNow::Now => Timespec::now(),
        TimeOrNow::SpecificTime(s) => from_system(s),
    }
}

pub(super) fn file_type(k: Kind) -> FileType {
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

pub(super) fn attr(s: &Stat) -> FileAttr {
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

pub(super) fn reply_entry(r: Result<Stat, Error>, reply: ReplyEntry) {
    match r {
        Ok(s) => reply.entry(&TTL, &attr(&s), Generation(0)),
        Err(e) => reply.error(errno(e)),
    }
}

/// A lookup miss as a *negative entry* (node id 0 with a timeout), which the kernel
/// caches, instead of ENOENT, which it would ask again every time.
pub(super) fn reply_lookup(r: Result<Stat, Error>, reply: ReplyEntry) {
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

pub(super) fn reply_empty(r: Result<(), Error>, reply: ReplyEmpty) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

pub(super) fn reply_xattr(r: Result<Vec<u8>, Error>, size: u32, reply: ReplyXattr) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(errno(e)),
    }
}
