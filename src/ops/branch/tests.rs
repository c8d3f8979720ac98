//! `branch_rename` on the in-memory host (issue 41): the sessions attached to
//! the old name follow in the rename's one batch, live or stored; a crash after
//! any batch leaves no session attached to a name that does not exist; a live
//! follower that stays busy fails the rename with `busy` naming it; a session
//! record that does not decode fails it with `corrupt`; two renames in sessions
//! that follow each other's branches, many times over in two threads, finish.

use std::sync::Arc;

use super::{make, rename};
use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::ops::memhost::{self, MemHost};
use crate::ops::record::Call;
use crate::ops::{Host, Target};
use crate::refs;
use crate::store::{MemStore, ObjectStore};

/// A host over a store that logs its batches.
fn host() -> (Arc<MemStore>, MemHost) {
    let mem = Arc::new(MemStore::logging());
    let host = MemHost::over(mem.clone());
    (mem, host)
}

fn with_call<T>(f: impl FnOnce(&Call) -> T) -> T {
    let actor = crate::oplog::Actor::peer("user", 0, 1);
    let call = Call {
        actor: &actor,
        explanation: None,
        request: serde_json::json!({"op": "branch_rename"}),
    };
    f(&call)
}

/// A live session `name` with a pending file, attached to a branch `branch` of
/// its own (`checkout -b`).
fn attached(host: &MemHost, name: &str, branch: &str) -> Target {
    let t = host.create(name).unwrap();
    memhost::write_file(&t.session, "f", name.as_bytes()).unwrap();
    with_call(|c| make(host, &t, c, branch, None, true)).unwrap();
    assert_eq!(
        t.session.record().branch.as_deref(),
        Some(&*format!("{name}:{branch}"))
    );
    t
}

fn rename_in(host: &MemHost, t: &Target, old: &str, new: &str) -> Result<super::Renamed> {
    with_call(|c| rename(host, t, c, old, new))
}

/// The branch session `name`'s stored record is attached to.
fn stored_branch(store: &dyn ObjectStore, name: &str) -> Option<String> {
    refs::session_record::load_record(store, name)
        .unwrap()
        .unwrap()
        .branch
}

/// Every session record names an existing branch if any, in `store` and after a
/// crash after each of its batches.
fn attached_names_exist(mem: &MemStore) {
    for k in 0..=mem.batches() {
        let store = mem.prefix(k).unwrap();
        for rec in refs::session_record::list_records(&store).unwrap() {
            if let Some(b) = &rec.branch {
                assert!(
                    refs::get_ref(&store, b).unwrap().is_some(),
                    "after batch {k}: session {} is attached to {b}, which does not exist",
                    rec.name
                );
            }
        }
    }
}

#[test]
fn a_live_follower_moves_in_the_renames_one_batch() {
    let (mem, host) = host();
    let a = host.create("a").unwrap();
    let b = attached(&host, "b", "x");
    let before = mem.batches();
    let done = rename_in(&host, &a, "b/x", "y").unwrap();
    assert_eq!(mem.batches(), before + 1, "one batch");
    let keys = mem.batch_keys(before);
    assert!(
        keys.iter().any(|k| k == "put s/b"),
        "b's record in it: {keys:?}"
    );
    assert!(
        keys.iter().any(|k| k == "put s/a"),
        "a's record in it: {keys:?}"
    );
    assert_eq!(
        b.session.record().branch.as_deref(),
        Some("b:y"),
        "in memory"
    );
    assert_eq!(
        stored_branch(&*host.store(), "b").as_deref(),
        Some("b:y"),
        "stored"
    );
    assert!(refs::get_ref(&*host.store(), "b:x").unwrap().is_none());
    assert_eq!(
        done.op,
        crate::oplog::last(&*host.store(), "a")
            .unwrap()
            .unwrap()
            .seq
    );
    // The follower's next commit keeps the new name.
    memhost::write_file(&b.session, "g", b"more").unwrap();
    b.session.flush().unwrap();
    assert_eq!(stored_branch(&*host.store(), "b").as_deref(), Some("b:y"));
    attached_names_exist(&mem);
}

#[test]
fn the_renaming_session_and_a_stored_follower_move_in_the_same_batch() {
    let (mem, host) = host();
    let a = attached(&host, "a", "x");
    let b = attached(&host, "b", "x");
    host.unmount_session(&b.mountpoint).unwrap();
    drop(b);
    // a's own branch: a follows; b is attached to its own b:x, not a:x.
    let before = mem.batches();
    rename_in(&host, &a, "x", "z").unwrap();
    assert_eq!(mem.batches(), before + 1);
    assert_eq!(a.session.record().branch.as_deref(), Some("a:z"));
    assert_eq!(stored_branch(&*host.store(), "b").as_deref(), Some("b:x"));
    // b's branch, b stored: it follows in the batch.
    let before = mem.batches();
    rename_in(&host, &a, "b/x", "w").unwrap();
    assert_eq!(mem.batches(), before + 1);
    assert_eq!(stored_branch(&*host.store(), "b").as_deref(), Some("b:w"));
    attached_names_exist(&mem);
    // b being mounted or unmounted (its name owned, not live): it is not
    // rewritten under its mount's feet; the rename is busy, then goes through.
    let owned = host.claim("b").unwrap();
    let before = mem.batches();
    match rename_in(&host, &a, "b/w", "v") {
        Err(Error::Busy(m)) => assert!(m.contains("session b"), "{m}"),
        other => panic!("rename with a stored follower's name owned: {other:?}"),
    }
    assert_eq!(mem.batches(), before, "nothing committed");
    drop(owned);
    rename_in(&host, &a, "b/w", "v").unwrap();
    assert_eq!(stored_branch(&*host.store(), "b").as_deref(), Some("b:v"));
}

#[test]
fn a_follower_that_stays_busy_fails_the_rename_naming_it() {
    let (mem, host) = host();
    let a = host.create("a").unwrap();
    let b = attached(&host, "b", "x");
    let held = b.session.txn();
    let before = mem.batches();
    match rename_in(&host, &a, "b/x", "y") {
        Err(Error::Busy(m)) => assert!(m.contains("session b"), "{m}"),
        other => panic!("rename with its follower held: {other:?}"),
    }
    drop(held);
    assert_eq!(mem.batches(), before, "nothing committed");
    assert_eq!(b.session.record().branch.as_deref(), Some("b:x"));
    // Once free, it follows.
    rename_in(&host, &a, "b/x", "y").unwrap();
    assert_eq!(b.session.record().branch.as_deref(), Some("b:y"));
}

/// Before, a session record that did not decode was passed over with a
/// warning (and, attached to the old name, left on it).
#[test]
fn a_session_record_that_does_not_decode_fails_the_rename() {
    let (mem, host) = host();
    let a = attached(&host, "a", "x");
    host.store()
        .commit(vec![MetaOp::Put(
            meta::session_key("zz"),
            b"{not json".to_vec(),
        )])
        .unwrap();
    let before = mem.batches();
    match rename_in(&host, &a, "x", "y") {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("session record zz"), "{what}"),
        other => panic!("rename over a damaged record: {other:?}"),
    }
    assert_eq!(mem.batches(), before, "nothing committed");
    assert!(refs::get_ref(&*host.store(), "a:x").unwrap().is_some());
    assert_eq!(a.session.record().branch.as_deref(), Some("a:x"));
}

/// Two sessions each renaming the branch the other has checked out, back and
/// forth, in two threads (each rename takes its own flush lock, then the
/// other's): no deadlock, and every record consistent at the end and after a
/// crash after any batch.
#[test]
fn renames_of_each_others_branches_in_two_threads_finish() {
    const ROUNDS: usize = 40;
    let (mem, host) = host();
    let a = attached(&host, "a", "x");
    let b = attached(&host, "b", "y");
    let run = |me: &Target, other: &str, names: [&str; 2]| {
        let mut done = 0;
        for i in 0..ROUNDS {
            let (from, to) = (names[i % 2], names[(i + 1) % 2]);
            let old = format!("{other}/{from}");
            // A busy answer changed nothing: ask again.
            let mut tries = 0;
            loop {
                memhost::write_file(&me.session, "f", format!("{i}").as_bytes()).unwrap();
                match rename_in(&host, me, &old, to) {
                    Ok(_) => break,
                    Err(Error::Busy(m)) if tries < 20 => {
                        tries += 1;
                        eprintln!("busy: {m}");
                    }
                    Err(e) => panic!("rename {old} -> {to}: {e}"),
                }
            }
            done += 1;
        }
        done
    };
    let (run, ra, rb) = (&run, &a, &b);
    let (done_a, done_b) = std::thread::scope(|sc| {
        let ta = sc.spawn(move || run(ra, "b", ["y", "y2"]));
        let tb = sc.spawn(move || run(rb, "a", ["x", "x2"]));
        (ta.join().unwrap(), tb.join().unwrap())
    });
    assert_eq!((done_a, done_b), (ROUNDS, ROUNDS));
    let store = host.store();
    for (t, want) in [(&a, "a:x"), (&b, "b:y")] {
        let name = t.session.name();
        assert_eq!(
            t.session.record().branch.as_deref(),
            Some(want),
            "{name} in memory"
        );
        assert_eq!(
            stored_branch(&*store, name).as_deref(),
            Some(want),
            "{name} stored"
        );
    }
    let renames = |s: &str| {
        crate::oplog::list(&*store, s, usize::MAX)
            .unwrap()
            .iter()
            .filter(|o| o.kind == "branch-rename")
            .count()
    };
    assert_eq!((renames("a"), renames("b")), (ROUNDS, ROUNDS));
    attached_names_exist(&mem);
}
