//! Remote gc against `object_store`'s in-memory backend (conditional writes
//! work there): marking, the two phases and the grace, the pack closure, the
//! lock, dry runs, and a session's log keeping what it names alive.

use std::collections::HashSet;
use std::sync::Arc;

use super::*;
use crate::host::Unserved;
use crate::id::NodeId;
use crate::meta::TrackKind;
use crate::oplog::{Actor, NewOp, View};
use crate::refs::{Checkpoint, RefRecord};
use crate::remote::client::Client;
use crate::remote::config::RemoteConfig;
use crate::remote::index::RemoteIndex;
use crate::remote::packidx::Idx;
use crate::remote::push::{PushRequest, push_env};
use crate::store::{Kind as ObjKind, MemStore};
use crate::tree::{Attr, Content, DirNode, Entry, FileNode, Kind, Record, RootNode, Timespec};

fn record(kind: Kind, ino: u64, content: Content) -> Record {
    Record {
        kind,
        ino,
        attr: Attr {
            perm: 0o755,
            nlink: 1,
            mtime: Timespec { sec: 1, nsec: 0 },
            ..Attr::default()
        },
        xattrs: vec![],
        content,
    }
}

/// A root with one directory of files with contents `files`.
fn tree(store: &dyn ObjectStore, files: &[Vec<u8>]) -> NodeId {
    let mut entries = Vec::new();
    for (i, data) in files.iter().enumerate() {
        let c = store.put(ObjKind::Chunk, data).unwrap();
        let f = FileNode::Blocks {
            size: data.len() as u64,
            blocks: vec![(0, c.chunk())],
        };
        let fid = store.put(ObjKind::Node, &f.encode()).unwrap();
        let r = record(Kind::File, 10 + i as u64, Content::Node(fid.node()));
        entries.push((format!("f{i:03}").into_bytes(), Entry::Inline(r)));
    }
    let did = store
        .put(ObjKind::Node, &DirNode { entries }.encode())
        .unwrap();
    let root = RootNode {
        root: record(Kind::Dir, 1, Content::Node(did.node())),
        links: vec![],
        next_ino: 1000,
    };
    store.put(ObjKind::Node, &root.encode()).unwrap().node()
}

fn content(tag: &str, i: usize) -> Vec<u8> {
    format!("{tag} file {i} ").repeat(50).into_bytes()
}

/// Branch `name` at a new checkpoint of `files`.
fn branch(store: &MemStore, name: &str, files: &[Vec<u8>]) -> Checkpoint {
    let root = tree(store, files);
    let c = Checkpoint::new("s", root, None, name, "manual", 0);
    let r = RefRecord {
        checkpoint: c.id,
        created: 0,
    };
    store
        .commit(vec![c.op(), crate::refs::ref_op(name, &r)])
        .unwrap();
    c
}

fn remote_over(client: Client) -> (Remote, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config =
        RemoteConfig::new("origin", "s3://bkt", "http://127.0.0.1:1", None, false).unwrap();
    config.conditional_writes = true;
    let index = Arc::new(RemoteIndex::load(dir.path()).unwrap());
    let r = Remote {
        config,
        client,
        index,
    };
    (r, dir)
}

fn push(store: &dyn ObjectStore, remote: &Remote, refs: &[&str]) {
    let req = PushRequest {
        refs: refs.iter().map(|s| s.to_string()).collect(),
        session: None,
        force: false,
    };
    push_env(store, &Unserved, remote, &req, &mut |_| {}).unwrap();
}

fn run(remote: &Remote, dry_run: bool, grace_secs: u64) -> GcReport {
    // A fresh store: gc reads every node from the remote.
    let empty = MemStore::default();
    gc(
        &empty,
        remote,
        GcRequest {
            dry_run,
            grace_secs,
        },
    )
    .unwrap()
}

fn keys(c: &Client, dir: &str) -> HashSet<String> {
    c.list(dir).unwrap().into_iter().map(|m| m.key).collect()
}

fn all_keys(c: &Client) -> HashSet<String> {
    ["packs", "checkpoints", "logs", "refs", "gc"]
        .iter()
        .flat_map(|d| keys(c, d))
        .collect()
}

/// Every object every remaining idx names has its children and delta base in
/// some remaining idx (the closure invariant), and every idx has its pack.
fn assert_closed(c: &Client) {
    let mut ids = HashSet::new();
    let mut idxs = Vec::new();
    for k in keys(c, "packs") {
        if let Some(PackObject::Idx(h)) = layout::parse_pack_object(&k) {
            let idx =
                Idx::decode(&c.get(&k, layout::Body::PackIdx).unwrap().unwrap().bytes).unwrap();
            assert!(c.head(&layout::pack_key(&h)).unwrap().is_some(), "{k}");
            ids.extend(idx.entries.iter().map(|e| e.id));
            idxs.push(idx);
        }
    }
    let (remote, _d) = remote_over(c.clone());
    remote.index.refresh(c).unwrap();
    let src = crate::remote::lazy::Source::from(&remote);
    // Every node of every remaining pack, in one store; walk each: a child
    // that is in no remaining pack is a problem (missing), a chunk is checked
    // against the remaining ids.
    let store = MemStore::default();
    let mut nodes = Vec::new();
    for idx in &idxs {
        let want: Vec<_> = idx
            .entries
            .iter()
            .filter(|e| e.kind == ObjKind::Node)
            .copied()
            .collect();
        nodes.extend(want.iter().map(|e| e.id));
        crate::remote::pull::fetch::fetch_entries(&store, &src, &idx.pack_hash, want).unwrap();
        for e in &idx.entries {
            if let Some(b) = e.base {
                assert!(ids.contains(&b), "a kept delta lost its base");
            }
        }
    }
    let read = |k: ObjKind, id: &crate::id::ObjectId| store.get(k, id);
    let mut w = crate::reach::Walk::new(&read, crate::reach::ChunkCheck::Mark);
    for n in nodes {
        w.any_node("closure", n.node());
    }
    assert!(
        w.problems.is_empty(),
        "a kept node lost a child: {:?}",
        w.problems.first().map(|p| &p.error)
    );
    assert!(w.chunks.is_subset(&ids), "a kept file node lost its chunk");
}

#[test]
fn a_deleted_branchs_packs_go_in_two_phases_and_the_rest_stays_readable() {
    let store = MemStore::default();
    let client = Client::memory("origin");
    let (remote, _d) = remote_over(client.clone());
    let files_a: Vec<Vec<u8>> = (0..5).map(|i| content("a", i)).collect();
    let files_b: Vec<Vec<u8>> = (0..5).map(|i| content("b", i)).collect();
    let a = branch(&store, "a", &files_a);
    push(&store, &remote, &["a"]);
    let before_b = keys(&client, "packs");
    branch(&store, "b", &files_b);
    push(&store, &remote, &["b"]);
    let b_packs: HashSet<String> = keys(&client, "packs")
        .difference(&before_b)
        .cloned()
        .collect();
    assert_eq!(
        b_packs.len(),
        4,
        "b: a chunk pack and a node pack, with idx"
    );
    // Nothing dead: a clean run changes nothing.
    let everything = all_keys(&client);
    let clean = run(&remote, false, 0);
    assert_eq!(clean.phase, "clean");
    assert_eq!((clean.live_packs, clean.condemned), (4, 0));
    assert_eq!(all_keys(&client), everything);

    client.delete(&layout::branch_ref_key("b")).unwrap();
    // Dry run: reports, changes nothing (no lock, no gc/condemned).
    let dry = run(&remote, true, 0);
    assert_eq!((dry.phase.as_str(), dry.condemned), ("condemn", 2));
    assert_eq!(
        all_keys(&client),
        &everything - &["refs/branches/b".to_string()].into()
    );
    // Phase 1 condemns b's two packs and its checkpoint, deletes nothing.
    let one = run(&remote, false, 0);
    assert_eq!(one.phase, "condemn");
    assert_eq!((one.condemned, one.condemned_checkpoints), (2, 1));
    assert_eq!(one.packs_deleted, 0);
    assert!(keys(&client, "packs").is_superset(&b_packs));
    let condemned = GcCondemned::decode(
        &client
            .get(layout::GC_CONDEMNED, layout::Body::Gc)
            .unwrap()
            .unwrap()
            .bytes,
    )
    .unwrap();
    assert_eq!(condemned.packs.len(), 2);
    // A pusher now sees b's objects as absent (the index hides condemned packs).
    let (fresh, _d2) = remote_over(client.clone());
    fresh.index.refresh(&client).unwrap();
    let b_root = tree(&MemStore::default(), &files_b);
    assert!(!fresh.index.has(&b_root.into()));
    // Within the grace: wait, nothing deleted.
    let wait = run(&remote, false, 3600);
    assert_eq!(wait.phase, "wait");
    assert!(wait.wait_secs > 3500);
    assert!(keys(&client, "packs").is_superset(&b_packs));
    // Phase 2 (grace 0): b's packs and record go; a's stay, closed.
    let two = run(&remote, false, 0);
    assert_eq!(two.phase, "delete");
    assert_eq!((two.packs_deleted, two.checkpoints_deleted), (2, 1));
    assert!(two.bytes_deleted > 0);
    assert_eq!(two.condemned, 0);
    assert!(keys(&client, "packs").is_disjoint(&b_packs));
    assert_eq!(keys(&client, "packs"), before_b);
    assert!(
        client
            .get(layout::GC_CONDEMNED, layout::Body::Gc)
            .unwrap()
            .is_none()
    );
    assert!(
        client
            .get(layout::GC_LOCK, layout::Body::Gc)
            .unwrap()
            .is_none(),
        "lock released"
    );
    assert_eq!(
        keys(&client, "checkpoints"),
        [layout::checkpoint_key(&a.id.to_hex())].into()
    );
    assert_closed(&client);
}

#[test]
fn a_condemned_pack_a_ref_reaches_again_is_kept() {
    let store = MemStore::default();
    let client = Client::memory("origin");
    let (remote, _d) = remote_over(client.clone());
    branch(&store, "a", &[content("a", 0)]);
    let b = branch(&store, "b", &[content("b", 0)]);
    push(&store, &remote, &["a"]);
    push(&store, &remote, &["b"]);
    let got = client
        .get(&layout::branch_ref_key("b"), layout::Body::Ref)
        .unwrap()
        .unwrap();
    client.delete(&layout::branch_ref_key("b")).unwrap();
    assert_eq!(run(&remote, false, 0).condemned, 2);
    // A push that read the index before phase 1 lands its ref now (within the
    // grace): phase 2 re-marks and keeps what it reaches.
    client
        .put(&layout::branch_ref_key("b"), got.bytes, PutIf::Absent)
        .unwrap();
    let two = run(&remote, false, 0);
    assert_eq!((two.packs_deleted, two.resurrected), (0, 3));
    assert_eq!(two.live_packs, 4);
    assert!(
        client
            .get(layout::GC_CONDEMNED, layout::Body::Gc)
            .unwrap()
            .is_none()
    );
    let f = crate::remote::pull::refs::read(&client, TrackKind::Branch, "b")
        .unwrap()
        .unwrap();
    assert_eq!(f.checkpoint().as_deref(), Some(b.id.to_hex().as_str()));
    assert_closed(&client);
}

#[test]
fn a_kept_pack_keeps_what_its_dead_objects_need() {
    // p's chunk pack holds c1; q and r go in one push (shared packs); r names
    // c1. Dropping p and r leaves q's packs live, holding r's dead nodes, so
    // c1's pack must stay (a pusher would skip r's file node: `has` says yes).
    let store = MemStore::default();
    let client = Client::memory("origin");
    let (remote, _d) = remote_over(client.clone());
    let c1 = content("shared", 0);
    branch(&store, "p", &[c1.clone(), content("p", 1)]);
    push(&store, &remote, &["p"]);
    let p_packs = keys(&client, "packs");
    branch(&store, "q", &[content("q", 0)]);
    branch(&store, "r", &[c1, content("r", 1), content("r", 2)]);
    push(&store, &remote, &["q", "r"]);
    client.delete(&layout::branch_ref_key("p")).unwrap();
    client.delete(&layout::branch_ref_key("r")).unwrap();
    run(&remote, false, 0);
    let two = run(&remote, false, 0);
    assert_eq!(two.packs_deleted, 0, "p's packs hold what r's nodes name");
    assert!(keys(&client, "packs").is_superset(&p_packs));
    assert!(two.dead_bytes_in_live_packs > 0);
    assert_closed(&client);
    // Once r's nodes are gone too (q alone, repushed elsewhere), nothing pins p.
}

/// Session `s` at `root`, with one operation naming checkpoint `c`.
fn session_naming(store: &MemStore, root: NodeId, c: &Checkpoint) {
    crate::session::create_record(store, "s", root, 0, 0).unwrap();
    let view = |h: Option<crate::id::CheckpointId>| View {
        head: h,
        branch: None,
        workspace: root,
        branches: Default::default(),
    };
    let op = NewOp::new(
        &Actor::daemon(),
        "checkpoint",
        serde_json::json!({}),
        view(None),
        view(Some(c.id)),
    );
    crate::oplog::append(store, "s", op, vec![c.op()]).unwrap();
}

#[test]
fn what_a_session_log_names_stays_alive() {
    let store = MemStore::default();
    let client = Client::memory("origin");
    let (remote, _d) = remote_over(client.clone());
    // A checkpoint only the session's operation log names (no ref, no HEAD).
    let old = branch(&store, "old", &[content("old", 0)]);
    let ws = tree(&store, &[content("ws", 0)]);
    session_naming(&store, ws, &old);
    push(&store, &remote, &["old", "s"]);
    assert_eq!(keys(&client, "logs").len(), 1);
    client.delete(&layout::branch_ref_key("old")).unwrap();
    run(&remote, false, 0);
    let two = run(&remote, false, 0);
    assert_eq!(two.phase, "clean");
    assert_eq!(
        (two.packs_deleted, two.checkpoints_deleted, two.logs_deleted),
        (0, 0, 0)
    );
    assert!(keys(&client, "checkpoints").contains(&layout::checkpoint_key(&old.id.to_hex())));
    // Without the session, its log segment, the checkpoint and their packs go.
    client.delete(&layout::session_ref_key("s")).unwrap();
    run(&remote, false, 0);
    let gone = run(&remote, false, 0);
    assert_eq!((gone.logs_deleted, gone.checkpoints_deleted), (1, 1));
    assert_eq!(
        gone.packs_deleted, 2,
        "one push: a chunk pack and a node pack"
    );
    assert!(keys(&client, "packs").is_empty());
}

#[test]
fn an_orphan_pack_goes_after_the_grace_and_a_missing_record_stops_gc() {
    let store = MemStore::default();
    let client = Client::memory("origin");
    let (remote, _d) = remote_over(client.clone());
    let a = branch(&store, "a", &[content("a", 0)]);
    push(&store, &remote, &["a"]);
    let orphan = layout::pack_key(&crate::id::PackHash([7u8; 32]));
    client
        .put(&orphan, b"partial".to_vec(), PutIf::Absent)
        .unwrap();
    assert_eq!(run(&remote, false, 3600).orphans_deleted, 0);
    assert!(client.head(&orphan).unwrap().is_some());
    let r = run(&remote, false, 0);
    assert_eq!((r.orphans_deleted, r.packs_deleted), (1, 1));
    assert!(client.head(&orphan).unwrap().is_none());
    // A ref whose checkpoint record is gone: gc stops, deletes nothing.
    client
        .delete(&layout::checkpoint_key(&a.id.to_hex()))
        .unwrap();
    let before = all_keys(&client);
    let e = gc(
        &MemStore::default(),
        &remote,
        GcRequest {
            dry_run: false,
            grace_secs: 0,
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::Missing(_)), "{e}");
    assert_eq!(all_keys(&client), before);
    assert!(
        client
            .get(layout::GC_LOCK, layout::Body::Gc)
            .unwrap()
            .is_none(),
        "released on error"
    );
}

#[test]
fn one_gc_at_a_time_and_a_stale_lock_is_taken_over() {
    let client = Client::memory("origin");
    let t = crate::clock::unix_secs();
    let held = lock::acquire(&client, true, t).unwrap();
    let e = lock::acquire(&client, true, t).err().unwrap();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    assert!(e.to_string().contains("pid"), "{e}");
    let (remote, _d) = remote_over(client.clone());
    let e = gc(&MemStore::default(), &remote, GcRequest::default()).unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    // Past its expiry another gc takes it over; the first one's release then
    // leaves the new owner's lock in place.
    let later = t + lock::LOCK_TTL_SECS + 1;
    let second = lock::acquire(&client, true, later).unwrap();
    drop(held);
    let now = crate::remote::refval::GcLock::decode(
        &client
            .get(layout::GC_LOCK, layout::Body::Gc)
            .unwrap()
            .unwrap()
            .bytes,
    )
    .unwrap();
    assert_eq!(now.owner, second.lock.owner);
    drop(second);
    assert!(
        client
            .get(layout::GC_LOCK, layout::Body::Gc)
            .unwrap()
            .is_none()
    );
    lock::acquire(&client, true, later).unwrap();
}
