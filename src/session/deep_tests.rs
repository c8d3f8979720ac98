//! A tree deeper than any recursion could take (issue 12, D2): every walk of the
//! session layer (encode, graft, diff, reopen) on the in-memory store, on a thread
//! with a small stack so a walk that recursed per level would overflow it.

use std::sync::Arc;

use super::posix::NewNode;
use super::{Session, create_record, empty_root};
use crate::diff::{self, Change};
use crate::store::{MemStore, ObjectStore};

const DEPTH: usize = 10_000;

/// Create `d/d/d/...` `depth` levels deep under the root, with a file at the bottom;
/// returns the bottom directory's inode.
fn build(s: &Session, depth: usize, file: &[u8]) -> u64 {
    let mut dir = 1;
    for _ in 0..depth {
        dir = s
            .create_node(dir, b"d", NewNode::Dir, 0o755, 0, 0)
            .unwrap()
            .ino;
    }
    let f = s
        .create_node(dir, b"f", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    s.write(f, 0, file).unwrap();
    dir
}

/// Walk `d/...` down `depth` levels by lookups; returns the bottom file's bytes.
fn read_bottom(s: &Session, depth: usize) -> Vec<u8> {
    let mut dir = 1;
    for _ in 0..depth {
        dir = s.lookup(dir, b"d").unwrap().ino;
    }
    let f = s.lookup(dir, b"f").unwrap();
    s.read(f.ino, 0, 4096).unwrap()
}

fn deep_tree_everywhere() {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "deep", root, 0, 1).unwrap();
    let s = Session::open(store.clone(), rec).unwrap();
    build(&s, DEPTH, b"bottom");
    // Encode (flush) and a checkpoint (diff against the base, counted).
    let deep = s.flush().unwrap();
    let c = s.checkpoint("deep", "manual", None).unwrap();
    assert_eq!(c.root, deep);
    // Diff: the whole chain is added, in path order.
    let d = diff::diff_roots(&*store, root, deep).unwrap();
    assert_eq!(d.len(), DEPTH + 1);
    assert!(d.iter().all(|e| e.change == Change::Added));
    assert!(d.windows(2).all(|w| w[0].path < w[1].path));
    assert_eq!(
        diff::diff_count(&*store, deep, root).unwrap(),
        DEPTH as u64 + 1
    );
    // Graft away (to the empty tree) and back: the whole chain removed, then
    // inserted under fresh inodes.
    let (inval, r) = s.graft(root, None, None);
    r.unwrap();
    assert!(!inval.is_empty());
    let now = s.flush().unwrap();
    assert_eq!(diff::diff_count(&*store, root, now).unwrap(), 0);
    let (_, r) = s.graft(deep, None, None);
    r.unwrap();
    let now = s.flush().unwrap();
    assert_eq!(diff::diff_count(&*store, deep, now).unwrap(), 0);
    assert_eq!(read_bottom(&s, DEPTH), b"bottom");
    // A deep change grafts back by path (restore of the top directory).
    let mut dir = 1;
    for _ in 0..DEPTH {
        dir = s.lookup(dir, b"d").unwrap().ino;
    }
    let f = s.lookup(dir, b"f").unwrap().ino;
    s.write(f, 0, b"BOTTOM").unwrap();
    let changed = s.flush().unwrap();
    assert_eq!(diff::diff_count(&*store, deep, changed).unwrap(), 1);
    let (_, r) = s.graft(deep, Some(&[b"d".to_vec()]), None);
    r.unwrap();
    let now = s.flush().unwrap();
    assert_eq!(diff::diff_count(&*store, deep, now).unwrap(), 0);
    // Reopen from the durable record: the tree reads back.
    drop(s);
    let rec = super::load_record(&*store, "deep").unwrap().unwrap();
    let s = Session::open(store.clone(), rec).unwrap();
    assert_eq!(read_bottom(&s, DEPTH), b"bottom");
    // gc/fsck's reachability walk.
    let (_, reached) = crate::reach::reachable(&*store).unwrap();
    assert!(reached.contains(&now.into()));
}

/// 10,000 levels on a 1 MiB stack: flush, checkpoint, diff, graft away and back,
/// restore by path, reopen and reachability all complete (each used to recurse once
/// or more per level).
#[test]
fn ten_thousand_levels_on_a_small_stack() {
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(deep_tree_everywhere)
        .unwrap()
        .join()
        .unwrap();
}
