//! Local gc and fsck with remote-held objects (a `PackStore` with a remote over
//! `Client::memory`): an object not stored locally but in a remote's index is
//! neither read nor a problem (gc never hydrates it, fsck counts it as
//! `remote_held`), online (the lazy fallback) and offline (the cached index); an
//! object absent locally and unknown to every remote stays a problem.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Held, boundary};
use crate::id::NodeId;
use crate::remote::client::{Client, PutIf};
use crate::remote::config::RemoteConfig;
use crate::remote::{layout, packidx::PackBuilder};
use crate::store::{Kind, ObjectStore, PackStore, Packs};
use crate::tree::{Attr, Content, DirNode, Entry, FileNode, Kind as FKind, Record, RootNode};

pub(crate) struct Fixture {
    pub _dir: tempfile::TempDir,
    pub store: Arc<PackStore>,
    pub client: Client,
}

pub(crate) fn record(kind: FKind, ino: u64, content: Content) -> Record {
    Record {
        kind,
        ino,
        attr: Attr {
            perm: 0o755,
            nlink: 1,
            ..Attr::default()
        },
        xattrs: vec![],
        content,
    }
}

/// A store with remote `origin` (in memory) configured and its lazy fallback
/// installed.
pub(crate) fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(PackStore::open(&dir.path().join("s")).unwrap());
    let mut c = RemoteConfig::new("origin", "s3://bkt", "http://127.0.0.1:1", None, false).unwrap();
    c.conditional_writes = true;
    store.commit(vec![c.op()]).unwrap();
    let client = Client::memory("origin");
    crate::remote::registry::use_client(&*store, "origin", client.clone());
    let objects: Arc<dyn ObjectStore> = store.clone();
    crate::remote::lazy::install(&objects).unwrap();
    Fixture {
        _dir: dir,
        store,
        client,
    }
}

/// Objects written: (kind, id, raw).
pub(crate) type Objects = Vec<(Kind, crate::id::ObjectId, Vec<u8>)>;

/// One tree: root -> directory -> `n` files of one chunk each. Returns the root
/// and every (kind, id, raw) written, children first.
pub(crate) fn tree(store: &dyn ObjectStore, n: usize, seed: u8) -> (NodeId, Objects) {
    let mut objs = Vec::new();
    let mut put = |k: Kind, raw: Vec<u8>| {
        let id = store.put(k, &raw).unwrap();
        objs.push((k, id, raw));
        id
    };
    let mut entries = Vec::new();
    for i in 0..n {
        let data = format!("file {i} seed {seed} ").repeat(300).into_bytes();
        let len = data.len() as u64;
        let c = put(Kind::Chunk, data);
        let f = FileNode::Blocks {
            size: len,
            blocks: vec![(0, c.chunk())],
        };
        let fid = put(Kind::Node, f.encode());
        let r = record(FKind::File, 10 + i as u64, Content::Node(fid.node()));
        entries.push((format!("f{i:04}").into_bytes(), Entry::Inline(r)));
    }
    let did = put(Kind::Node, DirNode { entries }.encode());
    let root = RootNode {
        root: record(FKind::Dir, 1, Content::Node(did.node())),
        links: vec![],
        next_ino: 100,
    };
    let rid = put(Kind::Node, root.encode());
    (rid.node(), objs)
}

/// Upload `objs` to the remote as one pack (+ idx) and tell the shared index.
pub(crate) fn upload(f: &Fixture, objs: &[(Kind, crate::id::ObjectId, Vec<u8>)]) {
    let mut pb = PackBuilder::new();
    for (k, _, raw) in objs {
        pb.add_raw(*k, raw).unwrap();
    }
    let b = pb.finish();
    let key = layout::pack_key(&b.hash);
    f.client.put(&key, b.pack.clone(), PutIf::Always).unwrap();
    let key = layout::idx_key(&b.hash);
    f.client.put(&key, b.idx.clone(), PutIf::Always).unwrap();
    let r = crate::remote::open(&*f.store, "origin").unwrap();
    r.index.add(&b.idx).unwrap();
}

/// Session `name` at `root`.
pub(crate) fn session(store: &dyn ObjectStore, name: &str, root: NodeId) {
    let rec = crate::session::new_record(name, root, 0, 1).unwrap();
    store.commit(vec![crate::session::record_op(&rec)]).unwrap();
}

/// Drop the local copies of everything but `keep` (the index entries only).
pub(crate) fn drop_local(store: &PackStore, keep: &[crate::id::ObjectId]) {
    let keep: HashSet<crate::id::ObjectId> = keep.iter().copied().collect();
    store.commit(vec![]).unwrap();
    store.sweep(&keep, vec![]).unwrap();
}

fn gc(store: &PackStore) -> crate::error::Result<crate::gc::GcReport> {
    let held = Held::of(store)?;
    crate::gc::gc(
        store,
        &crate::gc::Offline,
        boundary(&held),
        false,
        &mut |_, _, _| {},
    )
}

fn fsck(store: &PackStore) -> crate::fsck::FsckReport {
    let held = Held::of(store).unwrap();
    crate::fsck::fsck(store, boundary(&held), false, &mut |_, _, _| {}).unwrap()
}

#[test]
fn gc_and_fsck_leave_remote_held_objects_unread() {
    let f = fixture();
    let (root, objs) = tree(&*f.store, 3, 1);
    session(&*f.store, "s", root);
    upload(&f, &objs);
    // Root and directory stay local; the files (nodes + chunks) are trimmed.
    let dir = objs[objs.len() - 2].1;
    drop_local(&f.store, &[root.into(), dir]);
    for (_, id, _) in &objs[..6] {
        assert!(!f.store.contains(id).unwrap());
    }
    let rep = gc(&f.store).unwrap();
    // The three file nodes are the boundary (their chunks are under them).
    assert_eq!(rep.remote_held, 3, "{rep:?}");
    let chk = fsck(&f.store);
    assert!(chk.clean(), "{:?}", chk.problems);
    assert_eq!(chk.remote_held, 3);
    assert_eq!(chk.objects_verified, 2);
    // Nothing was hydrated: gc and fsck read local objects only.
    for (_, id, _) in &objs[..6] {
        assert!(!f.store.contains(id).unwrap());
    }
    // Offline (no fallback installed): the cached index answers.
    f.store.set_fallback(None);
    assert_eq!(gc(&f.store).unwrap().remote_held, 3);
    let chk = fsck(&f.store);
    assert!(chk.clean() && chk.remote_held == 3, "{chk:?}");
    // The data is still there to read, lazily.
    let objects: Arc<dyn ObjectStore> = f.store.clone();
    crate::remote::lazy::install(&objects).unwrap();
    assert_eq!(&**f.store.get(objs[0].0, &objs[0].1).unwrap(), &objs[0].2);
}

#[test]
fn an_object_on_no_remote_stays_a_problem() {
    let f = fixture();
    let (root, objs) = tree(&*f.store, 2, 2);
    session(&*f.store, "s", root);
    // Only the chunks reach the remote: the nodes exist nowhere once dropped.
    let chunks: Vec<_> = objs
        .iter()
        .filter(|o| o.0 == Kind::Chunk)
        .cloned()
        .collect();
    upload(&f, &chunks);
    drop_local(&f.store, &[root.into()]);
    let e = gc(&f.store).unwrap_err();
    assert_eq!(e.code(), "conflict", "{e}");
    let chk = fsck(&f.store);
    assert_eq!(chk.problems.len(), 1, "{:?}", chk.problems);
    assert_eq!(chk.remote_held, 0);
    // No remote configured at all: the same.
    f.store
        .commit(vec![crate::meta::MetaOp::Delete(crate::meta::remote_key(
            "origin",
        ))])
        .unwrap();
    f.store.set_fallback(None);
    assert!(gc(&f.store).is_err());
}
