//! Model tests: random operation sequences on a live session, checked against a
//! reference model after every step; proptest shrinks a failing sequence to a
//! minimal one and prints it (`minimal failing input: ops = [...]`).
//!
//! - `session_matches_model`: file data (writes, truncates, renames) across flushes
//!   and reopenings of the session from its durable record.
//! - `sharded_dir_matches_model`: a large (sharded) directory stays canonical.
//! - `tree_ops_match_model` (in-memory store) and `tree_ops_match_model_with_gc`
//!   (pack store in a temporary directory, with real gc runs): the whole tree —
//!   directories, hard links, symlinks — through checkpoints, checkouts, restores,
//!   forks, flushes and reopenings ([`driver`], [`model`]).
//!
//! `PROPTEST_CASES=n` runs more cases than the defaults, which keep `cargo test`
//! fast.

mod driver;
mod model;
mod regressions;

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::posix::{NewNode, SetAttr};
use super::{Session, create_record, empty_root};
use crate::store::{MemStore, ObjectStore};

#[derive(Debug, Clone)]
enum Op {
    Write {
        file: u8,
        offset: u32,
        len: u32,
        seed: u8,
    },
    Truncate {
        file: u8,
        size: u32,
    },
    Unlink {
        file: u8,
    },
    Rename {
        from: u8,
        to: u8,
    },
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12, 0u32..300_000, 0u32..140_000, any::<u8>())
            .prop_map(|(file, offset, len, seed)| Op::Write { file, offset, len, seed }),
        1 => (0u8..12, 0u32..300_000).prop_map(|(file, size)| Op::Truncate { file, size }),
        1 => (0u8..12).prop_map(|file| Op::Unlink { file }),
        1 => (0u8..12, 0u8..12).prop_map(|(from, to)| Op::Rename { from, to }),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

/// File `i` lives in directory `d{i % 3}` as `f{i}`.
fn place(i: u8) -> (usize, Vec<u8>) {
    ((i % 3) as usize, format!("f{i}").into_bytes())
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| seed.wrapping_add((k / 1000) as u8) ^ (k as u8))
        .collect()
}

/// Look the directories up from the root, as the kernel would after a remount.
fn dirs_of(s: &Session) -> Vec<u64> {
    (0..3)
        .map(|d| s.lookup(1, format!("d{d}").as_bytes()).unwrap().ino)
        .collect()
}

fn check(s: &Session, model: &BTreeMap<u8, Vec<u8>>) {
    let dirs = dirs_of(s);
    for i in 0..12u8 {
        let (d, name) = place(i);
        match (s.lookup(dirs[d], &name), model.get(&i)) {
            (Ok(st), Some(want)) => {
                assert_eq!(st.attr.size, want.len() as u64, "size of f{i}");
                let got = s.read(st.ino, 0, want.len() as u32 + 10).unwrap();
                assert!(got == *want, "content of f{i} differs");
            }
            (Err(_), None) => {}
            (r, m) => panic!(
                "f{i}: session {:?} vs model {:?}",
                r.map(|s| s.attr.size),
                m.map(|v| v.len())
            ),
        }
    }
}

/// Cases to run: `PROPTEST_CASES` when set, else `default` (every model test's
/// count, `verbs::model_tests` too).
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]
    #[test]
    fn session_matches_model(ops in proptest::collection::vec(op(), 1..40)) {
        let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
        let root = empty_root(&*store, 0, 0).unwrap();
        let rec = create_record(&*store, "m", root, 0, 1).unwrap();
        let mut s = Session::open(store.clone(), rec).unwrap();
        let mut dirs: Vec<u64> = (0..3)
            .map(|d| s.create_node(1, format!("d{d}").as_bytes(), NewNode::Dir, 0o755, 0, 0).unwrap().ino)
            .collect();
        let mut model: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Write { file, offset, len, seed } => {
                    let (d, name) = place(file);
                    let ino = match s.lookup(dirs[d], &name) {
                        Ok(st) => st.ino,
                        Err(_) => s.create_node(dirs[d], &name, NewNode::File, 0o644, 0, 0).unwrap().ino,
                    };
                    let data = bytes(seed, len as usize);
                    s.write(ino, offset as u64, &data).unwrap();
                    let m = model.entry(file).or_default();
                    let end = offset as usize + data.len();
                    if m.len() < end && !data.is_empty() {
                        m.resize(end, 0);
                    }
                    m[offset as usize..offset as usize + data.len()].copy_from_slice(&data);
                }
                Op::Truncate { file, size } => {
                    let (d, name) = place(file);
                    if let Ok(st) = s.lookup(dirs[d], &name) {
                        s.setattr(st.ino, SetAttr { size: Some(size as u64), ..SetAttr::default() }).unwrap();
                        model.get_mut(&file).unwrap().resize(size as usize, 0);
                    }
                }
                Op::Unlink { file } => {
                    let (d, name) = place(file);
                    let r = s.remove(dirs[d], &name, false);
                    prop_assert_eq!(r.is_ok(), model.remove(&file).is_some());
                }
                Op::Rename { from, to } => {
                    let (fd, fname) = place(from);
                    let (td, tname) = place(to);
                    let r = s.rename(dirs[fd], &fname, dirs[td], &tname, 0);
                    prop_assert_eq!(r.is_ok(), model.contains_key(&from));
                    if let Some(v) = model.remove(&from) {
                        model.insert(to, v);
                    }
                }
                Op::Flush => {
                    s.flush().unwrap();
                }
                Op::Reopen => {
                    s.flush().unwrap();
                    s = Session::open(store.clone(), s.record()).unwrap();
                    dirs = dirs_of(&s);
                }
            }
            check(&s, &model);
        }
        s.flush().unwrap();
        let s2 = Session::open(store.clone(), s.record()).unwrap();
        check(&s2, &model);
    }
}

/// Operations on a large (sharded) directory.
#[derive(Debug, Clone)]
enum BigOp {
    Write { name: u8, seed: u8 },
    Chmod { name: u8, mode: u16 },
    Unlink { name: u8 },
    Rename { from: u8, to: u8 },
    Flush,
    Reopen,
}

fn big_op() -> impl Strategy<Value = BigOp> {
    prop_oneof![
        4 => (0u8..60, any::<u8>()).prop_map(|(name, seed)| BigOp::Write { name, seed }),
        1 => (0u8..60, 0u16..0o777).prop_map(|(name, mode)| BigOp::Chmod { name, mode }),
        2 => (0u8..60).prop_map(|name| BigOp::Unlink { name }),
        1 => (0u8..60, 0u8..60).prop_map(|(from, to)| BigOp::Rename { from, to }),
        2 => Just(BigOp::Flush),
        1 => Just(BigOp::Reopen),
    ]
}

/// Pool names interleave with the fixed files, so changes land in many shards.
fn big_name(k: u8) -> Vec<u8> {
    format!("p{:04}x", k as u32 * 11).into_bytes()
}

/// The stored node of directory `big` under root `root`.
fn big_dir_id(store: &dyn ObjectStore, root: crate::id::NodeId) -> crate::id::NodeId {
    let t = crate::diff::Tree::load(store, root).unwrap();
    match t.lookup(store, b"big").unwrap().unwrap().content {
        crate::tree::Content::Node(id) => id,
        c => panic!("big has content {c:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]
    /// Incremental flushes of a sharded directory reuse clean shards, yet always give
    /// the canonical encoding of exactly the current content.
    #[test]
    fn sharded_dir_matches_model(ops in proptest::collection::vec(big_op(), 1..60)) {
        let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
        let root = empty_root(&*store, 0, 0).unwrap();
        let rec = create_record(&*store, "m", root, 0, 1).unwrap();
        let mut s = Session::open(store.clone(), rec).unwrap();
        let mut big = s.create_node(1, b"big", NewNode::Dir, 0o755, 0, 0).unwrap().ino;
        let mut model: BTreeMap<Vec<u8>, (Vec<u8>, u32)> = BTreeMap::new();
        for k in 0..700u32 {
            let name = format!("p{k:04}").into_bytes();
            let ino = s.create_node(big, &name, NewNode::File, 0o644, 0, 0).unwrap().ino;
            let data = format!("fixed {k}").into_bytes();
            s.write(ino, 0, &data).unwrap();
            model.insert(name, (data, 0o644));
        }
        s.flush().unwrap();
        let check = |s: &Session, big: u64, model: &BTreeMap<Vec<u8>, (Vec<u8>, u32)>| {
            let listed: Vec<Vec<u8>> = s.readdir_page(big, 0, usize::MAX, false).unwrap().into_iter().map(|e| e.1.name).filter(|n| n != b"." && n != b"..").collect();
            let mut listed = listed;
            listed.sort();
            assert_eq!(listed, model.keys().cloned().collect::<Vec<_>>());
            for k in 0..60u8 {
                let name = big_name(k);
                match (s.lookup(big, &name), model.get(&name)) {
                    (Ok(st), Some((data, mode))) => {
                        assert_eq!(st.attr.perm & 0o7777, *mode);
                        assert_eq!(s.read(st.ino, 0, 4096).unwrap(), *data);
                    }
                    (Err(_), None) => {}
                    (r, m) => panic!("{:?}: {:?} vs {:?}", String::from_utf8_lossy(&name), r.is_ok(), m.is_some()),
                }
            }
        };
        let canonical = |s: &Session| {
            let root = s.flush().unwrap();
            let id = big_dir_id(&*store, root);
            let entries = crate::dirs::load_dir(&*store, Some(id)).unwrap().entries.clone();
            assert_eq!(crate::dirs::put_dir(&*store, entries).unwrap(), id, "not canonical");
        };
        for op in ops {
            match op {
                BigOp::Write { name, seed } => {
                    let name = big_name(name);
                    let ino = match s.lookup(big, &name) {
                        Ok(st) => st.ino,
                        Err(_) => s.create_node(big, &name, NewNode::File, 0o644, 0, 0).unwrap().ino,
                    };
                    let data = bytes(seed, 1 + seed as usize * 3);
                    s.setattr(ino, SetAttr { size: Some(0), ..SetAttr::default() }).unwrap();
                    s.write(ino, 0, &data).unwrap();
                    let mode = model.get(&name).map(|m| m.1).unwrap_or(0o644);
                    model.insert(name, (data, mode));
                }
                BigOp::Chmod { name, mode } => {
                    let name = big_name(name);
                    if let Ok(st) = s.lookup(big, &name) {
                        s.setattr(st.ino, SetAttr { mode: Some(mode as u32), ..SetAttr::default() }).unwrap();
                        model.get_mut(&name).unwrap().1 = mode as u32;
                    }
                }
                BigOp::Unlink { name } => {
                    let name = big_name(name);
                    let r = s.remove(big, &name, false);
                    prop_assert_eq!(r.is_ok(), model.remove(&name).is_some());
                }
                BigOp::Rename { from, to } => {
                    let (from, to) = (big_name(from), big_name(to));
                    let r = s.rename(big, &from, big, &to, 0);
                    prop_assert_eq!(r.is_ok(), model.contains_key(&from));
                    if let Some(v) = model.remove(&from) {
                        model.insert(to, v);
                    }
                }
                BigOp::Flush => canonical(&s),
                BigOp::Reopen => {
                    canonical(&s);
                    s = Session::open(store.clone(), s.record()).unwrap();
                    big = s.lookup(1, b"big").unwrap().ino;
                }
            }
            check(&s, big, &model);
        }
        canonical(&s);
        let s2 = Session::open(store.clone(), s.record()).unwrap();
        let big2 = s2.lookup(1, b"big").unwrap().ino;
        check(&s2, big2, &model);
    }
}

fn tree_op(gc: bool) -> BoxedStrategy<driver::Op> {
    use driver::{DIRS, LEAVES, Op};
    use proptest::sample::select;
    let leaf = || select(&LEAVES[..]);
    let dir = || select(&DIRS[..]);
    let restorable: Vec<&'static str> = [""].iter().chain(&DIRS).chain(&LEAVES).copied().collect();
    let ops = prop_oneof![
        6 => (leaf(), 0u32..150_000, 1u32..70_000, any::<u8>())
            .prop_map(|(path, offset, len, seed)| Op::Write { path, offset, len, seed }),
        1 => (leaf(), 0u32..150_000).prop_map(|(path, size)| Op::Truncate { path, size }),
        3 => dir().prop_map(|path| Op::Mkdir { path }),
        1 => dir().prop_map(|path| Op::Rmdir { path }),
        2 => leaf().prop_map(|path| Op::Unlink { path }),
        3 => (leaf(), leaf()).prop_map(|(from, to)| Op::Link { from, to }),
        1 => (leaf(), any::<u8>()).prop_map(|(path, seed)| Op::Symlink { path, seed }),
        2 => (leaf(), leaf()).prop_map(|(from, to)| Op::Rename { from, to }),
        3 => Just(Op::Checkpoint),
        3 => any::<u8>().prop_map(|k| Op::Checkout { k }),
        2 => (any::<u8>(), select(restorable)).prop_map(|(k, path)| Op::Restore { k, path }),
        1 => any::<u8>().prop_map(|k| Op::Fork { k }),
        1 => any::<u8>().prop_map(|n| Op::Switch { n }),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ];
    if gc {
        prop_oneof![18 => ops, 1 => Just(Op::Gc)].boxed()
    } else {
        ops.boxed()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(96), ..ProptestConfig::default() })]
    /// The whole tree matches the model through checkpoints, checkouts, restores
    /// and forks (in-memory store).
    #[test]
    fn tree_ops_match_model(ops in proptest::collection::vec(tree_op(false), 1..60)) {
        driver::World::mem().run(&ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]
    /// The same on a pack store, with gc runs among the ops: after each, every
    /// session and every checkpoint still reads.
    #[test]
    fn tree_ops_match_model_with_gc(ops in proptest::collection::vec(tree_op(true), 1..60)) {
        driver::World::packs().run(&ops);
    }
}
