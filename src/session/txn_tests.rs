//! [`super::Txn`] on a `MemStore`: a batch is durable and in memory all at once or
//! not at all, driven the way `ops::save_and_graft` drives a checkout.

use std::sync::Arc;

use super::snapshot::StateChange;
use super::{Session, create_record, empty_root, load_record};
use crate::error::Error;
use crate::meta::MetaOp;
use crate::refs::{self, Checkpoint};
use crate::session::posix::NewNode;
use crate::store::{MemStore, ObjectStore};

fn session() -> Session {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "t", root, 0, 1).unwrap();
    Session::open(store, rec).unwrap()
}

fn read(s: &Session, name: &str) -> Option<Vec<u8>> {
    let st = s.lookup(1, name.as_bytes()).ok()?;
    Some(s.read(st.ino, 0, 1 << 16).unwrap())
}

/// `a` = "1" checkpointed (returned), then `a` = "22" and a new `b` pending.
fn with_pending(s: &Session) -> Checkpoint {
    let a = s
        .create_node(1, b"a", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    s.write(a, 0, b"1").unwrap();
    let c1 = s.checkpoint("one", "manual", None).unwrap();
    // What the FUSE layer notes before a change (`session::touch`).
    s.touch_ino(a);
    s.write(a, 0, b"22").unwrap();
    s.touch_name(1, b"b");
    let b = s
        .create_node(1, b"b", NewNode::File, 0o644, 0, 0)
        .unwrap()
        .ino;
    s.write(b, 0, b"pending").unwrap();
    c1
}

/// Save pending changes under `auto`, graft `c`, move HEAD to it, and commit with
/// `extra`; on failure graft the tree before back (as `save_and_graft` does).
fn checkout(
    s: &Session,
    c: &Checkpoint,
    auto: &str,
    extra: Vec<MetaOp>,
) -> crate::error::Result<()> {
    let mut tx = s.txn();
    assert!(tx.has_changes().unwrap());
    tx.save_side("auto: before checkout", "before-checkout", auto)
        .unwrap();
    let before_root = tx.flush().unwrap();
    let root = c.root;
    let (_, r) = tx.graft(root, None, Some(s.generation()));
    r.unwrap();
    tx.set_state(StateChange {
        head: Some(c.id),
        branch: None,
        base: root,
        root: Some(root),
    });
    let r = tx.try_commit(extra).map(drop);
    if r.is_err() {
        let (_, b) = tx.graft(before_root, None, None);
        b.unwrap();
    }
    r
}

#[test]
fn a_refused_batch_changes_nothing_durable_or_in_memory() {
    let s = session();
    let c1 = with_pending(&s);
    let before = s.record();
    let durable = load_record(&**s.store(), "t").unwrap().unwrap();
    let never = vec![MetaOp::Expect(b"r/never".to_vec(), Some(b"x".to_vec()))];
    let r = checkout(&s, &c1, "auto/x", never);
    assert!(matches!(r, Err(Error::Conflict(_))), "{r:?}");
    assert_eq!(s.record(), before);
    assert_eq!(load_record(&**s.store(), "t").unwrap().unwrap(), durable);
    assert!(refs::get_ref(&**s.store(), "auto/x").unwrap().is_none());
    assert!(
        crate::lifecycle::touched::list(&**s.store(), "t")
            .unwrap()
            .is_empty()
    );
    // The workspace is the pending one, and the flush given up is written again.
    assert_eq!(read(&s, "a").as_deref(), Some(&b"22"[..]));
    assert_eq!(read(&s, "b").as_deref(), Some(&b"pending"[..]));
    let root = s.flush().unwrap();
    let now = load_record(&**s.store(), "t").unwrap().unwrap();
    assert_eq!(now.root, root);
    assert_ne!(now.root, durable.root);
    assert_eq!(now.head, before.head);
    let touched = crate::lifecycle::touched::list(&**s.store(), "t").unwrap();
    assert!(touched.contains(&b"b".to_vec()), "{touched:?}");
}

#[test]
fn a_committed_batch_holds_the_save_the_state_and_the_record() {
    let s = session();
    let c1 = with_pending(&s);
    let store = s.store().clone();
    let key = b"s/extra".to_vec();
    checkout(
        &s,
        &c1,
        "auto/y",
        vec![MetaOp::Put(key.clone(), b"1".to_vec())],
    )
    .unwrap();
    let durable = load_record(&*store, "t").unwrap().unwrap();
    assert_eq!(durable, s.record());
    assert_eq!(durable.head, Some(c1.id));
    assert_eq!(durable.root, c1.root);
    assert_eq!(store.meta_get(&key).unwrap().as_deref(), Some(&b"1"[..]));
    // The saved checkpoint holds the pending changes; HEAD did not take them in.
    let saved = refs::resolve(&*store, None, "auto/y").unwrap();
    assert_eq!(saved.parent(), Some(c1.id));
    let changed: Vec<Vec<u8>> = crate::diff::diff_roots(&*store, c1.root, saved.root)
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(changed, vec![b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(read(&s, "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(read(&s, "b"), None);
    let touched = crate::lifecycle::touched::list(&*store, "t").unwrap();
    assert_eq!(touched, vec![b"a".to_vec(), b"b".to_vec()]);
}
