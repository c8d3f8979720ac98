//! Unit tests of `encode.rs`: headers, struct bodies and listings, read back with
//! zerocopy the way the kernel reads them.

use zerocopy::FromBytes;

use super::*;
use crate::fs::request::Looked;
use crate::tree::{Attr, Timespec};

fn areas() -> (HeaderArea, Vec<u8>) {
    ([0u8; abi::REQ_HEADER_SZ], vec![0xEEu8; 4096])
}

fn out(h: &HeaderArea) -> (abi::OutHeader, u32) {
    let o = abi::OutHeader::read_from_prefix(&h[..]).unwrap().0;
    let e = abi::EntInOut::read_from_prefix(&h[abi::ENT_IN_OUT_OFF..])
        .unwrap()
        .0;
    (o, e.payload_sz)
}

fn stat(ino: u64, kind: Kind) -> Stat {
    Stat {
        ino,
        kind,
        attr: Attr {
            perm: 0o4755,
            uid: 7,
            gid: 8,
            size: 12345,
            nlink: 2,
            mtime: Timespec { sec: -1, nsec: 5 },
            ..Default::default()
        },
        blocks: 24,
    }
}

#[test]
fn errors_are_negative_with_no_body() {
    let (mut h, mut p) = areas();
    Reply::new(&mut h, &mut p, 99).error(libc::ENOENT);
    let (o, psz) = out(&h);
    assert_eq!((o.len, o.error, o.unique, psz), (16, -libc::ENOENT, 99, 0));
}

#[test]
fn entries_carry_attributes_and_ttl() {
    let (mut h, mut p) = areas();
    Reply::new(&mut h, &mut p, 1).entry(&stat(42, Kind::Dir));
    let (o, psz) = out(&h);
    assert_eq!((o.len, o.error, psz), (16 + 128, 0, 128));
    let e = abi::EntryOut::read_from_prefix(&p[..]).unwrap().0;
    assert_eq!(e.nodeid, 42);
    assert_eq!(
        (e.entry_valid, e.attr_valid),
        (TTL.as_secs(), TTL.as_secs())
    );
    assert_eq!(e.attr.mode, libc::S_IFDIR | 0o4755);
    assert_eq!((e.attr.size, e.attr.blocks, e.attr.nlink), (12345, 24, 2));
    assert_eq!((e.attr.mtime as i64, e.attr.mtimensec), (-1, 5));
    assert_eq!((e.attr.uid, e.attr.gid, e.attr.blksize), (7, 8, 4096));
}

#[test]
fn negative_entries_are_node_zero_with_ttl() {
    let (mut h, mut p) = areas();
    Reply::new(&mut h, &mut p, 1).entry(&Looked::Negative.entry());
    let e = abi::EntryOut::read_from_prefix(&p[..]).unwrap().0;
    assert_eq!((e.nodeid, e.entry_valid), (0, TTL.as_secs()));
    assert_eq!(e.attr.mode, libc::S_IFREG);
}

#[test]
fn create_is_entry_then_open() {
    let (mut h, mut p) = areas();
    let c = Created {
        stat: stat(5, Kind::File),
        fh: 0,
        open_flags: 2,
    };
    Reply::new(&mut h, &mut p, 1).created(&c);
    assert_eq!(out(&h).1, 144);
    let o = abi::OpenOut::read_from_prefix(&p[128..]).unwrap().0;
    assert_eq!(o.open_flags, 2);
}

#[test]
fn small_bodies() {
    let (mut h, mut p) = areas();
    Reply::new(&mut h, &mut p, 1).written(4096);
    assert_eq!(out(&h).1, 8);
    assert_eq!(
        abi::WriteOut::read_from_prefix(&p[..]).unwrap().0.size,
        4096
    );
    Reply::new(&mut h, &mut p, 1).xattr(&Xattr::Size(17));
    assert_eq!(out(&h).1, 8);
    Reply::new(&mut h, &mut p, 1).xattr(&Xattr::Data(b"abc".to_vec()));
    assert_eq!((out(&h).1, &p[..3]), (3, &b"abc"[..]));
    Reply::new(&mut h, &mut p, 1).statfs(Statfs {
        blocks: 1,
        bfree: 2,
        bavail: 3,
        files: 4,
        ffree: 5,
        bsize: 4096,
        namelen: 255,
        frsize: 4096,
    });
    assert_eq!(out(&h).1, 80);
}

#[test]
fn a_body_larger_than_the_payload_is_eio() {
    let mut h = [0u8; abi::REQ_HEADER_SZ];
    let mut p = vec![0u8; 8];
    Reply::new(&mut h, &mut p, 1).bytes(&[1; 9]);
    assert_eq!(out(&h).0.error, -libc::EIO);
}

#[test]
fn listings_pad_to_eight_and_stop_when_full() {
    let (mut h, mut p) = areas();
    // Each record: 24 + 3 bytes -> 32.
    let mut l = Reply::new(&mut h, &mut p, 1).listing(70);
    assert!(!DirSink::add(&mut l, 10, 1, Kind::File, b"abc"));
    assert!(!DirSink::add(&mut l, 11, 2, Kind::Dir, b"def"));
    assert!(DirSink::add(&mut l, 12, 3, Kind::File, b"ghi"));
    l.finish();
    assert_eq!(out(&h).1, 64);
    let d = abi::Dirent::read_from_prefix(&p[32..]).unwrap().0;
    assert_eq!(
        (d.ino, d.off, d.namelen, d.typ),
        (11, 2, 3, libc::DT_DIR as u32)
    );
    assert_eq!(&p[32 + 24..32 + 32], b"def\0\0\0\0\0");
}

#[test]
fn listings_plus_carry_entries() {
    let (mut h, mut p) = areas();
    let mut l = Reply::new(&mut h, &mut p, 1).listing(4096);
    assert!(!DirPlusSink::add(
        &mut l,
        7,
        b"x",
        &stat(3, Kind::Symlink),
        TTL
    ));
    l.finish();
    assert_eq!(out(&h).1, 152 + 8);
    let d = abi::DirentPlus::read_from_prefix(&p[..]).unwrap().0;
    assert_eq!((d.entry_out.nodeid, d.dirent.ino, d.dirent.off), (3, 3, 7));
    assert_eq!(d.dirent.typ, libc::DT_LNK as u32);
}
