//! Tests of the ref-spec parser (examples, arbitrary input, round trips) and of
//! resolution against a store and a context.

use proptest::prelude::*;

use super::*;
use crate::id::NodeId;
use crate::refs::{RefRecord, ref_op, validate_ref_name};
use crate::store::MemStore;

fn spec(base: Base, suffixes: &[Suffix]) -> RefSpec {
    RefSpec {
        base,
        suffixes: suffixes.to_vec(),
    }
}

#[test]
fn parses_examples() {
    use Suffix::*;
    let name = |s: &str| Base::Name(s.into());
    let cases: Vec<(&str, RefSpec)> = vec![
        ("HEAD", spec(Base::Head, &[])),
        ("@", spec(Base::Head, &[])),
        ("@~", spec(Base::Head, &[Ancestor(1)])),
        ("HEAD~2", spec(Base::Head, &[Ancestor(2)])),
        ("HEAD~", spec(Base::Head, &[Ancestor(1)])),
        ("main^", spec(name("main"), &[Parent(1)])),
        (
            "main^2~3^0",
            spec(name("main"), &[Parent(2), Ancestor(3), Parent(0)]),
        ),
        (
            "main~~^^",
            spec(
                name("main"),
                &[Ancestor(1), Ancestor(1), Parent(1), Parent(1)],
            ),
        ),
        ("@{-1}", spec(Base::Previous(1), &[])),
        ("@{-12}~1", spec(Base::Previous(12), &[Ancestor(1)])),
        ("exec@7", spec(Base::Exec(7), &[])),
        ("exec@7~", spec(Base::Exec(7), &[Ancestor(1)])),
        ("tool@7", spec(Base::Exec(7), &[])),
        ("exec@", spec(name("exec@"), &[])),
        ("exec@x", spec(name("exec@x"), &[])),
        ("abcd~1", spec(name("abcd"), &[Ancestor(1)])),
        ("feat/x.y", spec(name("feat/x.y"), &[])),
        ("HEAD~007", spec(Base::Head, &[Ancestor(7)])),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text).unwrap(), want, "{text}");
    }
}

#[test]
fn refuses_malformed() {
    for bad in [
        "",
        "~1",
        "^",
        "HEAD~1x",
        "HEAD~-1",
        "HEAD^a",
        "HEAD~99999999999999999999999",
        "@{-0}",
        "@{1}",
        "@{-}",
        "@{-1",
        "@{-x}",
        "main@{2}",
        "HEAD~1é",
        &"a".repeat(MAX_SPEC + 1),
    ] {
        let e = parse(bad).unwrap_err();
        assert!(matches!(e, Error::Invalid(_)), "{bad:?}: {e}");
    }
}

#[test]
fn branch_names_cannot_shadow_spec_bases() {
    for bad in ["@", "a@{b", "@{-1}", "exec@1", "exec@0042", "tool@3"] {
        assert!(validate_ref_name(bad).is_err(), "{bad:?}");
    }
    for ok in ["exec@", "exec@x", "a@b", "exec@1x", "@a"] {
        validate_ref_name(ok).unwrap();
    }
}

/// A valid branch name that parses as a name (not HEAD, @, exec@N).
fn name_strategy() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_.@-]{0,12}(/[a-z][a-z0-9_-]{0,8}){0,2}"
        .prop_filter("a valid branch name", |s| validate_ref_name(s).is_ok())
}

fn base_strategy() -> impl Strategy<Value = Base> {
    prop_oneof![
        Just(Base::Head),
        (1u64..).prop_map(Base::Previous),
        any::<u64>().prop_map(Base::Exec),
        name_strategy().prop_map(Base::Name),
        "[0-9a-f]{4,64}".prop_map(Base::Name),
    ]
}

fn suffix_strategy() -> impl Strategy<Value = Suffix> {
    prop_oneof![
        any::<u64>().prop_map(Suffix::Ancestor),
        any::<u64>().prop_map(Suffix::Parent),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Arbitrary strings (and strings made of the grammar's own characters) never
    /// panic the parser; what parses prints back to a spec that parses the same.
    #[test]
    fn arbitrary_strings_never_panic(s in "\\PC{0,40}", t in "[HEAD@{}~^0-9a-z-]{0,24}") {
        for x in [&s, &t] {
            if let Ok(p) = parse(x) {
                prop_assert_eq!(parse(&p.to_string()).unwrap(), p);
            }
        }
    }

    /// Generated specs round-trip through their canonical text.
    #[test]
    fn generated_specs_round_trip(
        base in base_strategy(),
        suffixes in proptest::collection::vec(suffix_strategy(), 0..8),
    ) {
        let s = RefSpec { base, suffixes };
        prop_assert_eq!(parse(&s.to_string()).unwrap(), s);
    }
}

/// A store with a merge: c1 <- c2 <- c3, and m with parents (c3, other).
struct Fixture {
    store: MemStore,
    c: Vec<Checkpoint>,
    other: Checkpoint,
    m: Checkpoint,
}

fn fixture() -> Fixture {
    let store = MemStore::default();
    let r = NodeId::of(b"r");
    let mut c: Vec<Checkpoint> = Vec::new();
    for i in 0..3 {
        let parent = c.last().map(|c| c.id);
        c.push(Checkpoint::new(
            "s",
            r,
            parent,
            &format!("c{i}"),
            "manual",
            1,
        ));
    }
    let other = Checkpoint::new("t", r, None, "other", "manual", 1);
    let m = crate::refs::NewCheckpoint {
        session: "s",
        root: r,
        parents: vec![c[2].id, other.id],
        message: "merge",
        trigger: "manual",
        files_changed: 0,
        meta: Default::default(),
    }
    .build();
    let rec = |c: &Checkpoint| RefRecord {
        checkpoint: c.id,
        created: 0,
    };
    let mut ops: Vec<_> = c.iter().map(Checkpoint::op).collect();
    ops.extend([
        other.op(),
        m.op(),
        ref_op("main", &rec(&m)),
        ref_op("abcd", &rec(&c[0])),
    ]);
    store.commit(ops).unwrap();
    Fixture { store, c, other, m }
}

/// A session context with a checkout history and exec records.
struct Cx {
    head: Option<CheckpointId>,
    previous: Vec<CheckpointId>,
    execs: Vec<CheckpointId>,
}

impl RefContext for Cx {
    fn head(&self) -> Option<CheckpointId> {
        self.head
    }
    fn previous_checkout(&self, n: u64) -> Result<CheckpointId> {
        self.previous
            .get(n as usize - 1)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("no checkout @{{-{n}}}")))
    }
    fn exec_state(&self, n: u64) -> Result<CheckpointId> {
        self.execs
            .get(n as usize)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("no exec {n}")))
    }
}

#[test]
fn resolves_in_context() {
    let f = fixture();
    let cx = Cx {
        head: Some(f.m.id),
        previous: vec![f.c[1].id],
        execs: vec![f.c[0].id, f.c[2].id],
    };
    let id = |s: &str| resolve_in(&f.store, &cx, s).map(|c| c.id);
    assert_eq!(id("HEAD").unwrap(), f.m.id);
    assert_eq!(id("@").unwrap(), f.m.id);
    assert_eq!(id("@~").unwrap(), f.c[2].id);
    assert_eq!(id("HEAD~2").unwrap(), f.c[1].id);
    assert_eq!(id("main^").unwrap(), f.c[2].id);
    assert_eq!(id("main^2").unwrap(), f.other.id);
    assert_eq!(id("main^0").unwrap(), f.m.id);
    assert_eq!(id("main^^~").unwrap(), f.c[0].id);
    assert_eq!(id("@{-1}").unwrap(), f.c[1].id);
    assert_eq!(id("@{-1}~1").unwrap(), f.c[0].id);
    assert_eq!(id("exec@1").unwrap(), f.c[2].id);
    assert_eq!(id("exec@1~2").unwrap(), f.c[0].id);
    // A branch wins over an id prefix of the same spelling.
    assert_eq!(id("abcd").unwrap(), f.c[0].id);
    assert_eq!(
        id(&format!("{}~1", &f.c[2].id.to_hex()[..8])).unwrap(),
        f.c[1].id
    );
    assert_eq!(
        id(&f.c[2].id.to_hex().to_ascii_uppercase()[..10]).unwrap(),
        f.c[2].id
    );
    // Errors name the problem.
    let err = |s: &str| resolve_in(&f.store, &cx, s).unwrap_err().to_string();
    assert_eq!(err("HEAD~5"), "HEAD~5: history has only 3 ancestors");
    let e = err("@~1^2");
    assert!(
        e.contains(&format!(
            "@~1^2: checkpoint {} has 1 parent",
            &f.c[2].id.to_hex()[..12]
        )),
        "{e}"
    );
    let e = err("main^3");
    assert!(e.contains("has 2 parents"), "{e}");
    let e = err(&format!("{}^", &f.c[0].id.to_hex()[..6]));
    assert!(e.contains("has no parents"), "{e}");
    let e = err("nope~1");
    assert!(
        e.contains("unknown ref \"nope~1\"") && e.contains("@{-N}"),
        "{e}"
    );
    assert!(err("@{-2}").contains("no checkout"));
    assert!(err("exec@9").contains("no exec 9"));
    // Outside a session, @{-N} and exec@N say what they need.
    for s in ["@{-1}", "exec@1~"] {
        let e = resolve(&f.store, Some(f.m.id), s).unwrap_err();
        assert!(
            matches!(e, Error::Invalid(_)) && e.to_string().contains("needs a session"),
            "{e}"
        );
    }
    let e = resolve(&f.store, None, "HEAD~1").unwrap_err();
    assert!(e.to_string().contains("HEAD is unset"), "{e}");
}

use crate::refs::resolve;

/// `REMOTE/NAME` resolves through the tracking refs of a configured remote
/// (branch first, then session HEAD); a local branch of that spelling wins; an
/// unconfigured first component falls through to the local rules.
#[test]
fn resolves_remote_tracking_refs() {
    use crate::refs::tracking::{TrackKind, Tracking};
    let f = fixture();
    let cfg =
        crate::remote::RemoteConfig::new("origin", "s3://bkt", "http://127.0.0.1:9", None, false)
            .unwrap();
    let track = |kind, id: &CheckpointId| {
        Tracking::new(kind, Some(id.to_hex()), None, serde_json::Value::Null)
    };
    f.store
        .commit(vec![
            cfg.op(),
            track(TrackKind::Branch, &f.c[1].id).op("origin", TrackKind::Branch, "main"),
            track(TrackKind::Session, &f.c[2].id).op("origin", TrackKind::Session, "s1"),
            track(TrackKind::Session, &f.c[0].id).op("origin", TrackKind::Session, "main"),
            track(TrackKind::Branch, &f.c[0].id).op("other", TrackKind::Branch, "main"),
        ])
        .unwrap();
    let id = |s: &str| resolve_in(&f.store, &HeadOnly(None), s).map(|c| c.id);
    assert_eq!(
        id("origin/main").unwrap(),
        f.c[1].id,
        "branch before session"
    );
    assert_eq!(id("origin/main~1").unwrap(), f.c[0].id);
    assert_eq!(id("origin/s1").unwrap(), f.c[2].id);
    let e = id("origin/nope").unwrap_err().to_string();
    assert!(e.contains("pull origin"), "{e}");
    // `other` is not a configured remote: local rules, so unknown.
    let e = id("other/main").unwrap_err().to_string();
    assert!(e.contains("not a branch or checkpoint id"), "{e}");
    // A local branch spelled like a remote ref wins.
    f.store
        .commit(vec![ref_op(
            "origin/s1",
            &RefRecord {
                checkpoint: f.m.id,
                created: 0,
            },
        )])
        .unwrap();
    assert_eq!(id("origin/s1").unwrap(), f.m.id);
}
