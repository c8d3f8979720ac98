//! Push against `object_store`'s in-memory backend (conditional writes work
//! there): what is sent, O(changes), the fast-forward rules, a CAS race.

use std::sync::Arc;

use super::*;
use crate::host::Unserved;
use crate::id::NodeId;
use crate::oplog::{Actor, NewOp, View};
use crate::refs::{Checkpoint, RefRecord};
use crate::remote::client::Client;
use crate::remote::config::RemoteConfig;
use crate::remote::index::RemoteIndex;
use crate::store::{MemStore, ObjectStore};
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

/// A root with one flat directory of files, each one chunk of `content(i)`.
fn tree(store: &dyn ObjectStore, n: usize, content: &dyn Fn(usize) -> Vec<u8>) -> NodeId {
    let mut entries = Vec::new();
    for i in 0..n {
        let data = content(i);
        let c = store.put(ObjKind::Chunk, &data).unwrap();
        let f = FileNode::Blocks {
            size: data.len() as u64,
            blocks: vec![(0, c.chunk())],
        };
        let fid = store.put(ObjKind::Node, &f.encode()).unwrap();
        let name = format!("f{i:04}").into_bytes();
        let r = record(Kind::File, 10 + i as u64, Content::Node(fid.node()));
        entries.push((name, Entry::Inline(r)));
    }
    let dir = DirNode { entries };
    let did = store.put(ObjKind::Node, &dir.encode()).unwrap();
    let root = RootNode {
        root: record(Kind::Dir, 1, Content::Node(did.node())),
        links: vec![],
        next_ino: 100 + n as u64,
    };
    store.put(ObjKind::Node, &root.encode()).unwrap().node()
}

fn file(i: usize, generation: u8) -> Vec<u8> {
    format!("file {i} generation {generation} ")
        .repeat(40)
        .into_bytes()
}

/// A store with branch `main` at a checkpoint of `n` files (generation `gen`),
/// on top of `parent`.
fn commit(store: &MemStore, n: usize, generation: u8, parent: Option<&Checkpoint>) -> Checkpoint {
    let root = tree(store, n, &|i| file(i, if i == 0 { generation } else { 0 }));
    let c = Checkpoint::new("s", root, parent.map(|p| p.id), "m", "manual", 0);
    let r = RefRecord {
        checkpoint: c.id,
        created: 0,
    };
    store
        .commit(vec![c.op(), crate::refs::ref_op("main", &r)])
        .unwrap();
    c
}

fn remote_over(client: Client) -> (Remote, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config =
        RemoteConfig::new("origin", "s3://bkt", "http://127.0.0.1:1", None, false).unwrap();
    config.conditional_writes = true;
    let index = Arc::new(RemoteIndex::load(dir.path()).unwrap());
    (
        Remote {
            config,
            client,
            index,
        },
        dir,
    )
}

fn run(store: &dyn ObjectStore, remote: &Remote, refs: &[&str], force: bool) -> Result<PushReport> {
    let req = PushRequest {
        refs: refs.iter().map(|s| s.to_string()).collect(),
        session: None,
        force,
    };
    push_env(store, &Unserved, remote, &req, &mut |_| {})
}

#[test]
fn second_push_sends_nothing_and_one_changed_file_sends_its_path_only() {
    let store = MemStore::default();
    let (remote, _d) = remote_over(Client::memory("origin"));
    let c1 = commit(&store, 20, 1, None);
    let r = run(&store, &remote, &["main"], false).unwrap();
    // 20 chunks + 20 file nodes + the directory + the root.
    assert_eq!(r.objects, 42);
    assert_eq!(r.checkpoints, 1);
    assert_eq!(r.refs[0].status, "created");
    assert_eq!(r.refs[0].new.as_deref(), Some(c1.id.to_hex().as_str()));
    let again = run(&store, &remote, &["main"], false).unwrap();
    assert_eq!((again.objects, again.checkpoints), (0, 0));
    assert_eq!(again.refs[0].status, "up-to-date");
    let c2 = commit(&store, 20, 2, Some(&c1));
    let small = run(&store, &remote, &["main"], false).unwrap();
    // The changed file's chunk and node, the directory, the root.
    assert_eq!((small.objects, small.checkpoints), (4, 1));
    assert_eq!(small.refs[0].status, "updated");
    assert_eq!(small.refs[0].old.as_deref(), Some(c1.id.to_hex().as_str()));
    assert_eq!(small.refs[0].new.as_deref(), Some(c2.id.to_hex().as_str()));
    // The remote ref and the tracking ref name c2.
    let got = refs::read(&remote.client, TrackKind::Branch, "main")
        .unwrap()
        .unwrap();
    assert_eq!(
        got.checkpoint(TrackKind::Branch).as_deref(),
        Some(c2.id.to_hex().as_str())
    );
    let t = tracking::get(&store, "origin", TrackKind::Branch, "main")
        .unwrap()
        .unwrap();
    assert_eq!(t.checkpoint.as_deref(), Some(c2.id.to_hex().as_str()));
    assert_eq!(t.etag, got.etag);
}

#[test]
fn a_fresh_index_learns_what_the_remote_has_so_a_rerun_sends_only_what_is_missing() {
    let store = MemStore::default();
    let client = Client::memory("origin");
    let (remote, _d) = remote_over(client.clone());
    let c1 = commit(&store, 10, 1, None);
    run(&store, &remote, &["main"], false).unwrap();
    // The ref write was lost (a push killed just before it): a new process, with
    // an empty cache, sends no object again, only the ref.
    client
        .delete(&crate::remote::layout::branch_ref_key("main"))
        .unwrap();
    let (fresh, _d2) = remote_over(client);
    let r = run(&store, &fresh, &["main"], false).unwrap();
    assert_eq!((r.objects, r.checkpoints), (0, 0));
    assert_eq!(r.refs[0].status, "created");
    assert_eq!(r.refs[0].new.as_deref(), Some(c1.id.to_hex().as_str()));
}

#[test]
fn src_dst_and_checkpoint_expressions_go_to_a_named_branch() {
    let store = MemStore::default();
    let (remote, _d) = remote_over(Client::memory("origin"));
    let c1 = commit(&store, 3, 1, None);
    let _c2 = commit(&store, 3, 2, Some(&c1));
    let r = run(
        &store,
        &remote,
        &[
            "main:team/stable",
            &format!("{}:old", &c1.id.to_hex()[..12]),
        ],
        false,
    )
    .unwrap();
    assert_eq!(r.refs.len(), 2);
    assert_eq!(r.refs[0].dst, "team/stable");
    let old = refs::read(&remote.client, TrackKind::Branch, "old")
        .unwrap()
        .unwrap();
    assert_eq!(
        old.checkpoint(TrackKind::Branch).as_deref(),
        Some(c1.id.to_hex().as_str())
    );
    let e = run(&store, &remote, &["no-such-thing"], false).unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
}

#[test]
fn a_diverged_branch_is_refused_unless_forced() {
    let client = Client::memory("origin");
    let a = MemStore::default();
    let b = MemStore::default();
    let (ra, _d1) = remote_over(client.clone());
    let (rb, _d2) = remote_over(client.clone());
    commit(&a, 5, 1, None);
    run(&a, &ra, &["main"], false).unwrap();
    let cb = commit(&b, 5, 9, None);
    let e = run(&b, &rb, &["main"], false).unwrap_err();
    assert!(matches!(e, Error::NonFastForward(_)), "{e}");
    assert!(e.to_string().contains("origin/main"), "{e}");
    let r = run(&b, &rb, &["main"], true).unwrap();
    assert_eq!(r.refs[0].status, "forced");
    let got = refs::read(&client, TrackKind::Branch, "main")
        .unwrap()
        .unwrap();
    assert_eq!(
        got.checkpoint(TrackKind::Branch).as_deref(),
        Some(cb.id.to_hex().as_str())
    );
    // a is now behind: its push is refused (b's checkpoint is not its ancestor).
    assert!(matches!(
        run(&a, &ra, &["main"], false),
        Err(Error::NonFastForward(_))
    ));
}

#[test]
fn two_stores_pushing_one_branch_at_once_exactly_one_wins() {
    for round in 0..8 {
        let client = Client::memory("origin");
        let a = MemStore::default();
        let b = MemStore::default();
        let (ra, _d1) = remote_over(client.clone());
        let (rb, _d2) = remote_over(client.clone());
        commit(&a, 30, 1, None);
        commit(&b, 30, 2, None);
        let barrier = std::sync::Barrier::new(2);
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| {
                barrier.wait();
                run(&a, &ra, &["main"], false)
            });
            let y = s.spawn(|| {
                barrier.wait();
                run(&b, &rb, &["main"], false)
            });
            (x.join().unwrap(), y.join().unwrap())
        });
        let wins = [&x, &y].iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "round {round}: {x:?} / {y:?}");
        let lost = if x.is_ok() { y } else { x };
        assert!(
            matches!(lost, Err(Error::NonFastForward(_))),
            "round {round}"
        );
    }
}

/// Session `s` at `root` with `n` operations (each naming a new checkpoint).
fn session_with_ops(store: &MemStore, root: NodeId, n: usize, from: usize) -> Option<Checkpoint> {
    if from == 0 {
        crate::session::create_record(store, "s", root, 0, 0).unwrap();
    }
    let mut last = None;
    for i in from..from + n {
        let c = Checkpoint::new("s", root, None, &format!("op {i}"), "manual", 0);
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
        last = Some(c);
    }
    last
}

#[test]
fn a_session_push_appends_one_segment_of_what_is_new() {
    let store = MemStore::default();
    let (remote, _d) = remote_over(Client::memory("origin"));
    let root = tree(&store, 4, &|i| file(i, 0));
    session_with_ops(&store, root, 3, 0);
    let r = run(&store, &remote, &["s"], false).unwrap();
    assert_eq!(r.refs[0].kind, "session");
    assert_eq!(r.refs[0].status, "created");
    // The checkpoints the op log names went too.
    assert_eq!(r.checkpoints, 3);
    let v = refs::read(&remote.client, TrackKind::Session, "s")
        .unwrap()
        .unwrap();
    assert_eq!(v.json["op_seq"], 3);
    assert_eq!(session::logs_of(&v.json).unwrap().len(), 1);
    // The first push recorded the upstream.
    let rec = crate::session::load_record(&store, "s").unwrap().unwrap();
    assert_eq!(upstream(&rec), Some(("origin".into(), "s".into())));
    assert_eq!(
        run(&store, &remote, &["s"], false).unwrap().refs[0].status,
        "up-to-date"
    );
    session_with_ops(&store, root, 2, 3);
    let r = run(&store, &remote, &["s"], false).unwrap();
    assert_eq!(
        (r.refs[0].status.as_str(), r.checkpoints, r.objects),
        ("updated", 2, 0)
    );
    let v = refs::read(&remote.client, TrackKind::Session, "s")
        .unwrap()
        .unwrap();
    assert_eq!(v.json["op_seq"], 5);
    let logs = session::logs_of(&v.json).unwrap();
    assert_eq!(logs.len(), 2);
    // The new segment holds operations 4 and 5 only.
    let got = remote
        .client
        .get(
            &crate::remote::layout::log_key(&logs[1]),
            crate::remote::layout::Body::LogSegment,
        )
        .unwrap()
        .unwrap();
    let seg = crate::remote::segment::decode(&got.bytes, &logs[1]).unwrap();
    let seqs: Vec<u64> = seg
        .entries
        .iter()
        .filter_map(|e| match e {
            crate::remote::segment::SegEntry::Op { seq, .. } => Some(*seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs, [4, 5]);
    // Another store's push of the same name is not built on what it last saw.
    let other = MemStore::default();
    let (ro, _d2) = remote_over(remote.client.clone());
    let root2 = tree(&other, 1, &|i| file(i, 7));
    session_with_ops(&other, root2, 1, 0);
    assert!(matches!(
        run(&other, &ro, &["s"], false),
        Err(Error::NonFastForward(_))
    ));
}
