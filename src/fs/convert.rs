//! Conversions between fuser's types and the session's for the /dev/fuse adapter
//! (times, kinds, attributes, errnos), and the caller's credentials the core reads
//! (the one helper here that names no fuser type).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo, TimeOrNow};

use super::request::{Req, SetTime};
use crate::error::Error;
use crate::session::Stat;
use crate::session::posix::Caller;
use crate::tree::{Kind, Timespec};

/// The credentials a chown's set-group-id rule needs: the caller's groups (primary
/// and supplementary, from `/proc/<pid>/status`; the kernel does not send them).
pub(super) fn caller(req: &Req) -> Caller {
    let mut groups = vec![req.gid];
    if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", req.pid)) {
        for line in status.lines() {
            if let Some(g) = line.strip_prefix("Groups:") {
                groups.extend(g.split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
            }
        }
    }
    Caller {
        privileged: req.uid == 0,
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

pub(super) fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(s) => SetTime::At(from_system(s)),
    }
}

/// The caller of a fuser request.
pub(super) fn req(r: &fuser::Request) -> Req {
    Req {
        uid: r.uid(),
        gid: r.gid(),
        pid: r.pid(),
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
