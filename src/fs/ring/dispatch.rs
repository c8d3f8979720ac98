//! From a ring entry's request to the core's answer in that entry: parse
//! (`parse.rs`), call the one [`TreeforkFs`] operation it names, encode
//! (`encode.rs`). Also decides which requests are slow ([`Dispatch::slow`]) and so
//! run on the worker pool instead of the ring thread: those that may hash, pack,
//! seal or flush, and every request while the store has a remote to fetch misses
//! from (lazy hydration: any read may then wait on the network).
//!
//! Invariants: every request is answered exactly once, into its own entry; each
//! core operation runs under the core's panic guard, and a panic here (parsing,
//! encoding) is caught too and answered EIO, so a ring thread never dies with its
//! entries. Errors become errnos only through `Error::errno`. Answers match the
//! /dev/fuse adapter's: what it answers ENOSYS or ENOTTY without asking the core
//! (ACCESS, IOCTL, locks, anything unknown) is answered the same here.

use std::sync::Arc;
use std::sync::OnceLock;

use super::Serve;
use super::abi::{fattr, op};
use super::encode::Reply;
use super::parse::{self, HeaderArea, Op, in_header};
use crate::error::Error;
use crate::fs::TreeforkFs;
use crate::fs::request::{Created, Opened, Stat, Statfs, Xattr};

/// Writes up to this size are served on the ring thread; larger ones on a worker.
/// 0: every write goes to the pool. Measured (bench/transport.sh, 2 cores, 4 KiB
/// random writes): a write costs the core enough that serving writes on the ring
/// threads serializes them per CPU (4,309 IOPS all inline, 7,153 with only writes
/// above 64 KiB offloaded, 8,745 all offloaded with 2 workers; /dev/fuse 11,768).
/// `TREEFORK_RING_WRITE_INLINE` overrides it (a measurement knob).
const WRITE_INLINE_MAX: usize = 0;

fn write_inline_max() -> usize {
    static V: OnceLock<usize> = OnceLock::new();
    *V.get_or_init(|| {
        std::env::var("TREEFORK_RING_WRITE_INLINE")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(WRITE_INLINE_MAX)
    })
}

/// Serves ring entries with one mount's core.
pub(crate) struct Dispatch {
    core: Arc<TreeforkFs>,
}

impl Dispatch {
    pub(crate) fn new(core: Arc<TreeforkFs>) -> Dispatch {
        Dispatch { core }
    }
}

/// A core answer, owned (the request's borrowed names and data are done with).
enum Answer {
    Err(i32),
    Ok,
    Entry(Stat),
    Attr(Stat),
    Data(Vec<u8>),
    Opened(Opened),
    Created(Created),
    Written(u32),
    Statfs(Statfs),
    Xattr(Xattr),
    Offset(u64),
    /// A listing, filled straight into the payload once the request is released.
    List {
        plus: bool,
        ino: u64,
        fh: u64,
        offset: u64,
        size: u32,
    },
}

/// The answer of an operation with nothing to return.
fn done(r: Result<(), Error>) -> Answer {
    r.map_or_else(|e| Answer::Err(e.errno()), |()| Answer::Ok)
}

/// An entry answer of a `Result<Stat>` (attributes are [`Answer::Attr`]).
fn entry(r: Result<Stat, Error>) -> Answer {
    r.map_or_else(|e| Answer::Err(e.errno()), Answer::Entry)
}

fn attr(r: Result<Stat, Error>) -> Answer {
    r.map_or_else(|e| Answer::Err(e.errno()), Answer::Attr)
}

fn answer<T>(r: Result<T, Error>, f: impl FnOnce(T) -> Answer) -> Answer {
    r.map_or_else(|e| Answer::Err(e.errno()), f)
}

impl Dispatch {
    /// Call the core for one parsed request.
    fn call(&self, r: parse::Request<'_>) -> Answer {
        let (c, q, n) = (&*self.core, &r.req, r.nodeid);
        match r.op {
            Op::Lookup { name } => answer(c.lookup(q, n, name), |l| Answer::Entry(l.entry())),
            Op::Getattr { fh } => attr(c.getattr(q, n, fh)),
            Op::Setattr(a) => attr(c.setattr(q, n, &a)),
            Op::Readlink => answer(c.readlink(q, n), Answer::Data),
            Op::Symlink { name, target } => entry(c.symlink(q, n, name, target)),
            Op::Mknod {
                name, mode, rdev, ..
            } => entry(c.mknod(q, n, name, mode, rdev)),
            Op::Mkdir { name, mode, .. } => entry(c.mkdir(q, n, name, mode)),
            Op::Unlink { name } => done(c.unlink(q, n, name)),
            Op::Rmdir { name } => done(c.rmdir(q, n, name)),
            Op::Rename {
                name,
                newparent,
                newname,
                flags,
            } => done(c.rename(q, n, name, newparent, newname, flags)),
            Op::Link { ino, newname } => entry(c.link(q, ino, n, newname)),
            Op::Open { flags } => answer(c.open(q, n, flags as i32), Answer::Opened),
            Op::Read { fh, offset, size } => answer(c.read(q, n, fh, offset, size), Answer::Data),
            Op::Write {
                fh,
                offset,
                data,
                write_flags,
            } => answer(
                c.write(q, n, fh, offset, data, write_flags),
                Answer::Written,
            ),
            Op::Statfs => answer(c.statfs(q, n), Answer::Statfs),
            Op::Release { fh, .. } => done(c.release(q, n, fh)),
            Op::Fsync { fh, datasync } => done(c.fsync(q, n, fh, datasync)),
            Op::Setxattr { name, value, flags } => {
                done(c.setxattr(q, n, name, value, flags as i32, 0))
            }
            Op::Getxattr { name, size } => answer(c.getxattr(q, n, name, size), Answer::Xattr),
            Op::Listxattr { size } => answer(c.listxattr(q, n, size), Answer::Xattr),
            Op::Removexattr { name } => done(c.removexattr(q, n, name)),
            Op::Flush { fh } => done(c.flush(q, n, fh, 0)),
            Op::Opendir { flags } => answer(c.opendir(q, n, flags as i32), Answer::Opened),
            Op::Readdir { fh, offset, size } => Answer::List {
                plus: false,
                ino: n,
                fh,
                offset,
                size,
            },
            Op::Readdirplus { fh, offset, size } => Answer::List {
                plus: true,
                ino: n,
                fh,
                offset,
                size,
            },
            Op::Releasedir { fh } => done(c.releasedir(q, n, fh)),
            Op::Fsyncdir { fh, datasync } => done(c.fsyncdir(q, n, fh, datasync)),
            Op::Create {
                name, mode, flags, ..
            } => answer(c.create(q, n, name, mode, flags as i32), Answer::Created),
            Op::Fallocate {
                fh,
                offset,
                length,
                mode,
            } => done(c.fallocate(q, n, fh, offset, length, mode as i32)),
            Op::Lseek { fh, offset, whence } => {
                let Ok(off) = i64::try_from(offset) else {
                    return Answer::Err(libc::ENXIO);
                };
                answer(c.lseek(q, n, fh, off, whence as i32), |o| {
                    Answer::Offset(o as u64)
                })
            }
            // As fuser's defaults answer what the /dev/fuse adapter leaves to them.
            Op::Access { .. } => Answer::Err(libc::ENOSYS),
            Op::Ioctl => Answer::Err(libc::ENOTTY),
            Op::Destroy => {
                c.destroy();
                Answer::Ok
            }
        }
    }

    /// Parse, call, encode.
    fn answer(&self, header: &mut HeaderArea, payload: &mut [u8]) {
        let h = in_header(header);
        let ans = match parse::parse(header, payload) {
            Ok(r) => self.call(r),
            Err(rej) => {
                if rej.errno != libc::ENOSYS {
                    log::warn!(
                        "ring: malformed request (opcode {}, unique {}): answered {}",
                        rej.opcode,
                        rej.unique,
                        std::io::Error::from_raw_os_error(rej.errno)
                    );
                }
                Answer::Err(rej.errno)
            }
        };
        let reply = Reply::new(header, payload, h.unique);
        let req = crate::fs::request::Req {
            uid: h.uid,
            gid: h.gid,
            pid: h.pid,
        };
        match ans {
            Answer::Err(e) => reply.error(e),
            Answer::Ok => reply.ok(),
            Answer::Entry(s) => reply.entry(&s),
            Answer::Attr(s) => reply.attr(&s),
            Answer::Data(d) => reply.bytes(&d),
            Answer::Opened(o) => reply.opened(o),
            Answer::Created(c) => reply.created(&c),
            Answer::Written(n) => reply.written(n),
            Answer::Statfs(s) => reply.statfs(s),
            Answer::Xattr(x) => reply.xattr(&x),
            Answer::Offset(o) => reply.offset(o),
            Answer::List {
                plus,
                ino,
                fh,
                offset,
                size,
            } => {
                let mut l = reply.listing(size);
                let r = if plus {
                    self.core.readdirplus(&req, ino, fh, offset, &mut l)
                } else {
                    self.core.readdir(&req, ino, fh, offset, &mut l)
                };
                match r {
                    Ok(()) => l.finish(),
                    Err(e) => l.error(e.errno()),
                }
            }
        }
    }
}

impl Serve for Dispatch {
    fn slow(&self, header: &HeaderArea, payload: &[u8]) -> bool {
        let _ = payload;
        let h = in_header(header);
        // With a remote to fetch misses from, any request may wait on the network:
        // a ring thread waiting there would stall every request of its CPU.
        if self.core.may_fetch_remotely() {
            return true;
        }
        match h.opcode {
            op::WRITE => {
                let size = parse::ent_in_out(header).payload_sz as usize;
                size > write_inline_max()
            }
            op::FSYNC | op::FSYNCDIR | op::FALLOCATE | op::DESTROY => true,
            // Not RELEASE nor FLUSH: the core answers FLUSH ENOSYS and a release
            // only takes the table lock to reap an unlinked inode (no store work),
            // like the requests served here. The kernel sends a RELEASE after every
            // CREATE (it stops only once an OPEN was answered ENOSYS), and a hop to
            // a worker and back cost more than the request (a worker's wakeup, the
            // channel, the eventfd): 13 of 36 us of daemon CPU per file of fio's
            // filecreate.
            // A truncation may seal or free blocks.
            op::SETATTR => {
                let valid = header
                    .get(super::abi::IN_OUT_SZ..super::abi::IN_OUT_SZ + 4)
                    .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                valid & fattr::SIZE != 0
            }
            _ => false,
        }
    }

    fn serve(&self, header: &mut HeaderArea, payload: &mut [u8]) {
        let unique = in_header(header).unique;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.answer(header, payload)
        }));
        if r.is_err() {
            log::error!("ring: serving request {unique} panicked; answered EIO");
            Reply::new(header, payload, unique).error(libc::EIO);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, OnceLock};

    use zerocopy::IntoBytes;

    use super::super::Serve;
    use super::super::abi::{self, op};
    use super::Dispatch;
    use crate::fs::TreeforkFs;
    use crate::session::{Session, create_record, empty_root};
    use crate::store::{Fallback, FetchedObject, Kind, ObjectStore, PackStore};

    /// A remote that has nothing (enough to make the store one that may fetch).
    struct Nowhere;
    impl Fallback for Nowhere {
        fn fetch(
            &self,
            _: Kind,
            _: &crate::id::ObjectId,
        ) -> crate::error::Result<Option<Vec<FetchedObject>>> {
            Ok(None)
        }
        fn has(&self, _: &crate::id::ObjectId) -> bool {
            false
        }
    }

    fn header(opcode: u32) -> super::HeaderArea {
        let mut h = [0u8; abi::REQ_HEADER_SZ];
        let ih = abi::InHeader {
            len: 40,
            opcode,
            unique: 1,
            nodeid: 1,
            uid: 0,
            gid: 0,
            pid: 1,
            total_extlen: 0,
            padding: 0,
        };
        ih.write_to_prefix(&mut h[..]).unwrap();
        h
    }

    /// Lookups, getattrs and reads stay on the ring thread, unless the store may
    /// fetch from a remote: then nothing does.
    #[test]
    fn a_store_with_a_remote_serves_nothing_on_the_ring_thread() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(PackStore::open(&dir.path().join("s")).unwrap());
        let root = empty_root(&*store, 0, 0).unwrap();
        let rec = create_record(&*store, "d", root, 0, 1).unwrap();
        let session = Arc::new(Session::open(store.clone(), rec).unwrap());
        let d = Dispatch::new(TreeforkFs::new(session, Arc::new(OnceLock::new())));
        let fast = [op::LOOKUP, op::GETATTR, op::READ, op::READDIRPLUS];
        for o in fast {
            assert!(!d.slow(&header(o), &[]), "opcode {o} offloaded");
        }
        assert!(d.slow(&header(op::FSYNC), &[]));
        store.set_fallback(Some(Arc::new(Nowhere)));
        for o in fast {
            assert!(d.slow(&header(o), &[]), "opcode {o} on the ring thread");
        }
        store.set_fallback(None);
        assert!(!d.slow(&header(op::GETATTR), &[]));
    }
}
