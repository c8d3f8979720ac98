//! Replies written into a ring entry: the `fuse_out_header` into the header area's
//! in_out (length, 0 or a negative errno, the request's unique), the body into the
//! payload buffer, the body's length into `ent_in_out.payload_sz`.
//!
//! Owns: how the core's answers ([`Stat`], [`Opened`], [`Created`], [`Statfs`],
//! [`Xattr`], listings) become `fuse_*` structs, the same bytes the /dev/fuse
//! adapter sends through fuser: attributes with `blksize` 4096 and the file type in
//! `mode`, entries and attributes valid for [`TTL`], a negative entry as node id 0
//! with that timeout, dirents 8-byte aligned and a listing stopped at the first
//! record that would pass the size the request asked.
//!
//! Invariants: a [`Reply`] is consumed by exactly one answer; every write is within
//! the payload buffer (a body that does not fit, which the kernel's buffer sizing
//! rules out, is answered EIO instead of being cut).

use std::time::Duration;

use zerocopy::{Immutable, IntoBytes};

use super::abi;
use super::parse::HeaderArea;
use crate::fs::TTL;
use crate::fs::request::{Created, DirPlusSink, DirSink, Kind, Opened, Stat, Statfs, Xattr};

/// The answer to one request, being written into its entry.
pub struct Reply<'a> {
    header: &'a mut HeaderArea,
    payload: &'a mut [u8],
    unique: u64,
}

impl<'a> Reply<'a> {
    /// A reply to request `unique` into an entry's areas.
    pub fn new(header: &'a mut HeaderArea, payload: &'a mut [u8], unique: u64) -> Self {
        Reply {
            header,
            payload,
            unique,
        }
    }

    /// Write the out header and the payload size: `errno` is 0 or positive.
    fn finish(self, errno: i32, body_len: usize) {
        let out = abi::OutHeader {
            len: (size_of::<abi::OutHeader>() + body_len) as u32,
            error: -errno,
            unique: self.unique,
        };
        // The areas have fixed sizes larger than both structs.
        let _ = out.write_to_prefix(&mut self.header[..]);
        let e = abi::EntInOut {
            payload_sz: body_len as u32,
            ..Default::default()
        };
        let _ = e.write_to_prefix(&mut self.header[abi::ENT_IN_OUT_OFF..]);
    }

    /// An error answer (`errno` positive).
    pub fn error(self, errno: i32) {
        self.finish(errno, 0)
    }

    /// Success with no body.
    pub fn ok(self) {
        self.finish(0, 0)
    }

    /// Success with `body`.
    pub fn bytes(self, body: &[u8]) {
        match self.payload.get_mut(..body.len()) {
            Some(dst) => {
                dst.copy_from_slice(body);
                self.finish(0, body.len())
            }
            None => self.error(libc::EIO),
        }
    }

    /// Success with one struct as the body.
    fn value<T: IntoBytes + Immutable>(self, v: &T) {
        self.bytes(v.as_bytes())
    }

    /// An entry (lookup, mknod, mkdir, symlink, link): node id `stat.ino`.
    pub fn entry(self, stat: &Stat) {
        self.value(&entry_out(stat, TTL))
    }

    /// Attributes (getattr, setattr).
    pub fn attr(self, stat: &Stat) {
        self.value(&abi::AttrOut {
            attr_valid: TTL.as_secs(),
            attr_valid_nsec: TTL.subsec_nanos(),
            dummy: 0,
            attr: attr(stat),
        })
    }

    /// An open file (open, opendir).
    pub fn opened(self, o: Opened) {
        self.value(&open_out(o.fh, o.open_flags))
    }

    /// A created file: its entry, then its open file.
    pub fn created(self, c: &Created) {
        #[derive(IntoBytes, Immutable)]
        #[repr(C)]
        struct CreateOut {
            entry: abi::EntryOut,
            open: abi::OpenOut,
        }
        self.value(&CreateOut {
            entry: entry_out(&c.stat, TTL),
            open: open_out(c.fh, c.open_flags),
        })
    }

    /// Bytes written.
    pub fn written(self, n: u32) {
        self.value(&abi::WriteOut {
            size: n,
            padding: 0,
        })
    }

    /// A seek's resulting offset.
    pub fn offset(self, off: u64) {
        self.value(&abi::LseekOut { offset: off })
    }

    /// File system statistics.
    pub fn statfs(self, s: Statfs) {
        self.value(&abi::StatfsOut {
            st: abi::Kstatfs {
                blocks: s.blocks,
                bfree: s.bfree,
                bavail: s.bavail,
                files: s.files,
                ffree: s.ffree,
                bsize: s.bsize,
                namelen: s.namelen,
                frsize: s.frsize,
                padding: 0,
                spare: [0; 6],
            },
        })
    }

    /// An extended attribute's (or the name list's) size or value.
    pub fn xattr(self, x: &Xattr) {
        match x {
            Xattr::Size(n) => self.value(&abi::GetxattrOut {
                size: *n,
                padding: 0,
            }),
            Xattr::Data(d) => self.bytes(d),
        }
    }

    /// A listing written in place: at most `size` bytes (the request's), fewer if
    /// the payload buffer is smaller. Call [`Listing::finish`] to answer.
    pub fn listing(self, size: u32) -> Listing<'a> {
        let max = (size as usize).min(self.payload.len());
        Listing {
            reply: self,
            len: 0,
            max,
        }
    }
}

/// A readdir or readdirplus reply being filled (see [`Reply::listing`]).
pub struct Listing<'a> {
    reply: Reply<'a>,
    len: usize,
    max: usize,
}

impl Listing<'_> {
    /// Append one record: `head` then `name`, zero-padded to 8 bytes. Returns true
    /// (full) when it does not fit; nothing is written then.
    fn push(&mut self, head: &[u8], name: &[u8]) -> bool {
        let n = head.len() + name.len();
        let padded = n.next_multiple_of(8);
        if self.len + padded > self.max {
            return true;
        }
        let dst = &mut self.reply.payload[self.len..self.len + padded];
        dst[..head.len()].copy_from_slice(head);
        dst[head.len()..n].copy_from_slice(name);
        dst[n..].fill(0);
        self.len += padded;
        false
    }

    /// Answer with the records added.
    pub fn finish(self) {
        self.reply.finish(0, self.len)
    }

    /// Answer an error instead (what was added is dropped).
    pub fn error(self, errno: i32) {
        self.reply.error(errno)
    }
}

impl DirSink for Listing<'_> {
    fn add(&mut self, ino: u64, cookie: u64, kind: Kind, name: &[u8]) -> bool {
        let d = abi::Dirent {
            ino,
            off: cookie,
            namelen: name.len() as u32,
            typ: kind.type_bits() >> 12,
        };
        self.push(d.as_bytes(), name)
    }
}

impl DirPlusSink for Listing<'_> {
    fn add(&mut self, cookie: u64, name: &[u8], stat: &Stat, ttl: Duration) -> bool {
        let d = abi::DirentPlus {
            entry_out: entry_out(stat, ttl),
            dirent: abi::Dirent {
                ino: stat.ino,
                off: cookie,
                namelen: name.len() as u32,
                typ: stat.kind.type_bits() >> 12,
            },
        };
        self.push(d.as_bytes(), name)
    }
}

/// `fuse_attr` of a [`Stat`]: times as the kernel's (seconds two's complement,
/// nanoseconds), the type bits in `mode`, `blksize` 4096.
pub fn attr(s: &Stat) -> abi::Attr {
    let a = &s.attr;
    abi::Attr {
        ino: s.ino,
        size: a.size,
        blocks: s.blocks,
        atime: a.atime.sec as u64,
        mtime: a.mtime.sec as u64,
        ctime: a.ctime.sec as u64,
        atimensec: a.atime.nsec,
        mtimensec: a.mtime.nsec,
        ctimensec: a.ctime.nsec,
        mode: s.kind.type_bits() | (a.perm & 0o7777),
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: 4096,
        flags: 0,
    }
}

fn entry_out(s: &Stat, ttl: Duration) -> abi::EntryOut {
    abi::EntryOut {
        nodeid: s.ino,
        generation: 0,
        entry_valid: ttl.as_secs(),
        attr_valid: ttl.as_secs(),
        entry_valid_nsec: ttl.subsec_nanos(),
        attr_valid_nsec: ttl.subsec_nanos(),
        attr: attr(s),
    }
}

fn open_out(fh: u64, open_flags: u32) -> abi::OpenOut {
    abi::OpenOut {
        fh,
        open_flags,
        backing_id: 0,
    }
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
