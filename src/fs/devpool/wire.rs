//! One /dev/fuse message in and out: a request read whole from the device is laid
//! out as a ring entry (the in header and the opcode's fixed argument copied into a
//! header area, names and data left in place as the payload), so the ring's
//! dispatcher (`ring::dispatch`: parse, core call, encode) serves it unchanged; its
//! reply goes back in one `writev`. Also INIT: what treefork asks of the kernel
//! ([`settle`]) and the handshake on a new connection ([`handshake`]).
//!
//! Invariants: every read of the kernel's bytes is bounds-checked (a message
//! shorter than its opcode's fixed argument is [`Malformed`], never a panic); a
//! reply is one write (the kernel takes a reply only whole); what INIT settles is
//! written into the core before any other request of the connection is read.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use fuser::InitFlags;
use zerocopy::{FromBytes, IntoBytes};

use crate::error::Error;
use crate::fs::ring::abi::{self, op};
use crate::fs::ring::parse::{HeaderArea, ent_in_out};
use crate::fs::{Negotiated, TreeforkFs};

/// Bytes of a request buffer: the largest write with its headers. The kernel
/// refuses a read into less than max(8 KiB, in header + write_in + max_write), and
/// the payload left after a read's fixed argument holds the largest read reply.
pub(crate) const BUF: usize = crate::fs::ring::MAX_WRITE + 4096;

/// The ABI minor treefork answers INIT with (fuser 0.18's, what mounts were
/// negotiated at before the pool).
const MINOR: u32 = 40;

/// The size of `opcode`'s fixed first argument as the kernel sends it over
/// /dev/fuse, right after the in header: what the ring puts in the entry's op_in.
/// 0 for opcodes with names only or nothing (and for those parse does not know:
/// it answers them ENOSYS by opcode).
pub(crate) fn fixed_arg_size(opcode: u32) -> usize {
    use std::mem::size_of as s;
    match opcode {
        op::GETATTR => s::<abi::GetattrIn>(),
        op::SETATTR => s::<abi::SetattrIn>(),
        op::MKNOD => s::<abi::MknodIn>(),
        op::MKDIR => s::<abi::MkdirIn>(),
        op::RENAME => s::<abi::RenameIn>(),
        op::RENAME2 => s::<abi::Rename2In>(),
        op::LINK => s::<abi::LinkIn>(),
        op::OPEN | op::OPENDIR => s::<abi::OpenIn>(),
        op::READ | op::READDIR | op::READDIRPLUS => s::<abi::ReadIn>(),
        op::WRITE => s::<abi::WriteIn>(),
        op::RELEASE | op::RELEASEDIR => s::<abi::ReleaseIn>(),
        op::FSYNC | op::FSYNCDIR => s::<abi::FsyncIn>(),
        op::SETXATTR => s::<abi::SetxattrIn>(),
        op::GETXATTR | op::LISTXATTR => s::<abi::GetxattrIn>(),
        op::FLUSH => s::<abi::FlushIn>(),
        op::ACCESS => s::<abi::AccessIn>(),
        op::CREATE => s::<abi::CreateIn>(),
        op::FALLOCATE => s::<abi::FallocateIn>(),
        op::LSEEK => s::<abi::LseekIn>(),
        // `struct fuse_ioctl_in` (parse reads none of it: IOCTL is refused).
        op::IOCTL => 32,
        _ => 0,
    }
}

/// A message that cannot be a request: answer `errno` to `unique` (when it has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed {
    pub unique: Option<u64>,
    pub errno: i32,
}

/// The in header of a message read from the device (`None`: shorter than one, or
/// its length is not what was read).
pub(crate) fn in_header(msg: &[u8]) -> Option<abi::InHeader> {
    let (h, _) = abi::InHeader::read_from_prefix(msg).ok()?;
    (h.len as usize == msg.len()).then_some(h)
}

/// Lay the request `buf[..n]` out as a ring entry: `header` gets the in header
/// (in_out) and the fixed argument (op_in), and the payload size of what follows,
/// which stays in place and is returned as the payload (the whole rest of `buf`,
/// where the reply's body is then written).
pub(crate) fn as_entry<'b>(
    buf: &'b mut [u8],
    n: usize,
    header: &mut HeaderArea,
) -> Result<&'b mut [u8], Malformed> {
    let msg = buf.get(..n).ok_or(Malformed {
        unique: None,
        errno: libc::EIO,
    })?;
    let h = in_header(msg).ok_or(Malformed {
        unique: None,
        errno: libc::EIO,
    })?;
    let hsz = size_of::<abi::InHeader>();
    let start = hsz + fixed_arg_size(h.opcode);
    if start > n {
        return Err(Malformed {
            unique: Some(h.unique),
            errno: libc::EINVAL,
        });
    }
    header.fill(0);
    header[..hsz].copy_from_slice(&msg[..hsz]);
    header[abi::IN_OUT_SZ..abi::IN_OUT_SZ + start - hsz].copy_from_slice(&msg[hsz..start]);
    let e = abi::EntInOut {
        payload_sz: (n - start) as u32,
        commit_id: h.unique,
        ..Default::default()
    };
    let _ = e.write_to_prefix(&mut header[abi::ENT_IN_OUT_OFF..]);
    Ok(&mut buf[start..])
}

/// The most parts one message is written from.
const MAX_PARTS: usize = 4;

/// Write one message (its parts in one `writev`; at most [`MAX_PARTS`]). A reply to a request the kernel
/// already dropped (interrupted, or the connection ended) is refused with ENOENT or
/// ENODEV; the caller decides whether that matters.
pub(crate) fn send(fd: BorrowedFd<'_>, parts: &[&[u8]]) -> io::Result<()> {
    // No allocation: every reply is sent from here (header, body) and a
    // notification has at most four parts.
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_PARTS];
    let parts = &parts[..parts.len().min(MAX_PARTS)];
    for (v, p) in iov.iter_mut().zip(parts) {
        *v = libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        };
    }
    let total: usize = parts.iter().map(|p| p.len()).sum();
    // SAFETY: the first `parts.len()` iovecs point into live slices of `parts`
    // for the call's duration.
    let n = unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), parts.len() as libc::c_int) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != total {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("/dev/fuse took {n} of {total} bytes"),
        ));
    }
    Ok(())
}

/// Send the reply a dispatcher wrote into the entry (`header`, `payload`).
pub(crate) fn send_entry_reply(
    fd: BorrowedFd<'_>,
    header: &HeaderArea,
    payload: &[u8],
) -> io::Result<()> {
    let len = ent_in_out(header).payload_sz as usize;
    let body = payload.get(..len).unwrap_or(&[]);
    send(fd, &[&header[..size_of::<abi::OutHeader>()], body])
}

/// Answer `unique` with an error (`errno` positive) or, with 0, success and no body.
pub(crate) fn send_status(fd: BorrowedFd<'_>, unique: u64, errno: i32) -> io::Result<()> {
    send_body(fd, unique, errno, &[])
}

fn send_body(fd: BorrowedFd<'_>, unique: u64, errno: i32, body: &[u8]) -> io::Result<()> {
    let out = abi::OutHeader {
        len: (size_of::<abi::OutHeader>() + body.len()) as u32,
        error: -errno,
        unique,
    };
    send(fd, &[out.as_bytes(), body])
}

/// The INIT flags treefork asks for, given the kernel's `offered` flags, and what
/// that settles for the core. `writeback`: ask for the writeback cache.
pub(crate) fn settle(offered: u64, offer_io_uring: bool, writeback: bool) -> (u64, Negotiated) {
    let has = |f: InitFlags| offered & f.bits() != 0;
    let mut want = InitFlags::FUSE_ASYNC_READ
        | InitFlags::FUSE_BIG_WRITES
        | InitFlags::FUSE_MAX_PAGES
        | InitFlags::FUSE_INIT_EXT
        | InitFlags::FUSE_PARALLEL_DIROPS
        | InitFlags::FUSE_CACHE_SYMLINKS
        | InitFlags::FUSE_DO_READDIRPLUS
        // We clear set-user/group-id on write, truncate and chown ourselves; in
        // exchange the kernel stops asking for security.capability before every
        // write(2) (it sets SB_NOSEC).
        | InitFlags::FUSE_HANDLE_KILLPRIV_V2
        | InitFlags::FUSE_READDIRPLUS_AUTO
        // Not ATOMIC_O_TRUNC: with no_open the kernel would skip the truncation;
        // without it, O_TRUNC arrives as a SETATTR (size 0).
        | InitFlags::FUSE_NO_OPEN_SUPPORT
        // Listings are stateless (cookies, see `Entries`), so nothing per open
        // directory needs the daemon either.
        | InitFlags::FUSE_NO_OPENDIR_SUPPORT;
    // The kernel's writeback cache: on unless TREEFORK_WRITEBACK=0 (a diagnostic,
    // used by the bench's `treefork-nowb` target). Measured both ways in one run
    // (bench/RESULTS.md): off, every close(2) stops costing a GETATTR and
    // unlink/rename/link stop costing a SETATTR of the kernel's cached c/mtime,
    // but every write(2) becomes a synchronous round trip.
    if writeback {
        want |= InitFlags::FUSE_WRITEBACK_CACHE;
    }
    if offer_io_uring {
        want |= InitFlags::FUSE_OVER_IO_URING;
    }
    for f in want.iter() {
        if !has(f) && f != InitFlags::FUSE_INIT_EXT {
            log::info!("kernel does not offer {f:?}");
        }
    }
    let n = Negotiated {
        no_open: has(InitFlags::FUSE_NO_OPEN_SUPPORT),
        no_opendir: has(InitFlags::FUSE_NO_OPENDIR_SUPPORT),
        over_io_uring: offer_io_uring && has(InitFlags::FUSE_OVER_IO_URING),
    };
    (want.bits() & offered, n)
}

/// Read a new connection's INIT from `fd` (within `wait`), answer it with what
/// [`settle`] asks, and record what it settled in `core`.
pub(crate) fn handshake(
    fd: BorrowedFd<'_>,
    core: &TreeforkFs,
    offer_io_uring: bool,
    wait: Duration,
) -> Result<(), Error> {
    let dev_err = |e: io::Error| Error::io("/dev/fuse", e);
    let mut buf = vec![0u8; BUF];
    let deadline = std::time::Instant::now() + wait;
    let n = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        let r = unsafe { libc::poll(&mut p, 1, left.as_millis() as libc::c_int) };
        if r < 0 && !left.is_zero() {
            continue;
        }
        if r <= 0 {
            return Err(dev_err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no INIT from the kernel within {wait:?}"),
            )));
        }
        // SAFETY: `buf` is a live, writable buffer of its length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR | libc::EAGAIN | libc::ENOENT) => continue,
            _ => return Err(dev_err(e)),
        }
    };
    let msg = &buf[..n];
    let h = in_header(msg).ok_or_else(|| dev_err(io::Error::other("a truncated first message")))?;
    if h.opcode != op::INIT {
        return Err(dev_err(io::Error::other(format!(
            "the first message is opcode {}, not INIT",
            h.opcode
        ))));
    }
    let mut arg = abi::InitIn::default();
    let rest = &msg[size_of::<abi::InHeader>()..];
    let k = rest.len().min(size_of::<abi::InitIn>());
    arg.as_mut_bytes()[..k].copy_from_slice(&rest[..k]);
    if arg.major != 7 || arg.minor < 23 {
        let _ = send_status(fd, h.unique, libc::EPROTO);
        return Err(dev_err(io::Error::other(format!(
            "the kernel speaks FUSE {}.{}; treefork needs 7.23 or later",
            arg.major, arg.minor
        ))));
    }
    let mut offered = u64::from(arg.flags);
    if offered & InitFlags::FUSE_INIT_EXT.bits() != 0 {
        offered |= u64::from(arg.flags2) << 32;
    }
    let writeback = std::env::var("TREEFORK_WRITEBACK").map_or(true, |v| v != "0");
    let (flags, settled) = settle(offered, offer_io_uring, writeback);
    let max_write = crate::fs::ring::MAX_WRITE as u32;
    // SAFETY: sysconf has no memory arguments.
    let page = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).clamp(4096, 1 << 20) as u32;
    let out = abi::InitOut {
        major: 7,
        minor: MINOR,
        max_readahead: arg.max_readahead,
        flags: flags as u32,
        max_background: 64,
        congestion_threshold: 48,
        max_write,
        time_gran: 1,
        max_pages: ((max_write.max(arg.max_readahead) - 1) / page + 1) as u16,
        flags2: (flags >> 32) as u32,
        ..Default::default()
    };
    core.negotiated(settled);
    send_body(fd, h.unique, 0, out.as_bytes()).map_err(dev_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_asks_only_what_is_offered() {
        let all = u64::MAX;
        let (f, n) = settle(all, false, true);
        assert!(n.no_open && n.no_opendir && !n.over_io_uring);
        assert_ne!(f & InitFlags::FUSE_WRITEBACK_CACHE.bits(), 0);
        assert_eq!(f & InitFlags::FUSE_OVER_IO_URING.bits(), 0);
        assert_eq!(f & InitFlags::FUSE_ATOMIC_O_TRUNC.bits(), 0);
        let (f, n) = settle(all, true, false);
        assert!(n.over_io_uring);
        assert_eq!(f & InitFlags::FUSE_WRITEBACK_CACHE.bits(), 0);
        let offered = InitFlags::FUSE_ASYNC_READ.bits() | InitFlags::FUSE_NO_OPEN_SUPPORT.bits();
        let (f, n) = settle(offered, true, true);
        assert_eq!(f, offered);
        assert!(n.no_open && !n.no_opendir && !n.over_io_uring);
    }

    fn request(opcode: u32, unique: u64, rest: &[u8]) -> Vec<u8> {
        let h = abi::InHeader {
            len: (40 + rest.len()) as u32,
            opcode,
            unique,
            nodeid: 1,
            ..Default::default()
        };
        let mut v = h.as_bytes().to_vec();
        v.extend_from_slice(rest);
        v
    }

    /// A WRITE's fixed argument goes to op_in, its data stays in place as the
    /// payload; a LOOKUP's name is all payload.
    #[test]
    fn a_request_becomes_an_entry() {
        let w = abi::WriteIn {
            fh: 7,
            offset: 4096,
            size: 3,
            ..Default::default()
        };
        let mut rest = w.as_bytes().to_vec();
        rest.extend_from_slice(b"abc");
        let msg = request(op::WRITE, 9, &rest);
        let n = msg.len();
        let mut buf = vec![0u8; 256];
        buf[..n].copy_from_slice(&msg);
        let mut header = [0xffu8; abi::REQ_HEADER_SZ];
        let payload = as_entry(&mut buf, n, &mut header).unwrap();
        assert_eq!(&payload[..3], b"abc");
        let r = crate::fs::ring::parse::parse(&header, payload).unwrap();
        assert_eq!(r.unique, 9);
        match r.op {
            crate::fs::ring::parse::Op::Write {
                fh, offset, data, ..
            } => assert_eq!((fh, offset, data), (7, 4096, &b"abc"[..])),
            o => panic!("{o:?}"),
        }
        let msg = request(op::LOOKUP, 10, b"name\0");
        let n = msg.len();
        buf[..n].copy_from_slice(&msg);
        let payload = as_entry(&mut buf, n, &mut header).unwrap();
        let r = crate::fs::ring::parse::parse(&header, payload).unwrap();
        assert_eq!(r.op, crate::fs::ring::parse::Op::Lookup { name: b"name" });
    }

    #[test]
    fn short_or_lying_messages_are_malformed() {
        let mut buf = vec![0u8; 256];
        let mut header = [0u8; abi::REQ_HEADER_SZ];
        assert!(as_entry(&mut buf, 10, &mut header).is_err());
        // A WRITE with no room for its fixed argument.
        let msg = request(op::WRITE, 3, b"xy");
        buf[..msg.len()].copy_from_slice(&msg);
        let e = as_entry(&mut buf, msg.len(), &mut header).unwrap_err();
        assert_eq!((e.unique, e.errno), (Some(3), libc::EINVAL));
        // A length that is not what was read.
        let msg = request(op::LOOKUP, 4, b"a\0");
        buf[..msg.len()].copy_from_slice(&msg);
        assert!(as_entry(&mut buf, msg.len() + 1, &mut header).is_err());
        assert!(as_entry(&mut buf, 1000, &mut header).is_err());
    }
}
