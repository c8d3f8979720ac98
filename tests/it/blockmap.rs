//! Big files on a real mount (issue 12, D8): flushing a large file costs what
//! changed, not the file. Measured by scanning the store's pack files for the
//! records a flush appended (node objects and their logical bytes), not by time.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::harness::{Mount, tf, tf_ok};
use treefork::store::Kind;
use treefork::store::pack;

const BLOCK: u64 = 64 * 1024;

/// Per pack file, the length scanned so far.
type Seen = HashMap<String, u64>;

/// (node records, node logical bytes, chunk records) appended to the packs since
/// `seen`; updates `seen`.
fn appended(store: &Path, seen: &mut Seen) -> (usize, u64, usize) {
    let (mut nodes, mut bytes, mut chunks) = (0, 0, 0);
    for e in std::fs::read_dir(store.join("packs")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".tfp") {
            continue;
        }
        let img = std::fs::read(&p).unwrap();
        let from = seen.get(&name).copied().unwrap_or(0);
        let (recs, _) = pack::scan(&img);
        for r in recs.iter().filter(|r| r.offset >= from) {
            match r.header.kind {
                Kind::Node => {
                    nodes += 1;
                    bytes += r.header.raw_len as u64;
                }
                Kind::Chunk => chunks += 1,
            }
        }
        seen.insert(name, img.len() as u64);
    }
    (nodes, bytes, chunks)
}

/// A 20 GiB sparse file with 4,096 written blocks spread over it (a flat block list
/// would be 160 KiB): rewriting one block and fsync stores one chunk and a few small
/// nodes; the content survives a remount.
#[test]
fn big_sparse_file_flushes_what_changed() {
    let m = Mount::new();
    let path = m.mp.join("big");
    let f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let size = 20u64 << 30;
    f.set_len(size).unwrap();
    let nblocks = size / BLOCK;
    let stride = nblocks / 4096;
    let block = |seed: u8| vec![seed | 1; BLOCK as usize];
    for i in 0..4096u64 {
        f.write_all_at(&block(i as u8), i * stride * BLOCK).unwrap();
    }
    f.sync_all().unwrap();
    let mut seen = Seen::new();
    appended(&m.store, &mut seen);
    // Rewrite one block (part of it: the rest is read back from its chunk).
    let at = 1234 * stride * BLOCK + 100;
    f.write_all_at(&[0xEE; 1000], at).unwrap();
    f.sync_all().unwrap();
    let (nodes, bytes, chunks) = appended(&m.store, &mut seen);
    // One leaf (~10 blocks x 40 B), the map's index (640 leaves x 40 B), the root
    // directory and the root node; one new chunk.
    assert!(chunks <= 1, "{chunks} chunks stored for a one-block change");
    assert!(nodes <= 4, "{nodes} nodes stored for a one-block change");
    assert!(
        bytes < 40 << 10,
        "{bytes} node bytes stored for a one-block change of a 4,096-block file"
    );
    drop(f);
    m.remount();
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(f.metadata().unwrap().len(), size);
    let mut buf = vec![0u8; BLOCK as usize];
    f.read_exact_at(&mut buf, 1234 * stride * BLOCK).unwrap();
    let mut want = block(1234u64 as u8);
    want[100..1100].fill(0xEE);
    assert!(buf == want, "rewritten block differs after remount");
    f.read_exact_at(&mut buf, 4095 * stride * BLOCK).unwrap();
    assert!(
        buf == block(4095u64 as u8),
        "last block differs after remount"
    );
    f.read_exact_at(&mut buf, 7 * BLOCK).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "a hole reads zeros");
}

/// gc and fsck follow block maps: after rewrites leave old leaves behind, a gc of
/// the unmounted store keeps every leaf and chunk the committed tree reaches, fsck
/// finds the store clean, and the file reads back once mounted again.
#[test]
fn gc_and_fsck_follow_block_maps() {
    let m = Mount::new();
    let path = m.mp.join("big");
    let f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .unwrap();
    // 4 leaves (32 MiB each), one block written every 1 MiB.
    let size = 128u64 << 20;
    f.set_len(size).unwrap();
    let at = |i: u64| i * (1 << 20);
    for i in 0..128u64 {
        f.write_all_at(&[i as u8 | 1; 4096], at(i)).unwrap();
    }
    f.sync_all().unwrap();
    for i in (0..128u64).step_by(40) {
        f.write_all_at(&[0xAB; 4096], at(i)).unwrap();
        f.sync_all().unwrap();
    }
    drop(f);
    // Unmounted: only the committed tree keeps objects alive.
    m.umount();
    let gc = tf_ok(&m.store, &["gc"]);
    let o = tf(&m.store, &["fsck"]);
    assert!(
        o.status.success(),
        "fsck after gc ({gc}): {}",
        String::from_utf8_lossy(&o.stdout)
    );
    m.mount();
    let f = std::fs::File::open(&path).unwrap();
    let mut buf = [0u8; 4096];
    for i in 0..128u64 {
        f.read_exact_at(&mut buf, at(i)).unwrap();
        let want = if i % 40 == 0 { 0xAB } else { i as u8 | 1 };
        assert!(buf.iter().all(|&b| b == want), "block at {} MiB", i);
    }
}
