//! Tests of what an agent sees: lineage, grants, shares, and ref resolution through
//! a [`AgentView`] (hidden answers exactly like missing, prefixes matched against
//! visible ids only).

use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::id::NodeId;
use crate::refs::session_record::create_record;
use crate::refs::{Checkpoint, HeadOnly, RefContext, RefRecord, Visibility, ref_op};
use crate::session::{Session, empty_root};
use crate::store::MemStore;

struct Fixture {
    store: Arc<dyn ObjectStore>,
    root: NodeId,
}

fn fixture() -> Fixture {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    Fixture { store, root }
}

impl Fixture {
    fn session(&self, name: &str) -> Session {
        let rec = create_record(&*self.store, name, self.root, 0, 1).unwrap();
        Session::open(self.store.clone(), rec).unwrap()
    }

    /// A branch `name` at `c`, created in session `by` (granted to it).
    fn branch(&self, by: &str, name: &str, c: &Checkpoint) {
        let r = RefRecord {
            checkpoint: c.id,
            created: 7,
        };
        self.store
            .commit(vec![ref_op(name, &r), grant_op(by, name, 7, "created")])
            .unwrap();
    }
}

/// A context that resolves through `view` (as `ops::refctx` does on an agent socket).
struct Cx<'a> {
    head: Option<CheckpointId>,
    view: Option<AgentView<'a>>,
}

impl RefContext for Cx<'_> {
    fn head(&self) -> Option<CheckpointId> {
        self.head
    }
    fn previous_checkout(&self, n: u64) -> Result<CheckpointId> {
        HeadOnly(None).previous_checkout(n)
    }
    fn exec_state(&self, n: u64) -> Result<CheckpointId> {
        HeadOnly(None).exec_state(n)
    }
    fn visibility(&self) -> Option<&dyn Visibility> {
        self.view.as_ref().map(|v| v as &dyn Visibility)
    }
}

fn agent_cx<'a>(s: &'a Session) -> Cx<'a> {
    Cx {
        head: s.record().head,
        view: Some(AgentView::new(s)),
    }
}

/// Code and message of a failed resolution.
fn failure(store: &dyn ObjectStore, cx: &Cx<'_>, spec: &str) -> (&'static str, String) {
    let e = refs::resolve_in(store, cx, spec).expect_err(spec);
    (e.code(), e.to_string())
}

#[test]
fn agent_sees_its_lineage_and_its_branches_only() {
    let f = fixture();
    let a = f.session("a");
    let u = f.session("u");
    let ca = a.checkpoint("mine", "manual", None).unwrap();
    let cu = u.checkpoint("secret", "manual", None).unwrap();
    f.branch("u", "private", &cu);
    f.branch("a", "mine", &ca);
    let v = AgentView::new(&a);
    assert!(v.checkpoint(&ca.id).unwrap());
    assert!(!v.checkpoint(&cu.id).unwrap());
    assert!(v.branch("mine").unwrap());
    assert!(!v.branch("private").unwrap());
    assert!(
        v.with_prefix(&cu.id.to_hex()[..4], 5)
            .unwrap()
            .iter()
            .all(|id| *id != cu.id)
    );
    assert_eq!(v.branches().unwrap(), HashSet::from(["mine".to_string()]));

    // A fork the agent's session made, and what it checkpoints, are its lineage.
    let fk = f.session("fk");
    f.store.commit(vec![lineage_op("a", "fk")]).unwrap();
    let cf = fk.checkpoint("in the fork", "manual", None).unwrap();
    f.branch("fk", "fork-branch", &cf);
    assert!(v.checkpoint(&cf.id).unwrap());
    assert!(v.branch("fork-branch").unwrap());
    // The user's session does not see the agent's fork through it.
    assert!(!AgentView::new(&u).checkpoint(&cf.id).unwrap());

    // Shared by the user: exactly that branch and the history it names.
    let cu2 = u.checkpoint("secret 2", "manual", None).unwrap();
    f.branch("u", "private2", &cu2);
    assert_eq!(share(&*f.store, "private", "a").unwrap(), 7);
    assert!(v.branch("private").unwrap());
    assert!(v.checkpoint(&cu.id).unwrap());
    assert!(!v.branch("private2").unwrap());
    assert!(!v.checkpoint(&cu2.id).unwrap());

    // A branch deleted and made again under the same name is not the one granted.
    f.store
        .commit(vec![ref_op(
            "private",
            &RefRecord {
                checkpoint: cu2.id,
                created: 8,
            },
        )])
        .unwrap();
    assert!(!v.branch("private").unwrap());
    assert!(!v.checkpoint(&cu2.id).unwrap());
    assert!(matches!(
        share(&*f.store, "nope", "a"),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        share(&*f.store, "mine", "nobody"),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn hidden_names_and_ids_resolve_like_missing_ones() {
    let f = fixture();
    let a = f.session("a");
    let u = f.session("u");
    let ca = a.checkpoint("mine", "manual", None).unwrap();
    let cu = u.checkpoint("secret", "manual", None).unwrap();
    f.branch("u", "private", &cu);
    // A hidden branch named like a hex prefix does not shadow or reveal anything.
    f.branch("u", "beef", &cu);
    let cx = agent_cx(&a);
    let store = &*f.store;
    assert_eq!(refs::resolve_in(store, &cx, "HEAD").unwrap().id, ca.id);
    let (ca_hex, cu_hex) = (ca.id.to_hex(), cu.id.to_hex());
    assert_eq!(
        refs::resolve_in(store, &cx, &ca_hex[..8]).unwrap().id,
        ca.id
    );
    assert_eq!(refs::resolve_in(store, &cx, &ca_hex).unwrap().id, ca.id);

    let hidden = failure(store, &cx, "private");
    let missing = failure(store, &cx, "nosuch");
    assert_eq!(hidden.0, "not_found");
    assert_eq!(hidden, (missing.0, missing.1.replace("nosuch", "private")));

    let hidden = failure(store, &cx, &cu_hex);
    let other = "0".repeat(64).replacen('0', "f", 1);
    let missing = failure(store, &cx, &other);
    assert_eq!(hidden, (missing.0, missing.1.replace(&other, &cu_hex)));

    let p = &cu_hex[..6];
    let hidden = failure(store, &cx, p);
    let q = if ca_hex.starts_with("ffffff") {
        "eeeeee"
    } else {
        "ffffff"
    };
    let missing = failure(store, &cx, q);
    assert_eq!(hidden, (missing.0, missing.1.replace(q, p)));
    assert_eq!(failure(store, &cx, "beef").0, "not_found");

    // The user (no visibility) sees everything.
    let user = Cx {
        head: None,
        view: None,
    };
    assert_eq!(refs::resolve_in(store, &user, "private").unwrap().id, cu.id);
    assert_eq!(refs::resolve_in(store, &user, p).unwrap().id, cu.id);
}

#[test]
fn a_prefix_ambiguous_only_through_hidden_ids_resolves_to_the_visible_one() {
    let f = fixture();
    let a = f.session("a");
    let ca = a.checkpoint("mine", "manual", None).unwrap();
    let want = &ca.id.to_hex()[..4];
    // A checkpoint of another session whose id shares the agent's 4-digit prefix.
    let twin = (0u64..)
        .map(|i| Checkpoint::new("u", f.root, None, &format!("twin {i}"), "manual", 0))
        .find(|c| c.id.to_hex().starts_with(want))
        .unwrap();
    f.store.commit(vec![twin.op()]).unwrap();
    let user = Cx {
        head: None,
        view: None,
    };
    let e = refs::resolve_in(&*f.store, &user, want).unwrap_err();
    assert!(e.to_string().contains("ambiguous"), "{e}");
    let cx = agent_cx(&a);
    assert_eq!(refs::resolve_in(&*f.store, &cx, want).unwrap().id, ca.id);
}

#[test]
fn long_histories_are_walked_once_and_misses_stay_cheap() {
    let f = fixture();
    // 20,000 checkpoints of the user, the agent's session started on the newest.
    const N: usize = 20_000;
    let mut prev: Option<Checkpoint> = None;
    let mut ops = Vec::new();
    let mut first = None;
    for i in 0..N {
        let c = Checkpoint::new(
            "u",
            f.root,
            prev.as_ref().map(|c| c.id),
            &i.to_string(),
            "manual",
            0,
        );
        first.get_or_insert_with(|| c.clone());
        ops.push(c.op());
        prev = Some(c);
    }
    f.store.commit(ops).unwrap();
    let tip = prev.unwrap();
    let mut rec = crate::refs::session_record::new_record("a", f.root, 0, 1).unwrap();
    rec.head = Some(tip.id);
    f.store
        .commit(vec![crate::refs::session_record::record_op(&rec)])
        .unwrap();
    let a = Session::open(f.store.clone(), rec).unwrap();
    let hidden = Checkpoint::new("u", f.root, None, "hidden", "manual", 0);
    f.store.commit(vec![hidden.op()]).unwrap();

    let v = AgentView::new(&a);
    let t = Instant::now();
    assert!(v.checkpoint(&first.unwrap().id).unwrap());
    let walk = t.elapsed();
    let t = Instant::now();
    const MISSES: u32 = 200;
    for _ in 0..MISSES {
        assert!(!v.checkpoint(&hidden.id).unwrap());
        assert!(
            v.with_prefix(&hidden.id.to_hex()[..4], 5)
                .unwrap()
                .iter()
                .all(|id| *id != hidden.id)
        );
    }
    let miss = t.elapsed() / (2 * MISSES);
    eprintln!("visibility: first walk of {N} checkpoints {walk:?}; a miss after it {miss:?}");
    // A miss reads what the lineage owns, not the history again.
    assert!(miss * 20 < walk, "miss {miss:?} vs walk {walk:?}");
}
