//! Regression tests for graft defects the tree model test found, each named after
//! its bug and driven the way `src/ops` drives checkouts and restores.

use std::sync::Arc;

use crate::refs::Checkpoint;
use crate::session::posix::NewNode;
use crate::session::{Session, create_record, empty_root};
use crate::store::{MemStore, ObjectStore};

fn session() -> Session {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "r", root, 0, 1).unwrap();
    Session::open(store, rec).unwrap()
}

fn mkdir(s: &Session, parent: u64, name: &str) -> u64 {
    s.create_node(parent, name.as_bytes(), NewNode::Dir, 0o755, 0, 0)
        .unwrap()
        .ino
}

fn file(s: &Session, parent: u64, name: &str, data: &[u8]) -> u64 {
    let ino = s
        .create_node(parent, name.as_bytes(), NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    s.write(ino, 0, data).unwrap();
    ino
}

fn find(s: &Session, path: &str) -> crate::session::Stat {
    let mut st = s.getattr(1).unwrap();
    for c in path.split('/') {
        st = s.lookup(st.ino, c.as_bytes()).unwrap();
    }
    st
}

/// `checkout`: save pending changes under an auto ref, graft, move HEAD. Returns
/// the auto checkpoint if one was taken.
fn checkout(s: &Session, c: &Checkpoint, auto: &str) -> Option<Checkpoint> {
    let generation = s.generation();
    let saved = (s.has_changes().unwrap() || s.record().head.is_none()).then(|| {
        s.checkpoint("auto: before checkout", "before-checkout", Some(auto))
            .unwrap()
    });
    let root = c.root;
    let (_, r) = s.graft(root, None, Some(generation));
    r.unwrap();
    s.commit_checkout(c.id, root).unwrap();
    saved
}

/// The reported repro: `dir/nested/deep` and its hard link `dir/hard`; checkpoint
/// 1; a file `s`, checkpoint 2; a file `p`; `checkout HEAD~1`, then checkout the
/// `auto/before-checkout-*` ref. The second graft replaced each link reference by
/// a copy of its own (two inodes, nlink 1 each).
#[test]
fn checkout_between_checkpoints_with_a_hard_link_keeps_it_one_inode() {
    let s = session();
    let dir = mkdir(&s, 1, "dir");
    let nested = mkdir(&s, dir, "nested");
    let deep = file(&s, nested, "deep", b"deep bytes");
    s.link(deep, dir, b"hard").unwrap();
    let _c1 = s.checkpoint("one", "manual", None).unwrap();
    file(&s, 1, "s", b"s");
    let c2 = s.checkpoint("two", "manual", None).unwrap();
    file(&s, 1, "p", b"p");
    let c1 = crate::refs::resolve(&**s.store(), s.record().head, "HEAD~1").unwrap();
    let pending = checkout(&s, &c1, "auto/before-checkout-1").expect("p was pending");
    assert_eq!(pending.parent(), Some(c2.id));
    assert!(checkout(&s, &pending, "auto/before-checkout-2").is_none());
    let check = |s: &Session| {
        let (a, b) = (find(s, "dir/nested/deep"), find(s, "dir/hard"));
        assert_eq!(a.ino, b.ino, "the hard link was split");
        assert_eq!((a.attr.nlink, b.attr.nlink), (2, 2));
        s.write(a.ino, 0, b"DEEP").unwrap();
        assert_eq!(s.read(b.ino, 0, 100).unwrap(), b"DEEP bytes");
    };
    check(&s);
    s.flush().unwrap();
    check(&Session::open(s.store().clone(), s.record()).unwrap());
}

/// A checkout to a tree without a directory counted only the directory itself
/// out of the session's usage, not what it held.
#[test]
fn checkout_counts_a_removed_directorys_contents_out_of_the_usage() {
    let s = session();
    let empty = s.checkpoint("empty", "manual", None).unwrap();
    let b = mkdir(&s, 1, "b");
    let c = mkdir(&s, b, "c");
    file(&s, c, "x", &[7; 5000]);
    assert_eq!(s.usage(), (5000, 4));
    // Once from the live table, once from a stored (not yet loaded) directory.
    checkout(&s, &empty, "auto/before-checkout-1");
    assert_eq!(s.usage(), (0, 1));
    let full = crate::refs::resolve(&**s.store(), None, "auto/before-checkout-1").unwrap();
    checkout(&s, &full, "auto/before-checkout-2");
    assert_eq!(s.usage(), (5000, 4));
    s.flush().unwrap();
    let s = Session::open(s.store().clone(), s.record()).unwrap();
    checkout(&s, &empty, "auto/before-checkout-3");
    assert_eq!(s.usage(), (0, 1));
}

/// Restoring a directory away (from a checkpoint without it) left the link count
/// of a hard link inside it unchanged: `x` kept nlink 2 with one name left.
#[test]
fn restore_removing_a_directory_counts_its_hard_links_out() {
    let s = session();
    let x = file(&s, 1, "x", b"x");
    let empty = s.checkpoint("no a", "manual", None).unwrap();
    let a = mkdir(&s, 1, "a");
    s.link(x, a, b"h").unwrap();
    let generation = s.generation();
    s.checkpoint(
        "before restore",
        "before-restore",
        Some("auto/before-restore-1"),
    )
    .unwrap();
    let (_, r) = s.graft(empty.root, Some(&[b"a".to_vec()]), Some(generation));
    r.unwrap();
    assert!(s.lookup(1, b"a").is_err());
    let st = find(&s, "x");
    assert_eq!(st.attr.nlink, 1);
    assert_eq!(s.usage(), (1, 2));
    s.flush().unwrap();
    let s = Session::open(s.store().clone(), s.record()).unwrap();
    assert_eq!(find(&s, "x").attr.nlink, 1);
}
