//! Tests of checkpoint and ref records: old-record decoding, ids, resolving by
//! bounded id-prefix range, parents in gc roots.

use super::*;
use crate::store::{MemStore, MetaStore};

#[test]
fn names() {
    for ok in [
        "main",
        "auto/before-checkout-1",
        "feat.x",
        "a_b-c",
        "baseline-2",
    ] {
        validate_ref_name(ok).unwrap();
    }
    for bad in [
        "",
        "a/../b",
        "..",
        "a//b",
        "/a",
        "a/",
        "x y",
        "a\u{7}",
        "HEAD",
        "baseline",
        ".hidden",
        "-x",
        "a~1",
        &"f".repeat(64),
    ] {
        assert!(validate_ref_name(bad).is_err(), "{bad:?}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    /// Stored checkpoint and ref records: arbitrary or mutated bytes never panic,
    /// and valid records round-trip.
    #[test]
    fn record_decoders_never_panic(
        msg in ".{0,40}",
        parent in proptest::prelude::any::<bool>(),
        flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 0u8..8), 0..4),
        cut in proptest::prelude::any::<usize>(),
        junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
    ) {
        let p = Checkpoint::new("s", NodeId::of(b"p"), None, "p", "manual", 0);
        let mut meta = Map::new();
        meta.insert("m".into(), Value::String(msg.clone()));
        let c = NewCheckpoint {
            session: "s",
            root: NodeId::of(msg.as_bytes()),
            parents: if parent { vec![p.id, p.id] } else { vec![] },
            message: &msg,
            trigger: "auto",
            files_changed: 3,
            meta,
        }
        .build();
        let bytes = serde_json::to_vec(&c).unwrap();
        proptest::prop_assert_eq!(&Checkpoint::decode("x", &bytes).unwrap(), &c);
        let mut m = bytes.clone();
        for (at, bit) in &flips {
            let i = at % m.len();
            m[i] ^= 1 << bit;
        }
        m.truncate(cut % (m.len() + 1));
        if let Ok(d) = Checkpoint::decode("x", &m) {
            let _ = (d.id, d.root, d.op());
        }
        let _ = Checkpoint::decode("x", &junk);
        let r = RefRecord { checkpoint: c.id, created: 7 };
        let rb = serde_json::to_vec(&r).unwrap();
        proptest::prop_assert_eq!(RefRecord::decode("b", &rb).unwrap(), r);
        let _ = RefRecord::decode("b", &m);
        let _ = RefRecord::decode("b", &junk);
    }
}

/// A record as the version-1 code wrote it (`parent`, id over the v1 identity).
fn v1_record(parent: Option<CheckpointId>, time_ns: i128) -> (CheckpointId, Vec<u8>) {
    let root = NodeId::of(b"r").to_hex();
    let ident = serde_json::json!({
        "session": "s", "root": root, "parent": parent,
        "time_ns": time_ns.to_string(), "message": "old", "trigger": "manual",
    });
    let id = CheckpointId::of(&serde_json::to_vec(&ident).unwrap());
    let rec = serde_json::json!({
        "version": 1, "id": id, "session": "s", "root": root, "parent": parent,
        "time_ns": time_ns, "message": "old", "trigger": "manual",
        "files_changed": 2, "meta": {},
    });
    (id, serde_json::to_vec(&rec).unwrap())
}

#[test]
fn version_1_records_upgrade_and_keep_their_id() {
    // Records exactly as 22a34dd wrote them (tests/fixtures/store-v2.tar.gz,
    // checkpoints "first" and "second" of session main).
    let first = br#"{"version":1,"id":"6ec2b90cd72bf94c65f1dbc55d6b95f1da5a2f8b0b70341d49bede450157425c","session":"main","root":"de46d5ac9ecf23b43231c3042e39e87b1de203b53abdd878f99d0e321349116a","parent":null,"time_ns":1795446060054634806,"message":"first","trigger":"manual","files_changed":9,"meta":{}}"#;
    let second = br#"{"version":1,"id":"8c1cb70eb83df170ea953f81ff334898199141ddf923ceb671b864324500a612","session":"main","root":"b40c940371ae3347ae1454b25204905d10fff344f5b769e5f40ef8bcb52841b1","parent":"6ec2b90cd72bf94c65f1dbc55d6b95f1da5a2f8b0b70341d49bede450157425c","time_ns":1795446060074678136,"message":"second","trigger":"milestone","files_changed":2,"meta":{}}"#;
    let f = Checkpoint::decode("first", first).unwrap();
    let s2 = Checkpoint::decode("second", second).unwrap();
    assert_eq!(f.version, CHECKPOINT_VERSION);
    assert!(f.parents.is_empty());
    assert_eq!(s2.parents, vec![f.id]);
    assert!(f.id_matches() && s2.id_matches(), "real v1 ids verify");

    let (p, pb) = v1_record(None, 5);
    let (id, bytes) = v1_record(Some(p), 7);
    let c = Checkpoint::decode("x", &bytes).unwrap();
    assert_eq!(c.id, id, "the stored id is kept");
    assert_eq!(c.parents, vec![p]);
    assert_eq!(c.parent(), Some(p));
    assert!(c.id_matches(), "a v1 id verifies with the v1 identity");
    assert!(Checkpoint::decode("p", &pb).unwrap().parents.is_empty());
    // Written back, it is a version-2 record under the same key and id.
    let MetaOp::Put(k, v) = c.op() else { panic!() };
    assert_eq!(k, meta::checkpoint_key(&c.id));
    let raw: Value = serde_json::from_slice(&v).unwrap();
    assert_eq!(raw["version"], 2);
    assert_eq!(raw["parents"], serde_json::json!([p]));
    assert!(raw.get("parent").is_none());
    assert_eq!(Checkpoint::decode("x", &v).unwrap(), c);
    // A v1 record that was tampered with does not verify.
    let mut t = c.clone();
    t.message = "changed".into();
    assert!(!t.id_matches());
}

#[test]
fn version_2_fork_origin_in_meta_becomes_typed_and_version_3_meta_stays_data() {
    use crate::refs::session_record::SessionRecord;
    let rec = |v: u32| {
        format!(
            r#"{{"version":{v},"name":"s-xab-1","root":"{z}","base":"{z}","created":0,"updated":0,
            "meta":{{"experiment":{{"id":"ab","source":"s","run":1,"runs":1,"base":"{z}",
            "dir":"/w","label":"1","command":"true","env":{{}}}}}}}}"#,
            z = "00".repeat(32)
        )
    };
    let old = SessionRecord::decode("s-xab-1", rec(2).as_bytes()).unwrap();
    assert_eq!(
        old.origin
            .as_ref()
            .and_then(|o| o.experiment())
            .map(|r| r.run),
        Some(1)
    );
    assert!(old.meta.is_empty());
    // Written by this version, the same meta is request data, never an origin.
    let new = SessionRecord::decode("s-xab-1", rec(3).as_bytes()).unwrap();
    assert_eq!(new.origin, None);
    assert!(new.meta.contains_key("experiment"));
}

#[test]
fn version_1_session_record_upgrades() {
    use crate::refs::session_record::{SESSION_RECORD_VERSION, SessionRecord};
    // As 22a34dd wrote it (tests/fixtures/store-v2.tar.gz, session main).
    let old = br#"{"version":1,"name":"main","root":"4c9c283a6d540dad90f51934c1b9cca63f7bebe66d1011da13ce6730bc6dee7b","base":"de46d5ac9ecf23b43231c3042e39e87b1de203b53abdd878f99d0e321349116a","created":1795446059,"updated":1795446060,"bytes":5800038,"inodes":10,"head":"6ec2b90cd72bf94c65f1dbc55d6b95f1da5a2f8b0b70341d49bede450157425c","config":{"auto_checkpoint_ops":0,"auto_checkpoint_idle_secs":0,"auto_checkpoint_min_interval_secs":30}}"#;
    let r = SessionRecord::decode("main", old).unwrap();
    assert_eq!(r.version, SESSION_RECORD_VERSION);
    assert!(r.meta.is_empty());
    assert_eq!(r.bytes, 5800038);
    let written: Value = serde_json::to_value(&r).unwrap();
    assert_eq!(written["version"], 3);
    assert!(written["meta"].is_object());
    let mut newer = written.clone();
    newer["version"] = 4.into();
    assert!(SessionRecord::decode("main", &serde_json::to_vec(&newer).unwrap()).is_err());
}

#[test]
fn version_2_records() {
    let r = NodeId::of(b"r");
    let a = Checkpoint::new("s", r, None, "a", "manual", 0);
    let b = Checkpoint::new("s", r, None, "b", "manual", 0);
    let mk = |meta: Value| {
        NewCheckpoint {
            session: "s",
            root: r,
            parents: vec![a.id, b.id],
            message: "merge",
            trigger: "experiment",
            files_changed: 1,
            meta: meta.as_object().unwrap().clone(),
        }
        .build_at(9)
    };
    let c = mk(serde_json::json!({"exec.cmd": "make", "n": 2}));
    assert_eq!(c.parent(), Some(a.id));
    assert_eq!(c.parents, vec![a.id, b.id]);
    assert!(c.id_matches());
    let bytes = serde_json::to_vec(&c).unwrap();
    assert_eq!(Checkpoint::decode("x", &bytes).unwrap(), c);
    // The meta map is part of the id.
    assert_ne!(mk(serde_json::json!({"n": 3})).id, c.id);
    // Malformed or mixed forms, and unknown versions, are refused.
    let mut raw: Value = serde_json::from_slice(&bytes).unwrap();
    raw["parent"] = a.id.to_hex().into();
    assert!(Checkpoint::decode("x", &serde_json::to_vec(&raw).unwrap()).is_err());
    let mut raw: Value = serde_json::from_slice(&bytes).unwrap();
    raw["version"] = 3.into();
    assert!(Checkpoint::decode("x", &serde_json::to_vec(&raw).unwrap()).is_err());
    let mut raw: Value = serde_json::from_slice(&bytes).unwrap();
    raw["parents"] = serde_json::json!(["zz"]);
    assert!(Checkpoint::decode("x", &serde_json::to_vec(&raw).unwrap()).is_err());
    let mut raw: Value = serde_json::from_slice(&bytes).unwrap();
    raw.as_object_mut().unwrap().remove("parents");
    assert!(Checkpoint::decode("x", &serde_json::to_vec(&raw).unwrap()).is_err());
}

#[test]
fn every_parent_is_live() {
    let s = MemStore::default();
    let r = NodeId::of(b"r");
    let a = Checkpoint::new("gone", r, None, "a", "manual", 0);
    let b = Checkpoint::new("gone", r, None, "b", "manual", 0);
    let m = NewCheckpoint {
        session: "gone",
        root: r,
        parents: vec![a.id, b.id],
        message: "merge",
        trigger: "manual",
        files_changed: 0,
        meta: Map::new(),
    }
    .build();
    let head = RefRecord {
        checkpoint: m.id,
        created: 0,
    };
    s.commit(vec![a.op(), b.op(), m.op(), ref_op("m", &head)])
        .unwrap();
    let roots = crate::reach::roots(s.meta()).unwrap();
    for c in [&a, &b, &m] {
        assert!(roots.live.contains(&c.id), "{} reclaimable", c.message);
    }
}

/// A store that refuses to list checkpoints: finding one must not need that.
struct NoCheckpointScan(MemStore);

impl ObjectStore for NoCheckpointScan {
    fn put(&self, kind: crate::store::Kind, raw: &[u8]) -> Result<crate::id::ObjectId> {
        self.0.put(kind, raw)
    }
    fn get(
        &self,
        kind: crate::store::Kind,
        id: &crate::id::ObjectId,
    ) -> Result<std::sync::Arc<Vec<u8>>> {
        self.0.get(kind, id)
    }
    fn contains(&self, id: &crate::id::ObjectId) -> Result<bool> {
        self.0.contains(id)
    }
    fn commit(&self, ops: Vec<MetaOp>) -> Result<()> {
        self.0.commit(ops)
    }
    fn meta(&self) -> &dyn MetaStore {
        self
    }
    fn space(&self) -> (u64, u64, u64) {
        self.0.space()
    }
}

impl MetaStore for NoCheckpointScan {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.0.meta_get(key)
    }
    fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        assert!(
            !meta::CHECKPOINT_PREFIX.starts_with(prefix),
            "listed every checkpoint"
        );
        self.0.meta_scan(prefix)
    }
    fn range(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        assert!(limit <= 16, "unbounded range scan");
        self.0.meta_range(range, limit)
    }
    fn range_rev(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        assert!(limit <= 16, "unbounded range scan");
        self.0.meta_range_rev(range, limit)
    }
    fn apply(&self, ops: Vec<MetaOp>) -> Result<()> {
        self.0.meta().apply(ops)
    }
}

#[test]
fn id_prefixes_resolve_by_range() {
    let s = NoCheckpointScan(MemStore::default());
    let r = NodeId::of(b"r");
    let all: Vec<Checkpoint> = (0..300)
        .map(|i| Checkpoint::new("s", r, None, &i.to_string(), "manual", 0))
        .collect();
    s.commit(all.iter().map(Checkpoint::op).collect()).unwrap();
    for c in &all {
        // The shortest accepted prefix (4) and longer ones, odd and even, any case,
        // are unique or ambiguous exactly as among all ids.
        let hex = c.id.to_hex();
        for len in [4, 5, 6, 7, 12] {
            let p = &hex[..len];
            let n = all.iter().filter(|o| o.id.to_hex().starts_with(p)).count();
            match resolve(&s, None, p) {
                Ok(found) => assert_eq!((n, &found.id), (1, &c.id), "{p}"),
                Err(e) => {
                    assert!(n > 1, "{p}: {e}");
                    assert!(e.to_string().contains("ambiguous"), "{e}");
                }
            }
            if n == 1 {
                let up = p.to_ascii_uppercase();
                assert_eq!(resolve(&s, None, &up).unwrap().id, c.id);
            }
        }
    }
    // Ambiguous at length 1..3 for sure with 300 ids; the spec needs 4 digits,
    // so check the range itself.
    let first = all[0].id.to_hex();
    let short = KeyRange::checkpoint_hex(&first[..1]).unwrap();
    let n = all
        .iter()
        .filter(|o| o.id.to_hex().starts_with(&first[..1]))
        .count();
    assert_eq!(s.0.meta_range(&short, usize::MAX).unwrap().len(), n);
    assert_eq!(s.0.meta_range(&short, 3).unwrap().len(), n.min(3));
    assert!(resolve(&s, None, "0123456").is_err());
}

#[test]
fn resolve_specs() {
    let s = MemStore::default();
    let r = NodeId::of(b"r");
    let c1 = Checkpoint::new("s", r, None, "one", "manual", 1);
    let c2 = Checkpoint::new("s", r, Some(c1.id), "two", "manual", 1);
    s.commit(vec![
        c1.op(),
        c2.op(),
        ref_op(
            "b",
            &RefRecord {
                checkpoint: c1.id,
                created: 0,
            },
        ),
    ])
    .unwrap();
    assert_eq!(resolve(&s, Some(c2.id), "HEAD").unwrap().id, c2.id);
    assert_eq!(resolve(&s, Some(c2.id), "HEAD~1").unwrap().id, c1.id);
    assert!(resolve(&s, Some(c2.id), "HEAD~2").is_err());
    assert_eq!(resolve(&s, None, "b").unwrap().id, c1.id);
    assert_eq!(resolve(&s, None, &c2.id.to_hex()[..10]).unwrap().id, c2.id);
    assert!(resolve(&s, None, "nope").is_err());
    assert!(resolve(&s, None, "HEAD").is_err());
}

#[test]
fn is_ancestor_by_walks_parents_once_each() {
    // a <- b <- c, c also has parent x; y is unrelated; z and w are each other's
    // parent (a loop a damaged store could hold: the walk must still end).
    let parents = |h: &str| -> Vec<String> {
        let p: &[&str] = match h {
            "b" => &["a"],
            "c" => &["b", "x"],
            "z" => &["w"],
            "w" => &["z"],
            _ => &[],
        };
        p.iter().map(|s| s.to_string()).collect()
    };
    let mut visits = 0;
    let mut walk = |h: &str| {
        visits += 1;
        Ok(parents(h))
    };
    assert!(is_ancestor_by("a", "c", &mut walk).unwrap());
    assert!(is_ancestor_by("c", "c", &mut walk).unwrap());
    assert!(is_ancestor_by("x", "c", &mut walk).unwrap());
    assert!(!is_ancestor_by("c", "a", &mut walk).unwrap());
    assert!(!is_ancestor_by("y", "c", &mut walk).unwrap());
    assert!(!is_ancestor_by("a", "z", &mut walk).unwrap());
    assert!(visits < 20, "{visits} visits");
    // An error reading a record is the walk's error.
    let mut failing = |_: &str| -> Result<Vec<String>> { Err(Error::Invalid("gone".into())) };
    assert!(is_ancestor_by("a", "c", &mut failing).is_err());
    assert!(is_ancestor_by("c", "c", &mut failing).unwrap());
}

/// Records exactly as the code before typed ids wrote them (serialized by main at
/// 89aa0c2's record structs, whose ids were hex `String`s): they decode into typed
/// ids and encode back byte for byte, and the checkpoint keeps its id. (Settings
/// added since, with their defaults, are in the session record's `config`.)
#[test]
fn records_written_with_hex_string_ids_read_and_write_back_unchanged() {
    use crate::messages::Message;
    use crate::oplog::Operation;
    use crate::refs::session_record::SessionRecord;
    let checkpoint = r#"{"version":2,"id":"3bfa5ef2c6e1e5d8c42dec3117f8a3dd498618718ae1e6c43b8ad80cdfc1c33e","session":"main","root":"2976e7134e1a737f42044329d39b7cdc6dee1aa0fd397f4ea5beeaa83fdf6b48","parents":["5139efda4d6b7740d29878e26c7fc1732f8685dec3880924a7ee4324c30be403","c8579cb1d9be71ee768ddfed58f84c980d455a94caae2649647fa35000db2fb1"],"time_ns":1795446060054634806,"message":"merge","trigger":"manual","files_changed":3,"meta":{},"usage":{"bytes":10,"inodes":4}}"#;
    let branch = r#"{"checkpoint":"3bfa5ef2c6e1e5d8c42dec3117f8a3dd498618718ae1e6c43b8ad80cdfc1c33e","created":1795446060}"#;
    let session = r#"{"version":3,"name":"main","root":"2976e7134e1a737f42044329d39b7cdc6dee1aa0fd397f4ea5beeaa83fdf6b48","base":"11159aa7c15931429837dc08b6a403afc6ce30598077bbbd389e860a02343083","created":1795446000,"updated":1795446060,"bytes":10,"inodes":4,"head":"3bfa5ef2c6e1e5d8c42dec3117f8a3dd498618718ae1e6c43b8ad80cdfc1c33e","branch_moved":{"branch":"main","to":"5139efda4d6b7740d29878e26c7fc1732f8685dec3880924a7ee4324c30be403","head":"3bfa5ef2c6e1e5d8c42dec3117f8a3dd498618718ae1e6c43b8ad80cdfc1c33e"},"config":{"auto_checkpoint_ops":0,"auto_checkpoint_idle_secs":0,"auto_checkpoint_min_interval_secs":30,"op_retention_days":30,"op_retention_count":10000,"experiment_max_runs":32,"auto_checkpoint_commands":0,"auto_ref_retention_days":7,"auto_ref_retention_count":100,"auto_checkpoint_on":"","forks_dir":""},"meta":{}}"#;
    let operation = r#"{"version":1,"session":"main","seq":2,"parent":1,"time_ns":"1795446060054634999","actor":{"role":"daemon"},"kind":"checkout","request":null,"before":{"head":"5139efda4d6b7740d29878e26c7fc1732f8685dec3880924a7ee4324c30be403","branch":"main","workspace":"11159aa7c15931429837dc08b6a403afc6ce30598077bbbd389e860a02343083","branches":{"gone":null,"main":"5139efda4d6b7740d29878e26c7fc1732f8685dec3880924a7ee4324c30be403"}},"after":{"head":"3bfa5ef2c6e1e5d8c42dec3117f8a3dd498618718ae1e6c43b8ad80cdfc1c33e","branch":"main","workspace":"2976e7134e1a737f42044329d39b7cdc6dee1aa0fd397f4ea5beeaa83fdf6b48","branches":{"gone":null,"main":"3bfa5ef2c6e1e5d8c42dec3117f8a3dd498618718ae1e6c43b8ad80cdfc1c33e"}}}"#;
    let message = r#"{"version":1,"id":"123e4567-e89b-12d3-a456-426614174000","seq":1,"time_ns":"1795446060054635000","role":"user","content":null,"op":2,"checkpoint":"3bfa5ef2c6e1e5d8c42dec3117f8a3dd498618718ae1e6c43b8ad80cdfc1c33e","workspace":"2976e7134e1a737f42044329d39b7cdc6dee1aa0fd397f4ea5beeaa83fdf6b48"}"#;
    // How the writer made them.
    let root = NodeId::of(b"fixture root");
    let base = NodeId::of(b"fixture base");
    // (A checkpoint made at the time the fixture was written.)
    let first =
        CheckpointId::from_hex("5139efda4d6b7740d29878e26c7fc1732f8685dec3880924a7ee4324c30be403")
            .unwrap();
    let other = CheckpointId::of(b"other parent");

    let c = Checkpoint::decode("fixture", checkpoint.as_bytes()).unwrap();
    assert_eq!((c.root, c.parents.clone()), (root, vec![first, other]));
    assert!(c.id_matches(), "the id is still the hash of the record");
    let MetaOp::Put(key, bytes) = c.op() else {
        panic!()
    };
    assert_eq!(key, meta::checkpoint_key(&c.id));
    assert_eq!(String::from_utf8(bytes).unwrap(), checkpoint);

    let r = RefRecord::decode("main", branch.as_bytes()).unwrap();
    assert_eq!(r.checkpoint, c.id);
    assert_eq!(serde_json::to_string(&r).unwrap(), branch);

    let s = SessionRecord::decode("main", session.as_bytes()).unwrap();
    assert_eq!((s.root, s.base, s.head), (root, base, Some(c.id)));
    let moved = s.branch_moved.clone().unwrap();
    assert_eq!((moved.to, moved.head), (Some(first), Some(c.id)));
    assert_eq!(serde_json::to_string(&s).unwrap(), session);

    let o = Operation::decode("fixture", operation.as_bytes()).unwrap();
    assert_eq!((o.before.workspace, o.after.workspace), (base, root));
    assert_eq!(o.after.branches["main"], Some(c.id));
    assert_eq!(o.after.branches["gone"], None);
    assert_eq!(
        o.checkpoints().collect::<Vec<_>>(),
        [first, first, c.id, c.id]
    );
    assert_eq!(serde_json::to_string(&o).unwrap(), operation);

    let m = Message::decode("fixture", message.as_bytes()).unwrap();
    assert_eq!((m.checkpoint, m.workspace), (Some(c.id), root));
    assert_eq!(String::from_utf8(m.encode()).unwrap(), message);
}

/// A record whose id is not 64 hex digits is corrupt, and the error says which id
/// type and what string.
#[test]
fn a_record_with_a_bad_id_is_corrupt_and_says_why() {
    let bad =
        br#"{"version":2,"name":"s","root":"nothex","base":"nothex","created":0,"updated":0}"#;
    let e = crate::refs::session_record::SessionRecord::decode("s", bad).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("bad NodeId: \"nothex\""), "{e}");
    let bad = br#"{"checkpoint":"ab","created":0}"#;
    let e = RefRecord::decode("b", bad).unwrap_err();
    assert!(e.to_string().contains("bad CheckpointId: \"ab\""), "{e}");
}
