use serde_json::json;

use super::*;
use crate::store::MemStore;

fn view(head: &str) -> View {
    View {
        head: Some(crate::id::CheckpointId::of(head.as_bytes())),
        branch: Some("main".into()),
        workspace: crate::id::NodeId([0; 32]),
        branches: BTreeMap::new(),
    }
}

#[test]
fn append_numbers_from_one_and_reads_back() {
    let store = MemStore::default();
    let actor = Actor::peer("agent", 1000, 42);
    let a = append(
        &store,
        "s",
        NewOp::new(&actor, "checkpoint", json!({}), view("a"), view("b")),
        vec![],
    )
    .unwrap();
    let b = append(
        &store,
        "s",
        NewOp::new(&actor, "checkout", json!({}), view("b"), view("c")),
        vec![],
    )
    .unwrap();
    assert_eq!((a.seq, a.parent), (1, None));
    assert_eq!((b.seq, b.parent), (2, Some(1)));
    assert_eq!(get(&store, "s", 2).unwrap(), b);
    assert_eq!(last(&store, "s").unwrap().unwrap().seq, 2);
    let l = list(&store, "s", 10).unwrap();
    assert_eq!(l.iter().map(|o| o.seq).collect::<Vec<_>>(), vec![2, 1]);
    // Another session's log is separate, also one whose name extends this one's.
    assert!(list(&store, "s2", 10).unwrap().is_empty());
    assert!(matches!(get(&store, "s", 9), Err(Error::NotFound(_))));
}

#[test]
fn a_taken_slot_is_a_conflict_not_an_overwrite() {
    let store = MemStore::default();
    let actor = Actor::daemon();
    let rec = NewOp::new(&actor, "note", json!({}), view("a"), view("a")).build("s", 1);
    store.commit(rec.ops()).unwrap();
    let again = NewOp::new(&actor, "x", json!({}), view("a"), view("b")).build("s", 1);
    assert!(matches!(store.commit(again.ops()), Err(Error::Conflict(_))));
    assert_eq!(get(&store, "s", 1).unwrap().kind, "note");
    // append takes the next number instead.
    let n = append(
        &store,
        "s",
        NewOp::new(&actor, "x", json!({}), view("a"), view("b")),
        vec![],
    )
    .unwrap();
    assert_eq!(n.seq, 2);
}

#[test]
fn equal_views_are_inert_and_time_survives_json() {
    let op = NewOp::new(&Actor::daemon(), "note", json!({}), view("a"), view("a")).build("s", 3);
    assert!(op.inert);
    let back = Operation::decode("t", &serde_json::to_vec(&op).unwrap()).unwrap();
    assert_eq!(back, op);
    assert!(Operation::decode("t", b"{\"version\":9}").is_err());
}

/// A log of `n` records of session `s` (every `every`-th a `checkout`, the rest
/// notes), written in one batch (append's own lookup is not what is measured).
pub(crate) fn long_log(store: &MemStore, session: &str, n: u64, every: u64) {
    let actor = Actor::peer("agent", 65534, 1);
    let mut ops = Vec::new();
    for seq in 1..=n {
        let kind = if seq % every == 0 { "checkout" } else { "note" };
        let mut v = view("");
        v.head = crate::id::CheckpointId::from_hex(&format!("{seq:064x}"));
        ops.extend(
            NewOp::new(&actor, kind, json!({}), v.clone(), v)
                .build(session, seq)
                .ops(),
        );
    }
    store.commit(ops).unwrap();
}

/// Records decoded by this thread while `f` runs.
pub(crate) fn decoded_by<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = DECODED.with(|d| d.get());
    let r = f();
    (r, DECODED.with(|d| d.get()) - before)
}

#[test]
fn walks_decode_only_what_they_visit() {
    let store = MemStore::default();
    long_log(&store, "s", 20_000, 1000);
    long_log(&store, "s2", 10, 1000);
    // The newest five, newest first: five records decoded of 20,000.
    let mut seen = Vec::new();
    let (r, n) = decoded_by(|| {
        walk::back(&store, "s", None, usize::MAX, &mut |o| {
            seen.push(o.seq);
            Ok(seen.len() < 5)
        })
    });
    assert_eq!(r.unwrap(), walk::Walked::Stopped);
    assert_eq!(seen, vec![20_000, 19_999, 19_998, 19_997, 19_996]);
    assert_eq!(n, 5);
    // Below a sequence number, and a session whose name extends this one's is
    // not part of its log.
    let mut seen = Vec::new();
    let (r, n) = decoded_by(|| {
        walk::back(&store, "s2", Some(4), usize::MAX, &mut |o| {
            seen.push(o.seq);
            Ok(true)
        })
    });
    assert_eq!((r.unwrap(), seen, n), (walk::Walked::End, vec![3, 2, 1], 3));
    // A budget stops the walk and says so.
    let (r, n) = decoded_by(|| walk::back(&store, "s", None, 100, &mut |_| Ok(true)));
    assert_eq!((r.unwrap(), n), (walk::Walked::Exhausted, 100));
    let (r, n) = decoded_by(|| walk::back(&store, "s2", None, 10, &mut |_| Ok(true)));
    assert_eq!((r.unwrap(), n), (walk::Walked::End, 10));
    // Forward from a number.
    let mut seen = Vec::new();
    let (r, n) = decoded_by(|| {
        walk::forward(&store, "s", 19_990, usize::MAX, &mut |o| {
            seen.push(o.seq);
            Ok(seen.len() < 3)
        })
    });
    assert_eq!(r.unwrap(), walk::Walked::Stopped);
    assert_eq!((seen, n), (vec![19_990, 19_991, 19_992], 3));
    // The newest match: records up to it only.
    let (f, n) = decoded_by(|| walk::find_back(&store, "s", usize::MAX, &|o| o.kind == "checkout"));
    assert_eq!((f.unwrap().unwrap().seq, n), (20_000, 1));
    // The replay steps cover the whole log.
    let (steps, last) = walk::steps(&store, "s").unwrap();
    assert_eq!((steps.len(), last.unwrap().seq), (20_000, 20_000));
}

/// The cached stacks equal a fresh replay of the retained log after any mix of
/// operations, undos, redos, notes and trims of the old end, and a request after
/// N appends decodes O(N) records, not the log.
#[test]
fn cached_stacks_equal_a_fresh_replay() {
    use stack::Stacks;
    let store = MemStore::default();
    let actor = Actor::daemon();
    let mut cache = walk::StackCache::default();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut oldest = 1u64;
    for i in 0..600u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let fresh = |store: &MemStore| {
            let (steps, _) = walk::steps(store, "s").unwrap();
            Stacks::replay(steps)
        };
        let now = fresh(&store);
        let mut n = NewOp::new(&actor, "x", json!({}), view("a"), view("b"));
        match rng % 6 {
            0 | 1 => {}
            2 => n.undoes = now.undo_target(),
            3 => n.redoes = now.redo_target(),
            4 => n.inert = true,
            _ => {
                // Retention trims the oldest records.
                // (Never the newest: numbering goes on from it.)
                let upto = (oldest + rng % 7).min(i);
                for seq in oldest..upto {
                    store
                        .commit(vec![crate::meta::MetaOp::Delete(crate::meta::op_key(
                            "s", seq,
                        ))])
                        .unwrap();
                }
                oldest = upto;
            }
        }
        append(&store, "s", n, vec![]).unwrap();
        let (cached, n) = decoded_by(|| walk::stacks(&store, "s", &mut cache).unwrap());
        assert_eq!(cached.0, fresh(&store), "after step {i}");
        assert_eq!(cached.1.unwrap().seq, i + 1);
        if i > 0 {
            // The newest record, the one appended, the oldest retained.
            assert!(n <= 3, "step {i} decoded {n} records");
        }
    }
    // A log written again under the same name is replayed afresh.
    let other = MemStore::default();
    append(
        &other,
        "s",
        NewOp::new(&actor, "x", json!({}), view("a"), view("b")),
        vec![],
    )
    .unwrap();
    let (st, _) = walk::stacks(&other, "s", &mut cache).unwrap();
    assert_eq!(st.done, vec![1]);
}
