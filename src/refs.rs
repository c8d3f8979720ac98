//! Checkpoints and named refs.
//!
//! Owns: checkpoint records (`c/<id>`), branch refs (`r/<name>`), ref-name
//! validation and resolving user ref syntax (`HEAD`, `HEAD~N`, branch names, full or
//! unique-prefix checkpoint ids). Checkpoint records are JSON with a version and an
//! open `meta` map, so later features (exec records, message-log links, remote
//! tiers) extend them without a format change. A checkpoint id is the blake3
//! (checkpoint domain) of the canonical JSON of its identifying fields.
//! Refs are store-wide, so any session can fork from any branch.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::meta::{self, MetaOp};
use crate::store::ObjectStore;

/// Prefix of checkpoint keys.
pub const CHECKPOINT_PREFIX: &[u8] = b"c/";
/// Prefix of ref keys.
pub const REF_PREFIX: &[u8] = b"r/";
/// Checkpoint record format version.
pub const CHECKPOINT_VERSION: u32 = 1;

/// Why a checkpoint was taken.
pub const TRIGGERS: &[&str] = &[
    "manual",
    "auto",
    "before-risky",
    "milestone",
    "before-checkout",
    "before-restore",
    "fork",
];

/// A checkpoint: an immutable, named state of a session.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Format version.
    pub version: u32,
    /// Id (hex).
    pub id: String,
    /// Session it was taken in.
    pub session: String,
    /// Root node of the tree (hex).
    pub root: String,
    /// Previous checkpoint of the session, if any (hex).
    pub parent: Option<String>,
    /// Unix time in nanoseconds.
    pub time_ns: i128,
    /// Message.
    pub message: String,
    /// Trigger (see [`TRIGGERS`]).
    pub trigger: String,
    /// Paths changed since `parent` (or since the session's start).
    pub files_changed: u64,
    /// Extension point for later features.
    #[serde(default)]
    pub meta: Map<String, Value>,
}

impl Checkpoint {
    /// Build a record and compute its id.
    pub fn new(
        session: &str,
        root: NodeId,
        parent: Option<CheckpointId>,
        message: &str,
        trigger: &str,
        files_changed: u64,
    ) -> Checkpoint {
        let time_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        let ident = serde_json::json!({
            "session": session, "root": root.to_hex(),
            "parent": parent.map(|p| p.to_hex()), "time_ns": time_ns.to_string(),
            "message": message, "trigger": trigger,
        });
        let id = CheckpointId::of(&serde_json::to_vec(&ident).unwrap());
        Checkpoint {
            version: CHECKPOINT_VERSION,
            id: id.to_hex(),
            session: session.into(),
            root: root.to_hex(),
            parent: parent.map(|p| p.to_hex()),
            time_ns,
            message: message.into(),
            trigger: trigger.into(),
            files_changed,
            meta: Map::new(),
        }
    }

    /// Parse a stored record (`c/<id>` value), checking what later code relies on:
    /// the version and that the id, root and parent are well-formed hex ids.
    pub fn decode(what: &str, bytes: &[u8]) -> Result<Checkpoint> {
        let bad = |why: String| Error::corrupt(format!("checkpoint {what}"), why);
        let c: Checkpoint = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        if c.version != CHECKPOINT_VERSION {
            return Err(bad(format!("unsupported version {}", c.version)));
        }
        if CheckpointId::from_hex(&c.id).is_none()
            || NodeId::from_hex(&c.root).is_none()
            || c.parent
                .as_deref()
                .is_some_and(|p| CheckpointId::from_hex(p).is_none())
        {
            return Err(bad("bad id, root or parent".into()));
        }
        Ok(c)
    }

    /// Typed id.
    pub fn cid(&self) -> CheckpointId {
        CheckpointId::from_hex(&self.id).expect("checkpoint id is hex")
    }

    /// Typed root.
    pub fn root_id(&self) -> Result<NodeId> {
        NodeId::from_hex(&self.root)
            .ok_or_else(|| Error::corrupt(format!("checkpoint {}", self.id), "bad root id"))
    }

    /// The metadata op that stores this record.
    pub fn op(&self) -> MetaOp {
        MetaOp::Put(
            meta::key(CHECKPOINT_PREFIX, &self.cid().0),
            serde_json::to_vec(self).unwrap(),
        )
    }
}

/// Load a checkpoint by id.
pub fn load(store: &dyn ObjectStore, id: &CheckpointId) -> Result<Checkpoint> {
    let v = store
        .meta_get(&meta::key(CHECKPOINT_PREFIX, &id.0))?
        .ok_or_else(|| Error::NotFound(format!("unknown checkpoint {}", id.to_hex())))?;
    Checkpoint::decode(&id.to_string(), &v)
}

/// A branch ref.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RefRecord {
    /// Checkpoint it names (hex).
    pub checkpoint: String,
    /// Creation time (unix s).
    pub created: i64,
}

impl RefRecord {
    /// Parse a stored ref (`r/<name>` value).
    pub fn decode(name: &str, bytes: &[u8]) -> Result<RefRecord> {
        serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt(format!("ref {name}"), e.to_string()))
    }
}

/// Validate a branch name: 1-200 bytes; `/`-separated components that are not
/// empty, `.` or `..`, do not start with `.` or `-`; no whitespace, control
/// characters or any of `~^:?*[\`; not `HEAD` or `WORKING`; not 64 hex digits.
pub fn validate_ref_name(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::Invalid(format!(
            "invalid branch name {name:?}: {why}"
        )))
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > 200 {
        return bad("longer than 200 bytes");
    }
    if name
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
    {
        return bad("contains whitespace, a control character or one of ~^:?*[\\");
    }
    for comp in name.split('/') {
        if comp.is_empty() || comp == "." || comp == ".." {
            return bad("has an empty, '.' or '..' component");
        }
        if comp.starts_with('.') || comp.starts_with('-') {
            return bad("a component starts with '.' or '-'");
        }
    }
    if name == "HEAD" || name == "WORKING" {
        return bad("reserved name");
    }
    if name.len() == 64 && name.chars().all(|c| c.is_ascii_hexdigit()) {
        return bad("looks like a checkpoint id");
    }
    Ok(())
}

/// Read a branch.
pub fn get_ref(store: &dyn ObjectStore, name: &str) -> Result<Option<RefRecord>> {
    match store.meta_get(&meta::key(REF_PREFIX, name.as_bytes()))? {
        None => Ok(None),
        Some(v) => RefRecord::decode(name, &v).map(Some),
    }
}

/// The op that writes a branch.
pub fn ref_op(name: &str, r: &RefRecord) -> MetaOp {
    MetaOp::Put(
        meta::key(REF_PREFIX, name.as_bytes()),
        serde_json::to_vec(r).unwrap(),
    )
}

/// The op that deletes a branch.
pub fn delete_ref_op(name: &str) -> MetaOp {
    MetaOp::Delete(meta::key(REF_PREFIX, name.as_bytes()))
}

/// All branches, sorted by name.
pub fn list_refs(store: &dyn ObjectStore) -> Result<Vec<(String, RefRecord)>> {
    let mut out = Vec::new();
    for (k, v) in store.meta_scan(REF_PREFIX)? {
        let name = String::from_utf8_lossy(&k[REF_PREFIX.len()..]).into_owned();
        let r = RefRecord::decode(&name, &v)?;
        out.push((name, r));
    }
    Ok(out)
}

/// Resolve a ref spec to a checkpoint. `head` is the session's current checkpoint.
pub fn resolve(store: &dyn ObjectStore, head: Option<&str>, spec: &str) -> Result<Checkpoint> {
    let head_of = || {
        head.and_then(CheckpointId::from_hex).ok_or_else(|| {
            Error::NotFound("this session has no checkpoint yet (HEAD is unset)".into())
        })
    };
    if spec == "HEAD" {
        return load(store, &head_of()?);
    }
    if let Some(n) = spec.strip_prefix("HEAD~") {
        let n: u64 = n
            .parse()
            .map_err(|_| Error::Invalid(format!("bad ref {spec:?}: expected HEAD~N")))?;
        let mut c = load(store, &head_of()?)?;
        for _ in 0..n {
            let p = c
                .parent
                .as_deref()
                .and_then(CheckpointId::from_hex)
                .ok_or_else(|| {
                    Error::NotFound(format!("{spec}: history has fewer than {n} ancestors"))
                })?;
            c = load(store, &p)?;
        }
        return Ok(c);
    }
    if let Some(r) = get_ref(store, spec)? {
        let id = CheckpointId::from_hex(&r.checkpoint)
            .ok_or_else(|| Error::corrupt(format!("ref {spec}"), "bad checkpoint id"))?;
        return load(store, &id);
    }
    if spec.len() >= 4 && spec.len() <= 64 && spec.chars().all(|c| c.is_ascii_hexdigit()) {
        let lower = spec.to_ascii_lowercase();
        if let Some(id) = CheckpointId::from_hex(&lower) {
            return load(store, &id);
        }
        let mut found = Vec::new();
        for (k, _) in store.meta_scan(CHECKPOINT_PREFIX)? {
            let hex = crate::id::hex(&k[CHECKPOINT_PREFIX.len()..]);
            if hex.starts_with(&lower) {
                found.push(hex);
            }
        }
        return match found.len() {
            0 => Err(Error::NotFound(format!("unknown ref {spec:?}"))),
            1 => load(store, &CheckpointId::from_hex(&found[0]).unwrap()),
            n => Err(Error::Invalid(format!(
                "checkpoint prefix {spec:?} is ambiguous ({n} matches)"
            ))),
        };
    }
    Err(Error::NotFound(format!(
        "unknown ref {spec:?} (not a branch, checkpoint id, HEAD or HEAD~N)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    #[test]
    fn names() {
        for ok in ["main", "auto/before-checkout-1", "feat.x", "a_b-c"] {
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
            let c = Checkpoint::new("s", NodeId::of(msg.as_bytes()), parent.then(|| p.cid()), &msg, "auto", 3);
            let bytes = serde_json::to_vec(&c).unwrap();
            proptest::prop_assert_eq!(&Checkpoint::decode("x", &bytes).unwrap(), &c);
            let mut m = bytes.clone();
            for (at, bit) in &flips {
                let i = at % m.len();
                m[i] ^= 1 << bit;
            }
            m.truncate(cut % (m.len() + 1));
            if let Ok(d) = Checkpoint::decode("x", &m) {
                let _ = (d.cid(), d.root_id().unwrap(), d.op());
            }
            let _ = Checkpoint::decode("x", &junk);
            let r = RefRecord { checkpoint: c.id.clone(), created: 7 };
            let rb = serde_json::to_vec(&r).unwrap();
            proptest::prop_assert_eq!(RefRecord::decode("b", &rb).unwrap(), r);
            let _ = RefRecord::decode("b", &m);
            let _ = RefRecord::decode("b", &junk);
        }
    }

    #[test]
    fn resolve_specs() {
        let s = MemStore::default();
        let r = NodeId::of(b"r");
        let c1 = Checkpoint::new("s", r, None, "one", "manual", 1);
        let c2 = Checkpoint::new("s", r, Some(c1.cid()), "two", "manual", 1);
        s.commit(vec![
            c1.op(),
            c2.op(),
            ref_op(
                "b",
                &RefRecord {
                    checkpoint: c1.id.clone(),
                    created: 0,
                },
            ),
        ])
        .unwrap();
        assert_eq!(resolve(&s, Some(&c2.id), "HEAD").unwrap().id, c2.id);
        assert_eq!(resolve(&s, Some(&c2.id), "HEAD~1").unwrap().id, c1.id);
        assert!(resolve(&s, Some(&c2.id), "HEAD~2").is_err());
        assert_eq!(resolve(&s, None, "b").unwrap().id, c1.id);
        assert_eq!(resolve(&s, None, &c2.id[..10]).unwrap().id, c2.id);
        assert!(resolve(&s, None, "nope").is_err());
        assert!(resolve(&s, None, "HEAD").is_err());
    }
}
