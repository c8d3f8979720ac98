//! Unit tests of `parse.rs`: one per argument shape, the rejections, and a property
//! test feeding hostile bytes.

use proptest::prelude::*;
use zerocopy::IntoBytes;

use super::*;

/// An entry holding request `opcode` on `nodeid` with fixed argument `fixed` and
/// payload `payload` (the payload buffer is `extra` bytes longer).
fn entry(opcode: u32, nodeid: u64, fixed: &[u8], payload: &[u8]) -> (HeaderArea, Vec<u8>) {
    let mut h = [0u8; abi::REQ_HEADER_SZ];
    let ih = abi::InHeader {
        len: (40 + fixed.len() + payload.len()) as u32,
        opcode,
        unique: 77,
        nodeid,
        uid: 1000,
        gid: 100,
        pid: 4242,
        total_extlen: 0,
        padding: 0,
    };
    ih.write_to_prefix(&mut h[..]).unwrap();
    h[abi::IN_OUT_SZ..abi::IN_OUT_SZ + fixed.len()].copy_from_slice(fixed);
    let e = abi::EntInOut {
        commit_id: 77,
        payload_sz: payload.len() as u32,
        ..Default::default()
    };
    e.write_to_prefix(&mut h[abi::ENT_IN_OUT_OFF..]).unwrap();
    let mut p = payload.to_vec();
    p.resize(payload.len() + 64, 0xAA);
    (h, p)
}

fn parsed(opcode: u32, fixed: &[u8], payload: &[u8]) -> Result<Op<'static>, i32> {
    let (h, p) = entry(opcode, 5, fixed, payload);
    let (h, p): (&'static HeaderArea, &'static [u8]) =
        (Box::leak(Box::new(h)), Box::leak(p.into_boxed_slice()));
    parse(h, p).map(|r| r.op).map_err(|r| r.errno)
}

#[test]
fn header_fields_reach_the_request() {
    let (h, p) = entry(op::LOOKUP, 9, &[], b"abc\0");
    let r = parse(&h, &p).unwrap();
    assert_eq!(r.unique, 77);
    assert_eq!(r.nodeid, 9);
    assert_eq!(
        r.req,
        Req {
            uid: 1000,
            gid: 100,
            pid: 4242
        }
    );
    assert_eq!(r.op, Op::Lookup { name: b"abc" });
}

#[test]
fn a_name_needs_its_nul_within_payload_sz() {
    // The buffer past payload_sz holds 0xAA, never a NUL; and a NUL past
    // payload_sz must not count either.
    assert_eq!(parsed(op::LOOKUP, &[], b"abc"), Err(libc::EINVAL));
    let (mut h, mut p) = entry(op::LOOKUP, 1, &[], b"abc");
    p[3] = 0;
    let e = abi::EntInOut {
        payload_sz: 3,
        ..Default::default()
    };
    e.write_to_prefix(&mut h[abi::ENT_IN_OUT_OFF..]).unwrap();
    assert_eq!(parse(&h, &p).unwrap_err().errno, libc::EINVAL);
}

#[test]
fn payload_sz_beyond_the_buffer_is_eio() {
    let (mut h, p) = entry(op::LOOKUP, 1, &[], b"a\0");
    let e = abi::EntInOut {
        payload_sz: p.len() as u32 + 1,
        ..Default::default()
    };
    e.write_to_prefix(&mut h[abi::ENT_IN_OUT_OFF..]).unwrap();
    let r = parse(&h, &p).unwrap_err();
    assert_eq!((r.errno, r.unique), (libc::EIO, 77));
}

#[test]
fn unknown_opcodes_are_enosys() {
    for opc in [0, 7, 26, 31, 47, 52, 4096, u32::MAX] {
        assert_eq!(parsed(opc, &[], &[]), Err(libc::ENOSYS), "opcode {opc}");
    }
}

#[test]
fn two_names() {
    assert_eq!(
        parsed(op::SYMLINK, &[], b"ln\0/tmp/target\0"),
        Ok(Op::Symlink {
            name: b"ln",
            target: b"/tmp/target"
        })
    );
    let r2 = abi::Rename2In {
        newdir: 12,
        flags: 1,
        padding: 0,
    };
    assert_eq!(
        parsed(op::RENAME2, r2.as_bytes(), b"a\0b\0"),
        Ok(Op::Rename {
            name: b"a",
            newparent: 12,
            newname: b"b",
            flags: 1
        })
    );
    assert_eq!(
        parsed(op::RENAME, 12u64.as_bytes(), b"a\0"),
        Err(libc::EINVAL)
    );
}

#[test]
fn write_data_is_bounded_by_the_payload() {
    let w = abi::WriteIn {
        fh: 3,
        offset: 4096,
        size: 5,
        write_flags: 4,
        ..Default::default()
    };
    assert_eq!(
        parsed(op::WRITE, w.as_bytes(), b"hello"),
        Ok(Op::Write {
            fh: 3,
            offset: 4096,
            data: b"hello",
            write_flags: 4
        })
    );
    let w = abi::WriteIn { size: 6, ..w };
    assert_eq!(parsed(op::WRITE, w.as_bytes(), b"hello"), Err(libc::EINVAL));
}

#[test]
fn setxattr_splits_name_and_value() {
    let a = abi::SetxattrIn { size: 3, flags: 2 };
    assert_eq!(
        parsed(op::SETXATTR, a.as_bytes(), b"user.k\0v\0x"),
        Ok(Op::Setxattr {
            name: b"user.k",
            value: b"v\0x",
            flags: 2
        })
    );
    let a = abi::SetxattrIn { size: 4, flags: 2 };
    assert_eq!(
        parsed(op::SETXATTR, a.as_bytes(), b"user.k\0v\0x"),
        Err(libc::EINVAL)
    );
}

#[test]
fn setattr_takes_only_the_valid_fields() {
    let a = abi::SetattrIn {
        valid: abi::fattr::SIZE | abi::fattr::MTIME | abi::fattr::ATIME | abi::fattr::ATIME_NOW,
        size: 10,
        mode: 0o777,
        mtime: (-2i64) as u64,
        mtimensec: 5,
        ..Default::default()
    };
    let Ok(Op::Setattr(s)) = parsed(op::SETATTR, a.as_bytes(), &[]) else {
        panic!("not a setattr")
    };
    assert_eq!(s.size, Some(10));
    assert_eq!(s.mode, None);
    assert_eq!(s.atime, Some(SetTime::Now));
    assert_eq!(s.mtime, Some(SetTime::At(Timespec { sec: -2, nsec: 5 })));
    assert_eq!(s.ctime, None);
    assert_eq!(s.fh, None);
}

#[test]
fn fixed_arguments() {
    let c = abi::CreateIn {
        flags: libc::O_WRONLY as u32,
        mode: 0o100644,
        umask: 0o22,
        open_flags: 0,
    };
    assert_eq!(
        parsed(op::CREATE, c.as_bytes(), b"f\0"),
        Ok(Op::Create {
            name: b"f",
            mode: 0o100644,
            umask: 0o22,
            flags: libc::O_WRONLY as u32
        })
    );
    let l = abi::LinkIn { oldnodeid: 44 };
    assert_eq!(
        parsed(op::LINK, l.as_bytes(), b"n\0"),
        Ok(Op::Link {
            ino: 44,
            newname: b"n"
        })
    );
    let f = abi::FsyncIn {
        fh: 1,
        fsync_flags: 1,
        padding: 0,
    };
    assert_eq!(
        parsed(op::FSYNCDIR, f.as_bytes(), &[]),
        Ok(Op::Fsyncdir {
            fh: 1,
            datasync: true
        })
    );
    let r = abi::ReadIn {
        fh: 2,
        offset: 3,
        size: 4096,
        ..Default::default()
    };
    assert_eq!(
        parsed(op::READDIRPLUS, r.as_bytes(), &[]),
        Ok(Op::Readdirplus {
            fh: 2,
            offset: 3,
            size: 4096
        })
    );
    let g = abi::GetattrIn {
        getattr_flags: 1,
        dummy: 0,
        fh: 9,
    };
    assert_eq!(
        parsed(op::GETATTR, g.as_bytes(), &[]),
        Ok(Op::Getattr { fh: Some(9) })
    );
}

proptest! {
    /// Random header areas and payloads never panic; whatever parses borrows only
    /// bytes within payload_sz.
    #[test]
    fn hostile_entries_never_panic(
        head in proptest::collection::vec(any::<u8>(), abi::REQ_HEADER_SZ),
        opcode in prop_oneof![0u32..=60, any::<u32>()],
        payload in proptest::collection::vec(any::<u8>(), 0..512),
        psz in prop_oneof![Just(None), (0u32..600).prop_map(Some), any::<u32>().prop_map(Some)],
    ) {
        let mut h = [0u8; abi::REQ_HEADER_SZ];
        h.copy_from_slice(&head);
        h[4..8].copy_from_slice(&opcode.to_ne_bytes());
        let psz = psz.unwrap_or(payload.len() as u32);
        h[abi::ENT_IN_OUT_OFF + 16..abi::ENT_IN_OUT_OFF + 20].copy_from_slice(&psz.to_ne_bytes());
        match parse(&h, &payload) {
            Ok(r) => {
                prop_assert!(psz as usize <= payload.len());
                let within = |s: &[u8]| {
                    let base = payload.as_ptr() as usize;
                    let p = s.as_ptr() as usize;
                    s.is_empty() || (p >= base && p + s.len() <= base + psz as usize)
                };
                match r.op {
                    Op::Lookup { name } | Op::Unlink { name } | Op::Rmdir { name } => prop_assert!(within(name)),
                    Op::Write { data, .. } => prop_assert!(within(data)),
                    Op::Setxattr { name, value, .. } => prop_assert!(within(name) && within(value)),
                    Op::Rename { name, newname, .. } => prop_assert!(within(name) && within(newname)),
                    _ => {}
                }
            }
            Err(r) => prop_assert!([libc::EINVAL, libc::EIO, libc::ENOSYS].contains(&r.errno)),
        }
    }
}
