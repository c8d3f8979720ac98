use serde_json::json;

use super::*;
use crate::store::MemStore;

fn view(head: &str) -> View {
    View {
        head: Some(head.into()),
        branch: Some("main".into()),
        workspace: "00".repeat(32),
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
