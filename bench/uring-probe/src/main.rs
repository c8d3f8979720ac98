//! Measurement tool, not part of treefork: a minimal FUSE server (a root directory
//! holding one file `f`) that answers either over /dev/fuse (read/write, 4 threads)
//! or over FUSE-over-io_uring (kernel 6.14+, protocol 7.42+: one queue per CPU, each
//! served by a thread pinned to that CPU). It isolates the transport's round-trip
//! cost on a machine from any filesystem's own work; `bench/uring-probe.sh` runs it.
//!
//! Usage: `uring-probe MOUNTPOINT [--uring]` (root; for `--uring`,
//! `/sys/module/fuse/parameters/enable_uring` must be Y before mounting).
//!
//! io_uring protocol as used here: INIT is answered on /dev/fuse with flags2 bit 9
//! (FUSE_OVER_IO_URING, 1 << 41); then per queue (one per possible CPU) entries are
//! registered with IORING_OP_URING_CMD on 128-byte SQEs, cmd_op 1 (REGISTER),
//! `sqe->addr` = two iovecs (a 288-byte header: in_out 128 + op_in 128 + ent_in_out
//! 32; a payload buffer of at least max_write), `sqe->len` = 2, and
//! `fuse_uring_cmd_req { flags, commit_id, qid }` in the command area. A completion
//! means a request sits in the entry: fuse_in_header in in_out, the opcode's fixed
//! argument in op_in, the rest (names, data) in the payload (`payload_sz` bytes).
//! The reply goes back with cmd_op 2 (COMMIT_AND_FETCH) and the request's
//! commit_id, which also re-arms the entry. FORGET, INTERRUPT and notifications
//! stay on /dev/fuse.
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::ffi::CString;
use std::os::fd::RawFd;

const MAX_WRITE: usize = 128 * 1024;
const IN_HDR: usize = 40;

fn u32at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn attr(ino: u64) -> Vec<u8> {
    let mut a = Vec::with_capacity(88);
    let (mode, size, nlink) = if ino == 1 {
        (0o040755u32, 4096u64, 2u32)
    } else {
        (0o100644u32, 3u64, 1u32)
    };
    for v in [ino, size, 1u64, 1_700_000_000, 1_700_000_000, 1_700_000_000] {
        a.extend_from_slice(&v.to_le_bytes());
    }
    for v in [0u32, 0, 0, mode, nlink, 0, 0, 0, 4096, 0] {
        a.extend_from_slice(&v.to_le_bytes());
    }
    a
}

/// Handle one request (contiguous /dev/fuse layout). Returns None for no reply,
/// else (errno, body).
fn handle(req: &[u8]) -> Option<(i32, Vec<u8>)> {
    let opcode = u32at(req, 4);
    let nodeid = u64at(req, 16);
    let body = &req[IN_HDR..];
    Some(match opcode {
        1 => {
            // LOOKUP
            let name = body.split(|&c| c == 0).next().unwrap_or(b"");
            let mut out = Vec::new();
            let ino = if nodeid == 1 && name == b"f" { 2u64 } else { 0 };
            for v in [ino, 0u64, 3600, 3600] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&[0u8; 8]);
            out.extend_from_slice(&attr(if ino == 0 { 1 } else { ino }));
            if ino == 0 {
                // negative entry: nodeid 0 with a timeout
                out[0..8].copy_from_slice(&0u64.to_le_bytes());
            }
            (0, out)
        }
        2 | 42 | 36 | 38 => return None, // FORGET, BATCH_FORGET, INTERRUPT, DESTROY
        3 => {
            let mut out = Vec::new();
            out.extend_from_slice(&3600u64.to_le_bytes());
            out.extend_from_slice(&[0u8; 8]);
            out.extend_from_slice(&attr(nodeid));
            (0, out)
        }
        14 | 27 | 25 => (-libc::ENOSYS, vec![]), // OPEN, OPENDIR, FLUSH
        18 | 29 => (0, vec![]),                  // RELEASE(DIR)
        15 => {
            let off = u64at(body, 8) as usize;
            let data = b"hi\n";
            (0, data.get(off.min(3)..).unwrap_or(b"").to_vec())
        }
        17 => (0, vec![0u8; 80]),
        22 => (-libc::ENODATA, vec![]),
        34 => (0, vec![]),
        _ => (-libc::ENOSYS, vec![]),
    })
}

fn reply_bytes(unique: u64, err: i32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + body.len());
    out.extend_from_slice(&((16 + body.len()) as u32).to_le_bytes());
    out.extend_from_slice(&err.to_le_bytes());
    out.extend_from_slice(&unique.to_le_bytes());
    out.extend_from_slice(body);
    out
}

fn dev_loop(fd: RawFd, uring: bool) {
    let mut buf = vec![0u8; MAX_WRITE + 4096];
    loop {
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::ENOENT) {
                continue;
            }
            eprintln!("dev read: {e}");
            return;
        }
        let req = &buf[..n as usize];
        let opcode = u32at(req, 4);
        let unique = u64at(req, 8);
        let out = if opcode == 26 {
            // INIT
            let b = &req[IN_HDR..];
            let (major, minor, ra, flags, flags2) = (
                u32at(b, 0),
                u32at(b, 4),
                u32at(b, 8),
                u32at(b, 12),
                u32at(b, 16),
            );
            eprintln!("INIT {major}.{minor} flags {flags:#x} flags2 {flags2:#x}");
            let want: u32 = (1 << 5) | (1 << 16) | (1 << 17) | (1 << 18) | (1 << 22) | (1 << 30);
            let want2: u32 = if uring { 1 << 9 } else { 0 };
            let mut o = Vec::new();
            for v in [7u32, minor, ra, flags & want] {
                o.extend_from_slice(&v.to_le_bytes());
            }
            o.extend_from_slice(&16u16.to_le_bytes());
            o.extend_from_slice(&12u16.to_le_bytes());
            o.extend_from_slice(&(MAX_WRITE as u32).to_le_bytes());
            o.extend_from_slice(&1u32.to_le_bytes());
            o.extend_from_slice(&((MAX_WRITE / 4096) as u16).to_le_bytes());
            o.extend_from_slice(&0u16.to_le_bytes());
            o.extend_from_slice(&(flags2 & want2).to_le_bytes());
            o.extend_from_slice(&[0u8; 28]);
            assert_eq!(o.len(), 64);
            if uring && flags2 & want2 == 0 {
                eprintln!("kernel did not offer FUSE_OVER_IO_URING (enable_uring?)");
            }
            let r = reply_bytes(unique, 0, &o);
            unsafe { libc::write(fd, r.as_ptr().cast(), r.len()) };
            if uring && flags2 & want2 != 0 {
                let ncpu = possible_cpus();
                for q in 0..ncpu {
                    std::thread::spawn(move || ring_loop(fd, q as u16));
                }
            }
            continue;
        } else {
            match handle(req) {
                Some((e, body)) => reply_bytes(unique, e, &body),
                None => continue,
            }
        };
        unsafe { libc::write(fd, out.as_ptr().cast(), out.len()) };
    }
}

/// Number of possible CPUs (the kernel makes one queue per possible CPU and uses
/// io_uring only once every queue has an entry): `/sys/devices/system/cpu/possible`,
/// e.g. "0-1" or "0,2-3".
fn possible_cpus() -> usize {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    s.trim()
        .split(',')
        .filter_map(|r| match r.split_once('-') {
            Some((_, b)) => Some(b.parse::<usize>().ok()? + 1),
            None => Some(r.parse::<usize>().ok()? + 1),
        })
        .max()
        .unwrap_or(1)
}

struct Ent {
    hdr: Box<[u8; 288]>,
    payload: Vec<u8>,
    iov: Box<[libc::iovec; 2]>,
}

fn sqe(fd: RawFd, cmd_op: u32, commit_id: u64, qid: u16, ent: &Ent, idx: u64) -> squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_le_bytes());
    cmd[16..18].copy_from_slice(&qid.to_le_bytes());
    let mut e = opcode::UringCmd80::new(types::Fd(fd), cmd_op)
        .cmd(cmd)
        .addr(Some(ent.iov.as_ptr() as u64))
        .build()
        .user_data(idx);
    // sqe->len = number of iovecs (header, payload); UringCmd80 has no setter.
    unsafe {
        let p = (&mut e as *mut squeue::Entry128).cast::<u8>();
        *(p.add(24).cast::<u32>()) = 2;
    }
    e
}

fn ring_loop(fd: RawFd, qid: u16) {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(qid as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
    let mut ring: IoUring<squeue::Entry128, cqueue::Entry> =
        IoUring::builder().build(8).expect("io_uring");
    let mut ents: Vec<Ent> = (0..2)
        .map(|_| {
            let mut hdr = Box::new([0u8; 288]);
            let mut payload = vec![0u8; MAX_WRITE];
            let iov = Box::new([
                libc::iovec {
                    iov_base: hdr.as_mut_ptr().cast(),
                    iov_len: 288,
                },
                libc::iovec {
                    iov_base: payload.as_mut_ptr().cast(),
                    iov_len: payload.len(),
                },
            ]);
            Ent { hdr, payload, iov }
        })
        .collect();
    for (i, e) in ents.iter().enumerate() {
        let s = sqe(fd, 1, 0, qid, e, i as u64);
        unsafe { ring.submission().push(&s).unwrap() };
    }
    ring.submit().unwrap();
    eprintln!("queue {qid}: registered {} entries", ents.len());
    let mut req = vec![0u8; MAX_WRITE + 512];
    loop {
        if let Err(e) = ring.submit_and_wait(1) {
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            eprintln!("queue {qid}: {e}");
            return;
        }
        let cqes: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (idx, res) in cqes {
            if res < 0 {
                eprintln!(
                    "queue {qid}: entry {idx}: {}",
                    std::io::Error::from_raw_os_error(-res)
                );
                return;
            }
            let e = &mut ents[idx as usize];
            let len = u32at(&e.hdr[..], 0) as usize;
            let unique = u64at(&e.hdr[..], 8);
            let commit_id = u64at(&e.hdr[..], 256 + 8);
            let psz = u32at(&e.hdr[..], 256 + 16) as usize;
            let oplen = len.saturating_sub(IN_HDR + psz).min(128);
            let total = IN_HDR + oplen + psz;
            req[..IN_HDR].copy_from_slice(&e.hdr[..IN_HDR]);
            req[IN_HDR..IN_HDR + oplen].copy_from_slice(&e.hdr[128..128 + oplen]);
            req[IN_HDR + oplen..total].copy_from_slice(&e.payload[..psz]);
            let (err, body) = handle(&req[..total]).unwrap_or((0, vec![]));
            // Reply: fuse_out_header in the header area, the body in the payload
            // buffer, its length in ent_in_out.payload_sz.
            e.hdr[..16].copy_from_slice(&reply_bytes(unique, err, &body)[..16]);
            e.payload[..body.len()].copy_from_slice(&body);
            e.hdr[256 + 16..256 + 20].copy_from_slice(&(body.len() as u32).to_le_bytes());
            let s = sqe(fd, 2, commit_id, qid, e, idx);
            unsafe { ring.submission().push(&s).unwrap() };
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mnt = &args[1];
    let uring = args.iter().any(|a| a == "--uring");
    let fd = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    assert!(fd >= 0, "open /dev/fuse");
    let opts = CString::new(format!(
        "fd={fd},rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other"
    ))
    .unwrap();
    let tgt = CString::new(mnt.as_str()).unwrap();
    let r = unsafe {
        libc::mount(
            c"uringprobe".as_ptr(),
            tgt.as_ptr(),
            c"fuse.uringprobe".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            opts.as_ptr().cast(),
        )
    };
    assert_eq!(r, 0, "mount: {}", std::io::Error::last_os_error());
    // Serve /dev/fuse on two threads (INIT, and whatever io_uring does not carry).
    let ts: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || dev_loop(fd, uring)))
        .collect();
    for t in ts {
        t.join().unwrap();
    }
}
