//! One ring entry's request, parsed: the `fuse_in_header` from the header area's
//! in_out, the opcode's fixed argument from op_in, names and data from the payload
//! buffer (`ent_in_out.payload_sz` bytes of it) into a [`Request`] that borrows them.
//!
//! Invariants: every read is bounds-checked (zerocopy reads of whole structs from
//! fixed areas, slices within `payload_sz`, itself within the buffer): hostile or
//! truncated bytes become a [`Rejected`] carrying the errno to answer (EINVAL for
//! malformed arguments, EIO for an entry whose sizes contradict its buffers, ENOSYS
//! for an opcode treefork does not serve), never a panic. Names must end with a NUL
//! inside the payload. Parsing has no side effect: it never calls the core.

use zerocopy::FromBytes;

use super::abi::{self, op};
use crate::fs::request::{Req, SetTime, SetattrIn};
use crate::tree::Timespec;

/// The header area of an entry: `struct fuse_uring_req_header`.
pub type HeaderArea = [u8; abi::REQ_HEADER_SZ];

/// What a request asks, with its names and data borrowed from the entry.
#[derive(Debug, PartialEq, Eq)]
pub enum Op<'a> {
    Lookup {
        name: &'a [u8],
    },
    Getattr {
        fh: Option<u64>,
    },
    Setattr(SetattrIn),
    Readlink,
    Symlink {
        name: &'a [u8],
        target: &'a [u8],
    },
    Mknod {
        name: &'a [u8],
        mode: u32,
        umask: u32,
        rdev: u32,
    },
    Mkdir {
        name: &'a [u8],
        mode: u32,
        umask: u32,
    },
    Unlink {
        name: &'a [u8],
    },
    Rmdir {
        name: &'a [u8],
    },
    Rename {
        name: &'a [u8],
        newparent: u64,
        newname: &'a [u8],
        flags: u32,
    },
    /// Hard link: the header's node id is the new parent, `ino` the linked inode.
    Link {
        ino: u64,
        newname: &'a [u8],
    },
    Open {
        flags: u32,
    },
    Read {
        fh: u64,
        offset: u64,
        size: u32,
    },
    Write {
        fh: u64,
        offset: u64,
        data: &'a [u8],
        write_flags: u32,
    },
    Statfs,
    Release {
        fh: u64,
        flags: u32,
    },
    Fsync {
        fh: u64,
        datasync: bool,
    },
    Setxattr {
        name: &'a [u8],
        value: &'a [u8],
        flags: u32,
    },
    Getxattr {
        name: &'a [u8],
        size: u32,
    },
    Listxattr {
        size: u32,
    },
    Removexattr {
        name: &'a [u8],
    },
    Flush {
        fh: u64,
    },
    Opendir {
        flags: u32,
    },
    Readdir {
        fh: u64,
        offset: u64,
        size: u32,
    },
    Readdirplus {
        fh: u64,
        offset: u64,
        size: u32,
    },
    Releasedir {
        fh: u64,
    },
    Fsyncdir {
        fh: u64,
        datasync: bool,
    },
    Access {
        mask: u32,
    },
    Create {
        name: &'a [u8],
        mode: u32,
        umask: u32,
        flags: u32,
    },
    Fallocate {
        fh: u64,
        offset: u64,
        length: u64,
        mode: u32,
    },
    Lseek {
        fh: u64,
        offset: u64,
        whence: u32,
    },
    Ioctl,
    Destroy,
}

/// A parsed request.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The kernel's id of the request; the reply carries it.
    pub unique: u64,
    pub opcode: u32,
    /// The inode the request is about (the parent directory for name operations).
    pub nodeid: u64,
    pub req: Req,
    pub op: Op<'a>,
}

/// A request that cannot be served: answer `errno` to `unique`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejected {
    pub unique: u64,
    pub opcode: u32,
    /// A positive errno.
    pub errno: i32,
}

/// The request's header (always readable: the area has a fixed size).
pub fn in_header(h: &HeaderArea) -> abi::InHeader {
    abi::InHeader::read_from_prefix(&h[..])
        .map(|(v, _)| v)
        .unwrap_or_default()
}

/// The entry bookkeeping (always readable).
pub fn ent_in_out(h: &HeaderArea) -> abi::EntInOut {
    abi::EntInOut::read_from_prefix(&h[abi::ENT_IN_OUT_OFF..])
        .map(|(v, _)| v)
        .unwrap_or_default()
}

/// Parse the request in an entry: `header` is its header area, `payload` its whole
/// payload buffer.
pub fn parse<'a>(header: &'a HeaderArea, payload: &'a [u8]) -> Result<Request<'a>, Rejected> {
    let h = in_header(header);
    let reject = |errno| Rejected {
        unique: h.unique,
        opcode: h.opcode,
        errno,
    };
    let psz = ent_in_out(header).payload_sz as usize;
    let payload = payload.get(..psz).ok_or_else(|| reject(libc::EIO))?;
    let op_in = &header[abi::IN_OUT_SZ..abi::ENT_IN_OUT_OFF];
    let p = Args { op_in, payload };
    let op = p.op(h.opcode).map_err(reject)?;
    Ok(Request {
        unique: h.unique,
        opcode: h.opcode,
        nodeid: h.nodeid,
        req: Req {
            uid: h.uid,
            gid: h.gid,
            pid: h.pid,
        },
        op,
    })
}

/// The two argument areas of one request.
struct Args<'a> {
    op_in: &'a [u8],
    payload: &'a [u8],
}

type Parsed<T> = Result<T, i32>;

impl<'a> Args<'a> {
    /// The opcode's fixed argument from op_in.
    fn fixed<T: FromBytes>(&self) -> Parsed<T> {
        T::read_from_prefix(self.op_in)
            .map(|(v, _)| v)
            .map_err(|_| libc::EINVAL)
    }

    /// The payload as one NUL-terminated name.
    fn name(&self) -> Parsed<&'a [u8]> {
        Ok(names(self.payload, 1)?[0])
    }

    /// The payload as two NUL-terminated names.
    fn two_names(&self) -> Parsed<(&'a [u8], &'a [u8])> {
        let n = names(self.payload, 2)?;
        Ok((n[0], n[1]))
    }

    fn op(&self, opcode: u32) -> Parsed<Op<'a>> {
        Ok(match opcode {
            op::LOOKUP => Op::Lookup { name: self.name()? },
            op::GETATTR => {
                let a: abi::GetattrIn = self.fixed()?;
                // FUSE_GETATTR_FH
                let fh = (a.getattr_flags & 1 != 0).then_some(a.fh);
                Op::Getattr { fh }
            }
            op::SETATTR => Op::Setattr(setattr(self.fixed()?)),
            op::READLINK => Op::Readlink,
            op::SYMLINK => {
                let (name, target) = self.two_names()?;
                Op::Symlink { name, target }
            }
            op::MKNOD => {
                let a: abi::MknodIn = self.fixed()?;
                Op::Mknod {
                    name: self.name()?,
                    mode: a.mode,
                    umask: a.umask,
                    rdev: a.rdev,
                }
            }
            op::MKDIR => {
                let a: abi::MkdirIn = self.fixed()?;
                Op::Mkdir {
                    name: self.name()?,
                    mode: a.mode,
                    umask: a.umask,
                }
            }
            op::UNLINK => Op::Unlink { name: self.name()? },
            op::RMDIR => Op::Rmdir { name: self.name()? },
            op::RENAME => {
                let a: abi::RenameIn = self.fixed()?;
                let (name, newname) = self.two_names()?;
                Op::Rename {
                    name,
                    newparent: a.newdir,
                    newname,
                    flags: 0,
                }
            }
            op::RENAME2 => {
                let a: abi::Rename2In = self.fixed()?;
                let (name, newname) = self.two_names()?;
                Op::Rename {
                    name,
                    newparent: a.newdir,
                    newname,
                    flags: a.flags,
                }
            }
            op::LINK => {
                let a: abi::LinkIn = self.fixed()?;
                Op::Link {
                    ino: a.oldnodeid,
                    newname: self.name()?,
                }
            }
            op::OPEN => Op::Open {
                flags: self.fixed::<abi::OpenIn>()?.flags,
            },
            op::OPENDIR => Op::Opendir {
                flags: self.fixed::<abi::OpenIn>()?.flags,
            },
            op::READ | op::READDIR | op::READDIRPLUS => {
                let a: abi::ReadIn = self.fixed()?;
                let (fh, offset, size) = (a.fh, a.offset, a.size);
                match opcode {
                    op::READ => Op::Read { fh, offset, size },
                    op::READDIR => Op::Readdir { fh, offset, size },
                    _ => Op::Readdirplus { fh, offset, size },
                }
            }
            op::WRITE => {
                let a: abi::WriteIn = self.fixed()?;
                let data = self.payload.get(..a.size as usize).ok_or(libc::EINVAL)?;
                Op::Write {
                    fh: a.fh,
                    offset: a.offset,
                    data,
                    write_flags: a.write_flags,
                }
            }
            op::STATFS => Op::Statfs,
            op::RELEASE => {
                let a: abi::ReleaseIn = self.fixed()?;
                Op::Release {
                    fh: a.fh,
                    flags: a.flags,
                }
            }
            op::RELEASEDIR => Op::Releasedir {
                fh: self.fixed::<abi::ReleaseIn>()?.fh,
            },
            op::FSYNC | op::FSYNCDIR => {
                let a: abi::FsyncIn = self.fixed()?;
                // FUSE_FSYNC_FDATASYNC
                let (fh, datasync) = (a.fh, a.fsync_flags & 1 != 0);
                if opcode == op::FSYNC {
                    Op::Fsync { fh, datasync }
                } else {
                    Op::Fsyncdir { fh, datasync }
                }
            }
            op::SETXATTR => {
                let a: abi::SetxattrIn = self.fixed()?;
                let (name, rest) = split_name(self.payload)?;
                let value = rest.get(..a.size as usize).ok_or(libc::EINVAL)?;
                Op::Setxattr {
                    name,
                    value,
                    flags: a.flags,
                }
            }
            op::GETXATTR => Op::Getxattr {
                size: self.fixed::<abi::GetxattrIn>()?.size,
                name: self.name()?,
            },
            op::LISTXATTR => Op::Listxattr {
                size: self.fixed::<abi::GetxattrIn>()?.size,
            },
            op::REMOVEXATTR => Op::Removexattr { name: self.name()? },
            op::FLUSH => Op::Flush {
                fh: self.fixed::<abi::FlushIn>()?.fh,
            },
            op::ACCESS => Op::Access {
                mask: self.fixed::<abi::AccessIn>()?.mask,
            },
            op::CREATE => {
                let a: abi::CreateIn = self.fixed()?;
                Op::Create {
                    name: self.name()?,
                    mode: a.mode,
                    umask: a.umask,
                    flags: a.flags,
                }
            }
            op::FALLOCATE => {
                let a: abi::FallocateIn = self.fixed()?;
                Op::Fallocate {
                    fh: a.fh,
                    offset: a.offset,
                    length: a.length,
                    mode: a.mode,
                }
            }
            op::LSEEK => {
                let a: abi::LseekIn = self.fixed()?;
                Op::Lseek {
                    fh: a.fh,
                    offset: a.offset,
                    whence: a.whence,
                }
            }
            op::IOCTL => Op::Ioctl,
            op::DESTROY => Op::Destroy,
            _ => return Err(libc::ENOSYS),
        })
    }
}

/// The first NUL-terminated name of `b` and what follows its NUL.
fn split_name(b: &[u8]) -> Parsed<(&[u8], &[u8])> {
    let end = b.iter().position(|&c| c == 0).ok_or(libc::EINVAL)?;
    Ok((&b[..end], &b[end + 1..]))
}

/// `n` consecutive NUL-terminated names at the start of `b`.
fn names(mut b: &[u8], n: usize) -> Parsed<Vec<&[u8]>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let (name, rest) = split_name(b)?;
        out.push(name);
        b = rest;
    }
    Ok(out)
}

/// The kernel's `fuse_setattr_in` as the core's [`SetattrIn`].
fn setattr(a: abi::SetattrIn) -> SetattrIn {
    use abi::fattr;
    let has = |bit| a.valid & bit != 0;
    let time = |set, now, sec: u64, nsec: u32| {
        if has(now) {
            Some(SetTime::Now)
        } else if has(set) {
            Some(SetTime::At(timespec(sec, nsec)))
        } else {
            None
        }
    };
    SetattrIn {
        mode: has(fattr::MODE).then_some(a.mode),
        uid: has(fattr::UID).then_some(a.uid),
        gid: has(fattr::GID).then_some(a.gid),
        size: has(fattr::SIZE).then_some(a.size),
        atime: time(fattr::ATIME, fattr::ATIME_NOW, a.atime, a.atimensec),
        mtime: time(fattr::MTIME, fattr::MTIME_NOW, a.mtime, a.mtimensec),
        ctime: has(fattr::CTIME).then(|| timespec(a.ctime, a.ctimensec)),
        fh: has(fattr::FH).then_some(a.fh),
    }
}

/// A kernel time (seconds as a two's complement i64, nanoseconds) as a
/// [`Timespec`]; nanoseconds past a second are clamped.
fn timespec(sec: u64, nsec: u32) -> Timespec {
    Timespec {
        sec: sec as i64,
        nsec: nsec.min(999_999_999),
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
