//! Flushing outside the table lock (issue 12, D8): changes made while a flush
//! encodes are never lost, and a big file's flush costs O(changed leaves).
//!
//! A [`HookStore`] wraps the in-memory store and runs a hook (a FUSE-like request on
//! the same session) inside the first node put of a flush, i.e. while the flush is
//! encoding. Before the fix this deadlocked (encode held the table lock); without the
//! publish check (`State::touched`) the change is silently dropped: the inode is
//! marked clean with the id encoded before the change.

use std::sync::{Arc, Mutex};

use super::posix::{NewNode, SetAttr};
use super::{Session, create_record, empty_root};
use crate::error::Result;
use crate::meta::MetaOp;
use crate::store::{Kind, MemStore, MetaStore, ObjectStore};
use crate::tree::{BLOCK_SIZE, LEAF_BLOCKS};

type Hook = Box<dyn FnOnce() + Send>;

/// An in-memory store that counts node puts and runs a hook in the next one.
#[derive(Default)]
struct HookStore {
    inner: MemStore,
    hook: Mutex<Option<Hook>>,
    /// Run in the next chunk read.
    chunk_hook: Mutex<Option<Hook>>,
    /// (node puts, node bytes put), counted while `counting`.
    counted: Mutex<(usize, usize)>,
}

impl HookStore {
    fn arm(&self, h: impl FnOnce() + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(h));
    }
    fn take_count(&self) -> (usize, usize) {
        std::mem::take(&mut *self.counted.lock().unwrap())
    }
    fn before_put(&self, kind: Kind, raw: &[u8]) {
        if kind == Kind::Node {
            let mut c = self.counted.lock().unwrap();
            c.0 += 1;
            c.1 += raw.len();
            drop(c);
            let h = self.hook.lock().unwrap().take();
            if let Some(h) = h {
                h();
            }
        }
    }
}

impl ObjectStore for HookStore {
    fn put(&self, kind: Kind, raw: &[u8]) -> Result<crate::id::ObjectId> {
        self.before_put(kind, raw);
        self.inner.put(kind, raw)
    }
    fn put_based(
        &self,
        kind: Kind,
        raw: &[u8],
        base: Option<crate::id::ObjectId>,
    ) -> Result<crate::id::ObjectId> {
        self.before_put(kind, raw);
        self.inner.put_based(kind, raw, base)
    }
    fn get(&self, kind: Kind, id: &crate::id::ObjectId) -> Result<Arc<Vec<u8>>> {
        if kind == Kind::Chunk {
            let h = self.chunk_hook.lock().unwrap().take();
            if let Some(h) = h {
                h();
            }
        }
        self.inner.get(kind, id)
    }
    fn contains(&self, id: &crate::id::ObjectId) -> Result<bool> {
        self.inner.contains(id)
    }
    fn commit(&self, ops: Vec<MetaOp>) -> Result<()> {
        self.inner.commit(ops)
    }
    fn meta(&self) -> &dyn MetaStore {
        self.inner.meta()
    }
    fn space(&self) -> (u64, u64, u64) {
        self.inner.space()
    }
}

fn session() -> (Arc<HookStore>, Arc<Session>) {
    let hs = Arc::new(HookStore::default());
    let store: Arc<dyn ObjectStore> = hs.clone();
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "lock", root, 0, 1).unwrap();
    (hs, Arc::new(Session::open(store, rec).unwrap()))
}

/// Flush, then reopen the session from its committed record (what a remount sees).
fn reopened(hs: &Arc<HookStore>, s: &Session) -> Session {
    s.flush().unwrap();
    let store: Arc<dyn ObjectStore> = hs.clone();
    Session::open(store, s.record()).unwrap()
}

fn read_all(s: &Session, dir: u64, name: &[u8]) -> Vec<u8> {
    let st = s.lookup(dir, name).unwrap();
    s.read(st.ino, 0, st.attr.size as u32).unwrap()
}

/// A write, a create and a chmod made while a flush encodes all reach the next
/// flush (the generation check keeps them dirty).
#[test]
fn changes_during_a_flush_are_not_lost() {
    let (hs, s) = session();
    let d = s
        .create_node(1, b"d", NewNode::Dir, 0o755, 0, 0)
        .unwrap()
        .ino;
    let f = s
        .create_node(d, b"f", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    s.write(f, 0, b"before").unwrap();
    s.flush().unwrap();
    s.write(f, 0, b"second").unwrap();
    let s2 = s.clone();
    hs.arm(move || {
        s2.write(f, 0, b"during").unwrap();
        s2.create_node(d, b"new", NewNode::File, 0o600, 0, 0)
            .unwrap();
        s2.setattr(
            1,
            SetAttr {
                mode: Some(0o700),
                ..SetAttr::default()
            },
        )
        .unwrap();
    });
    s.flush().unwrap();
    assert!(hs.hook.lock().unwrap().is_none(), "the hook ran");
    let r = reopened(&hs, &s);
    assert_eq!(
        read_all(&r, r.lookup(1, b"d").unwrap().ino, b"f"),
        b"during"
    );
    let rd = r.lookup(1, b"d").unwrap().ino;
    assert!(
        r.lookup(rd, b"new").is_ok(),
        "file created during the flush"
    );
    assert_eq!(r.getattr(1).unwrap().attr.perm, 0o700);
}

/// The same for a block-mapped file: a block rewritten while its leaf is being
/// encoded stays dirty, the other leaves are cached, and every byte survives.
#[test]
fn big_file_write_during_a_flush_is_not_lost() {
    let (hs, s) = session();
    let f = s
        .create_node(1, b"big", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    let span = LEAF_BLOCKS * BLOCK_SIZE;
    let blk = |b: u8| vec![b; BLOCK_SIZE as usize];
    for k in 0..4u64 {
        s.write(f, k * span + BLOCK_SIZE, &blk(k as u8 + 1))
            .unwrap();
    }
    s.flush().unwrap();
    s.write(f, 2 * span + BLOCK_SIZE, &blk(9)).unwrap();
    let s2 = s.clone();
    hs.arm(move || {
        // Leaf 2 is being encoded: rewrite it, and leaf 0.
        s2.write(f, 2 * span + BLOCK_SIZE, &blk(7)).unwrap();
        s2.write(f, BLOCK_SIZE, &blk(8)).unwrap();
    });
    s.flush().unwrap();
    let r = reopened(&hs, &s);
    let ino = r.lookup(1, b"big").unwrap().ino;
    for (k, want) in [(0u64, 8u8), (1, 2), (2, 7), (3, 4)] {
        let got = r
            .read(ino, k * span + BLOCK_SIZE, BLOCK_SIZE as u32)
            .unwrap();
        assert!(got == blk(want), "leaf {k}: block reads {}", got[0]);
    }
}

/// Rewriting one block of a big file flushes O(changed) node bytes: one leaf and
/// the map's index (plus the path to the root), not a list of every block.
#[test]
fn big_file_flush_costs_its_changed_leaves() {
    let (hs, s) = session();
    let f = s
        .create_node(1, b"big", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    let blk = vec![5u8; BLOCK_SIZE as usize];
    // 8,192 blocks (one every 8) over 1,024 leaves' worth of indexes: a flat
    // block list would be 320 KiB.
    let n = 8192u64;
    for i in 0..n {
        s.write(f, i * 8 * BLOCK_SIZE, &blk).unwrap();
    }
    s.flush().unwrap();
    hs.take_count();
    s.write(f, 800 * 8 * BLOCK_SIZE, &[6u8; 100]).unwrap();
    s.flush().unwrap();
    let (puts, bytes) = hs.take_count();
    // Index: 128 leaves x 40 B; one leaf of 64 blocks x 40 B; dir + root nodes.
    assert!(puts <= 4, "{puts} node puts");
    assert!(
        bytes < 16 << 10,
        "{bytes} node bytes put for a one-block change"
    );
    let r = reopened(&hs, &s);
    let ino = r.lookup(1, b"big").unwrap().ino;
    assert_eq!(
        r.read(ino, 800 * 8 * BLOCK_SIZE, 200).unwrap(),
        [[6u8; 100].as_slice(), &[5u8; 100]].concat()
    );
}

/// A truncation that cuts into a stored block reads it outside the lock and keeps
/// its head; cutting whole leaves away and growing again reads zeros there.
#[test]
fn truncate_through_leaves() {
    let (hs, s) = session();
    let f = s
        .create_node(1, b"big", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    let span = LEAF_BLOCKS * BLOCK_SIZE;
    for k in 0..3u64 {
        s.write(f, k * span, &vec![k as u8 + 1; BLOCK_SIZE as usize])
            .unwrap();
    }
    s.flush().unwrap();
    let size = |n| SetAttr {
        size: Some(n),
        ..SetAttr::default()
    };
    s.setattr(f, size(span + 100)).unwrap();
    s.flush().unwrap();
    s.setattr(f, size(3 * span)).unwrap();
    let r = reopened(&hs, &s);
    let ino = r.lookup(1, b"big").unwrap().ino;
    assert_eq!(r.read(ino, span, 200).unwrap(), {
        let mut v = vec![2u8; 100];
        v.resize(200, 0);
        v
    });
    assert_eq!(r.read(ino, 2 * span, 10).unwrap(), vec![0u8; 10]);
}

/// Whether `stat` of the root answers while `hold` runs (from another thread, so a
/// table lock held by the caller shows as a timeout instead of a deadlock).
fn stat_answers(s: &Arc<Session>) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let s = s.clone();
    std::thread::spawn(move || {
        let _ = tx.send(s.getattr(1).is_ok());
    });
    rx.recv_timeout(std::time::Duration::from_secs(3))
        .unwrap_or(false)
}

/// The chunk a partial-block write, a truncation or a zeroed range needs is read
/// outside the table lock: a `stat` made during that read answers. (Before: the
/// read ran under the lock and the `stat` waited for the whole request.)
#[test]
fn chunk_reads_do_not_hold_the_table_lock() {
    let (hs, s) = session();
    let f = s
        .create_node(1, b"f", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    s.write(f, 0, &vec![3u8; 3 * BLOCK_SIZE as usize]).unwrap();
    s.flush().unwrap();
    let answered = Arc::new(Mutex::new(Vec::new()));
    let arm = |what: &'static str| {
        let (s2, a) = (s.clone(), answered.clone());
        *hs.chunk_hook.lock().unwrap() = Some(Box::new(move || {
            a.lock().unwrap().push((what, stat_answers(&s2)));
        }));
    };
    arm("write");
    s.write(f, 10, b"partial").unwrap();
    arm("truncate");
    s.setattr(
        f,
        SetAttr {
            size: Some(BLOCK_SIZE + 5),
            ..SetAttr::default()
        },
    )
    .unwrap();
    s.flush().unwrap();
    arm("fallocate");
    s.fallocate(
        f,
        3,
        4,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    )
    .unwrap();
    let got = answered.lock().unwrap().clone();
    assert_eq!(
        got,
        [("write", true), ("truncate", true), ("fallocate", true)],
        "stat during a chunk read"
    );
    let r = reopened(&hs, &s);
    let data = read_all(&r, 1, b"f");
    let mut want = vec![3u8; BLOCK_SIZE as usize + 5];
    want[10..17].copy_from_slice(b"partial");
    want[3..7].fill(0);
    assert!(data == want, "content after partial write, truncate, punch");
}

/// Whether the block map of `ino` is loaded.
fn map_loaded(s: &Session, ino: u64) -> bool {
    match &s.lock().inodes[&ino].data {
        super::inode::Data::File(f) => f.blocks.is_some(),
        _ => false,
    }
}

/// A big file's block map loaded by a read is dropped once the file has been
/// clean and unused for a whole flush interval, and reloads on the next read
/// (issue 12, D9: a loaded map stayed for the life of the mount). A file in use
/// keeps its map.
#[test]
fn idle_block_maps_are_dropped() {
    let (hs, s) = session();
    let f = s
        .create_node(1, b"big", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    let span = LEAF_BLOCKS * BLOCK_SIZE;
    s.write(f, 2 * span, &[4u8; 1000]).unwrap();
    let r = Arc::new(reopened(&hs, &s));
    let ino = r.lookup(1, b"big").unwrap().ino;
    assert_eq!(r.read(ino, 2 * span, 10).unwrap(), [4u8; 10]);
    assert!(map_loaded(&r, ino));
    r.flush().unwrap();
    assert!(map_loaded(&r, ino), "used since the last flush: kept");
    r.read(ino, 0, 10).unwrap();
    r.flush().unwrap();
    assert!(map_loaded(&r, ino), "used again: kept");
    r.flush().unwrap();
    assert!(!map_loaded(&r, ino), "idle for a flush interval: dropped");
    assert_eq!(r.read(ino, 2 * span + 990, 20).unwrap(), [4u8; 10]);
    // A written (dirty) file keeps its map however long it is idle.
    r.write(ino, 5, b"x").unwrap();
    r.flush().unwrap();
    r.write(ino, 6, b"y").unwrap();
    for _ in 0..3 {
        assert!(map_loaded(&r, ino));
        r.lock().touched = None;
        let _ = r.lock().drop_idle_maps();
    }
    assert!(map_loaded(&r, ino), "dirty: kept");
}

/// One operation of the block-map model test.
#[derive(Debug, Clone)]
enum MapOp {
    /// Write `len` bytes of `seed` at `at` (in 4 KiB units over 8 leaves).
    Write {
        at: u64,
        len: u16,
        seed: u8,
    },
    /// Truncate to `size` (4 KiB units; may drop below the block-map threshold).
    Truncate {
        size: u64,
    },
    /// Punch a hole.
    Punch {
        at: u64,
        len: u32,
    },
    Flush,
    /// Flush while a write lands in the middle of the encode.
    FlushDuring {
        at: u64,
        seed: u8,
    },
    Reopen,
}

fn map_op() -> impl proptest::strategy::Strategy<Value = MapOp> {
    use proptest::prelude::*;
    let units = 8 * LEAF_BLOCKS * 16; // 8 leaves of 4 KiB units
    prop_oneof![
        6 => (0..units, 1u16..20_000, 1u8..255).prop_map(|(at, len, seed)| MapOp::Write { at, len, seed }),
        2 => (0..units).prop_map(|size| MapOp::Truncate { size }),
        1 => (0..units, 1u32..300_000).prop_map(|(at, len)| MapOp::Punch { at, len }),
        2 => Just(MapOp::Flush),
        2 => (0..units, 1u8..255).prop_map(|(at, seed)| MapOp::FlushDuring { at, seed }),
        1 => Just(MapOp::Reopen),
    ]
}

/// The file as a sparse model: size and nonzero bytes by offset.
#[derive(Default)]
struct Sparse {
    size: u64,
    bytes: std::collections::BTreeMap<u64, u8>,
}

impl Sparse {
    fn write(&mut self, at: u64, data: &[u8]) {
        for (i, b) in data.iter().enumerate() {
            self.bytes.insert(at + i as u64, *b);
        }
        self.size = self.size.max(at + data.len() as u64);
    }
    fn truncate(&mut self, size: u64) {
        self.bytes.split_off(&size);
        self.size = size;
    }
    fn punch(&mut self, at: u64, len: u64) {
        let end = (at + len).min(self.size);
        if end <= at {
            return;
        }
        let keys: Vec<u64> = self.bytes.range(at..end).map(|(k, _)| *k).collect();
        for k in keys {
            self.bytes.remove(&k);
        }
    }
}

/// Check every nonzero byte of the model, the bytes around each, and the size.
fn check_sparse(s: &Session, ino: u64, m: &Sparse) {
    assert_eq!(s.getattr(ino).unwrap().attr.size, m.size, "size");
    let mut at = 0;
    for (&k, _) in m.bytes.range(0..) {
        if k < at {
            continue;
        }
        let from = k.saturating_sub(8);
        let got = s.read(ino, from, 64 << 10).unwrap();
        let mut want = vec![0u8; got.len()];
        for (&o, &b) in m.bytes.range(from..from + got.len() as u64) {
            want[(o - from) as usize] = b;
        }
        if got != want {
            let i = got.iter().zip(&want).position(|(a, b)| a != b).unwrap();
            panic!(
                "byte at {}: {} != model {}",
                from + i as u64,
                got[i],
                want[i]
            );
        }
        at = from + got.len() as u64;
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]
    /// A file crossing the block-map threshold both ways, written, truncated and
    /// punched, flushed (also with writes landing mid-encode) and reopened, always
    /// reads as the model: the leaf cache, dirty leaves and the publish check never
    /// lose or resurrect a byte.
    #[test]
    fn block_map_matches_model(ops in proptest::collection::vec(map_op(), 1..30)) {
        let (hs, s0) = session();
        let mut s = s0;
        let mut ino = s.create_node(1, b"f", NewNode::File, 0o644, 0, 0).unwrap().ino;
        let mut m = Sparse::default();
        let data = |len: u16, seed: u8| -> Vec<u8> {
            (0..len).map(|i| seed.wrapping_add(i as u8) | 1).collect()
        };
        for op in ops {
            match op {
                MapOp::Write { at, len, seed } => {
                    let d = data(len, seed);
                    s.write(ino, at * 4096, &d).unwrap();
                    m.write(at * 4096, &d);
                }
                MapOp::Truncate { size } => {
                    s.setattr(ino, SetAttr { size: Some(size * 4096), ..SetAttr::default() }).unwrap();
                    m.truncate(size * 4096);
                }
                MapOp::Punch { at, len } => {
                    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
                    s.fallocate(ino, at * 4096, len as u64, mode).unwrap();
                    m.punch(at * 4096, len as u64);
                }
                MapOp::Flush => {
                    s.flush().unwrap();
                }
                MapOp::FlushDuring { at, seed } => {
                    let d = data(3000, seed);
                    m.write(at * 4096, &d);
                    let s2 = s.clone();
                    hs.arm(move || {
                        s2.write(ino, at * 4096, &d).unwrap();
                    });
                    s.flush().unwrap();
                    // No node put (nothing changed): the write happens now.
                    let h = hs.hook.lock().unwrap().take();
                    if let Some(h) = h {
                        h();
                    }
                }
                MapOp::Reopen => {
                    s = Arc::new(reopened(&hs, &s));
                    ino = s.lookup(1, b"f").unwrap().ino;
                }
            }
            check_sparse(&s, ino, &m);
        }
        let r = reopened(&hs, &s);
        check_sparse(&r, r.lookup(1, b"f").unwrap().ino, &m);
    }
}
