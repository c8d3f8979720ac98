//! `store trim` against `Client::memory` and a real `PackStore`: it drops only
//! local copies a verified remote pack holds and no kept session reaches, the
//! space comes back, the data reads back lazily, and the keep rules
//! (mounted, `--keep-sessions`, `--older-than`) and `--dry-run` hold.

use super::*;
use crate::id::ChunkId;
use crate::remote::held::tests::{Fixture, Objects, fixture, session, tree, upload};
use crate::store::ObjectStore;

/// Mounted sessions (name, live node ids).
struct Mounted(Vec<(String, Vec<NodeId>)>);

impl Live for Mounted {
    fn barrier(&self) {}
    fn live_ids(&self) -> Vec<(String, Vec<NodeId>, Vec<ChunkId>)> {
        self.0
            .iter()
            .map(|(n, ids)| (n.clone(), ids.clone(), vec![]))
            .collect()
    }
}

fn run(f: &Fixture, live: &dyn Live, req: TrimRequest) -> TrimReport {
    trim(
        &*f.store,
        live,
        &req,
        crate::clock::unix_secs(),
        &mut |_, _, _| {},
    )
    .unwrap()
}

fn local(f: &Fixture, objs: &Objects) -> usize {
    objs.iter()
        .filter(|o| f.store.contains(&o.1).unwrap())
        .count()
}

/// Sessions `a` (its objects on the remote) and `b` (on no remote).
fn two_sessions(f: &Fixture) -> (NodeId, Objects, NodeId, Objects) {
    let (ra, a) = tree(&*f.store, 20, 1);
    let (rb, b) = tree(&*f.store, 3, 2);
    session(&*f.store, "a", ra);
    session(&*f.store, "b", rb);
    f.store.commit(vec![]).unwrap();
    upload(f, &a);
    (ra, a, rb, b)
}

#[test]
fn trim_drops_verified_remote_copies_and_they_read_back_lazily() {
    let f = fixture();
    let (_, a, _, b) = two_sessions(&f);
    // A dry run changes nothing.
    let dry = run(
        &f,
        &gc::Offline,
        TrimRequest {
            dry_run: true,
            ..Default::default()
        },
    );
    assert_eq!(dry.objects, a.len() as u64, "{dry:?}");
    assert_eq!(local(&f, &a), a.len());
    let rep = run(&f, &gc::Offline, TrimRequest::default());
    assert_eq!(rep.objects, a.len() as u64, "{rep:?}");
    assert_eq!(rep.remote_verified, a.len() as u64);
    assert_eq!(rep.not_on_remote, b.len() as u64);
    assert_eq!(rep.packs_checked, 1);
    assert!(rep.store_after < rep.store_before / 2, "{rep:?}");
    // Only what the remote holds went; b (on no remote) is whole.
    assert_eq!(local(&f, &a), 0);
    assert_eq!(local(&f, &b), b.len());
    // gc and fsck are fine with it; every object reads back (lazily, verified).
    let held = crate::remote::held::Held::of(&*f.store).unwrap();
    let boundary = crate::remote::held::boundary(&held);
    crate::gc::gc(&*f.store, &gc::Offline, boundary, false, &mut |_, _, _| {}).unwrap();
    let chk = crate::fsck::fsck(&*f.store, boundary, false, &mut |_, _, _| {}).unwrap();
    assert!(chk.clean() && chk.remote_held == 1, "{chk:?}");
    for (k, id, raw) in &a {
        assert_eq!(&**f.store.get(*k, id).unwrap(), raw);
    }
}

#[test]
fn mounted_and_kept_sessions_stay_local() {
    let f = fixture();
    let (ra, a, _, _) = two_sessions(&f);
    // Mounted: its tree stays.
    let live = Mounted(vec![("a".into(), vec![ra])]);
    let rep = run(&f, &live, TrimRequest::default());
    assert_eq!(rep.objects, 0, "{rep:?}");
    assert_eq!(rep.sessions_kept, vec!["a".to_string()]);
    // --keep-sessions: every session's workspace stays.
    let rep = run(
        &f,
        &gc::Offline,
        TrimRequest {
            keep_sessions: true,
            ..Default::default()
        },
    );
    assert_eq!(rep.objects, 0, "{rep:?}");
    // --older-than: a session accessed within D stays, an older one goes.
    let rep = run(
        &f,
        &gc::Offline,
        TrimRequest {
            older_than: Some(3600),
            ..Default::default()
        },
    );
    assert_eq!(rep.objects, 0, "{rep:?}");
    let mut rec = crate::session::load_record(&*f.store, "a")
        .unwrap()
        .unwrap();
    rec.updated = 0;
    rec.created = 0;
    f.store
        .commit(vec![crate::session::record_op(&rec)])
        .unwrap();
    let rep = run(
        &f,
        &gc::Offline,
        TrimRequest {
            older_than: Some(3600),
            ..Default::default()
        },
    );
    assert_eq!(rep.objects, a.len() as u64, "{rep:?}");
}

#[test]
fn objects_in_a_pack_missing_from_the_remote_are_kept() {
    let f = fixture();
    let (_, a, _, _) = two_sessions(&f);
    let pack = crate::remote::open(&*f.store, "origin")
        .unwrap()
        .index
        .packs()[0]
        .hash;
    f.client.delete(&layout::pack_key(&pack)).unwrap();
    let rep = run(&f, &gc::Offline, TrimRequest::default());
    assert_eq!((rep.objects, rep.packs_failed), (0, 1), "{rep:?}");
    assert_eq!(local(&f, &a), a.len());
}
