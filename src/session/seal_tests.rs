//! The two unsealed-memory limits of the write path (`SEAL_FRESH`,
//! `seal_threshold`): new data is sealed past 32 MiB, blocks pulled in by partial
//! overwrites stay in memory up to the larger budget, and the bytes read back are
//! the bytes written either way.

use std::sync::Arc;

use super::inode::{Block, Data};
use super::posix::NewNode;
use super::{SEAL_FRESH, Session, create_record, empty_root, seal_threshold};
use crate::store::{MemStore, ObjectStore};
use crate::tree::BLOCK_SIZE;

fn session() -> Session {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "s", root, 0, 1).unwrap();
    Session::open(store, rec).unwrap()
}

/// Blocks of `ino` held in memory (unsealed).
fn in_memory(s: &Session, ino: u64) -> usize {
    let st = s.lock();
    let Data::File(f) = &st.inodes[&ino].data else {
        panic!("not a file")
    };
    f.blocks
        .iter()
        .flatten()
        .filter(|(_, b)| matches!(b, Block::Mem(_)))
        .count()
}

fn byte(pos: u64, round: u8) -> u8 {
    (pos / 4096) as u8 ^ round.wrapping_mul(37)
}

#[test]
fn new_data_is_sealed_early_and_overwritten_blocks_stay_in_memory() {
    let s = session();
    let ino = s
        .create_node(1, b"f", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    let size = SEAL_FRESH + (8 << 20);
    let blocks = (size / BLOCK_SIZE) as usize;
    for off in (0..size).step_by(1 << 20) {
        let buf: Vec<u8> = (off..off + (1 << 20)).map(|p| byte(p, 0)).collect();
        s.write(ino, off, &buf).unwrap();
    }
    // New data: sealed once it passed 32 MiB, whatever the budget.
    let mem = in_memory(&s, ino);
    assert!(mem < blocks / 2, "{mem} of {blocks} blocks still unsealed");
    s.seal().unwrap();
    assert_eq!(in_memory(&s, ino), 0);
    // One 4 KiB overwrite in every block: each pulls its stored block in.
    for b in 0..blocks as u64 {
        let off = b * BLOCK_SIZE + 4096;
        let buf: Vec<u8> = (off..off + 4096).map(|p| byte(p, 1)).collect();
        s.write(ino, off, &buf).unwrap();
    }
    if seal_threshold() >= 2 * size {
        assert_eq!(in_memory(&s, ino), blocks, "overwritten blocks were sealed");
    }
    for b in [0, blocks as u64 / 2, blocks as u64 - 1] {
        let at = b * BLOCK_SIZE;
        let got = s.read(ino, at, BLOCK_SIZE as u32).unwrap();
        for (i, &v) in got.iter().enumerate() {
            let p = at + i as u64;
            let round = u8::from((4096..8192).contains(&(p % BLOCK_SIZE)));
            assert_eq!(v, byte(p, round), "byte {p}");
        }
    }
}
