//! Checkpoints and named refs.
//!
//! Owns: checkpoint records (`c/<id>`), branch refs (`r/<name>`), ref-name
//! validation, the ref-spec syntax (`HEAD`, `@`, `@{-N}`, `exec@N`, branch names,
//! full or unique-prefix checkpoint ids, then `~N`/`^N` suffixes: parsed and
//! resolved by `spec` against a session's [`RefContext`]), and the rules for
//! triggers and record `meta` maps ([`rules`]), and session records (`s/<name>`,
//! [`session_record`]: below `session`, which re-exports them, and below every side
//! module that reads one), remote names and their clash rule with branch names
//! ([`remote_names`]) and remote tracking refs (`q/...`, [`tracking`]): the names
//! `REMOTE/NAME` resolves through, kept here so `refs` never imports the remote
//! tier. Keys are built by `crate::meta`.
//!
//! Checkpoint records are JSON with a version, a list of `parents` and an open
//! `meta` map (string → JSON), so later features (exec records, experiments,
//! message-log links, remote tiers) extend them without a format change. A
//! checkpoint id is the blake3 (checkpoint domain) of the canonical JSON of its
//! identifying fields; for a version-2 record that includes the parents and the
//! meta map. Version-1 records (one optional `parent`, written before parents and
//! meta existed) are read as version 2 and keep the id they were stored under:
//! ids are never recomputed. Records are immutable once written.
//! Branch names are per session ([`names`]: session S's branch `main` is stored
//! as `r/S:main`, another session writes it `S/main`); branches made before that
//! (`r/NAME`) stay store-wide. Any session of the user can fork from any branch; an
//! agent socket resolves only what its session sees (a [`Visibility`] given by the
//! [`RefContext`], see `crate::visibility`).
//! Finding a checkpoint by an id prefix reads only the keys in that prefix's byte
//! range (at most a few), never every checkpoint.

pub mod names;
pub mod origin;
pub mod remote_names;
mod rules;
pub mod session_record;
mod spec;
pub mod tracking;

use std::collections::{HashSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;
pub use rules::{
    KNOWN_TRIGGERS, MAX_META_BYTES, TriggerRule, validate_meta, validate_requested_trigger,
    validate_trigger,
};
pub use spec::{
    Base, HeadOnly, MAX_SPEC, REF_FORMS, RefContext, RefSpec, Suffix, Visibility, exec_digits,
    exec_ref, parse as parse_spec, resolve_in,
};

/// Checkpoint record format version. 2 replaced `parent` by `parents` and made
/// `meta` part of the id.
pub const CHECKPOINT_VERSION: u32 = 2;

/// A checkpoint: an immutable, named state of a session.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Format version ([`CHECKPOINT_VERSION`] once decoded: older records are
    /// upgraded when read).
    pub version: u32,
    /// Id (hex in JSON).
    pub id: CheckpointId,
    /// Session it was taken in.
    pub session: String,
    /// Root node of the tree (hex in JSON).
    pub root: NodeId,
    /// Parent checkpoints (hex in JSON), first parent first: the session's previous
    /// checkpoint, if any; later ones are merged or otherwise related states.
    pub parents: Vec<CheckpointId>,
    /// Unix time in nanoseconds.
    pub time_ns: i128,
    /// Message.
    pub message: String,
    /// Trigger (see [`KNOWN_TRIGGERS`]; an open set of names checked by
    /// [`validate_trigger`]).
    pub trigger: String,
    /// Paths changed since the first parent (or since the session's start).
    pub files_changed: u64,
    /// Request- and feature-defined data (see [`validate_meta`]); part of the id.
    pub meta: Map<String, Value>,
    /// The tree's usage when the checkpoint was taken (a session forked from it
    /// starts with these figures). Derived from `root`, so not part of the id;
    /// absent in version-1 records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Logical bytes in regular files and inode count of a tree.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Logical bytes in regular files.
    pub bytes: i64,
    /// Number of inodes.
    pub inodes: i64,
}

/// A stored checkpoint record of any supported version (ids that are not 64 hex
/// digits fail to decode).
#[derive(Deserialize)]
struct StoredCheckpoint {
    version: u32,
    id: CheckpointId,
    session: String,
    root: NodeId,
    /// Version 1.
    #[serde(default)]
    parent: Option<CheckpointId>,
    /// Version 2.
    #[serde(default)]
    parents: Option<Vec<CheckpointId>>,
    time_ns: i128,
    message: String,
    trigger: String,
    files_changed: u64,
    #[serde(default)]
    meta: Map<String, Value>,
    #[serde(default)]
    usage: Option<Usage>,
}

/// What a new checkpoint is made of (its id and time are filled in by
/// [`build`](Self::build)).
#[derive(Debug, Clone, PartialEq)]
pub struct NewCheckpoint<'a> {
    /// Session it is taken in.
    pub session: &'a str,
    /// Root node of the tree.
    pub root: NodeId,
    /// Parents, first parent first.
    pub parents: Vec<CheckpointId>,
    /// Message.
    pub message: &'a str,
    /// Trigger.
    pub trigger: &'a str,
    /// Paths changed since the first parent.
    pub files_changed: u64,
    /// Request- and feature-defined data.
    pub meta: Map<String, Value>,
}

impl NewCheckpoint<'_> {
    /// The record, timestamped now.
    pub fn build(self) -> Checkpoint {
        self.build_at(crate::clock::unix_ns())
    }

    /// The record, with the given time.
    pub fn build_at(self, time_ns: i128) -> Checkpoint {
        let mut c = Checkpoint {
            version: CHECKPOINT_VERSION,
            id: CheckpointId([0; 32]),
            session: self.session.into(),
            root: self.root,
            parents: self.parents,
            time_ns,
            message: self.message.into(),
            trigger: self.trigger.into(),
            files_changed: self.files_changed,
            meta: self.meta,
            usage: None,
        };
        c.id = c.ident_v2();
        c
    }
}

impl Checkpoint {
    /// Build a record with at most one parent and no meta, and compute its id.
    pub fn new(
        session: &str,
        root: NodeId,
        parent: Option<CheckpointId>,
        message: &str,
        trigger: &str,
        files_changed: u64,
    ) -> Checkpoint {
        NewCheckpoint {
            session,
            root,
            parents: parent.into_iter().collect(),
            message,
            trigger,
            files_changed,
            meta: Map::new(),
        }
        .build()
    }

    /// The version-2 id: identifying fields, parents and meta.
    fn ident_v2(&self) -> CheckpointId {
        let ident = serde_json::json!({
            "v": 2, "session": self.session, "root": self.root,
            "parents": self.parents, "time_ns": self.time_ns.to_string(),
            "message": self.message, "trigger": self.trigger, "meta": self.meta,
        });
        CheckpointId::of(&serde_json::to_vec(&ident).unwrap())
    }

    /// The version-1 id (records written before parents and meta existed).
    fn ident_v1(&self) -> Option<CheckpointId> {
        if self.parents.len() > 1 {
            return None;
        }
        let ident = serde_json::json!({
            "session": self.session, "root": self.root,
            "parent": self.parents.first(), "time_ns": self.time_ns.to_string(),
            "message": self.message, "trigger": self.trigger,
        });
        Some(CheckpointId::of(&serde_json::to_vec(&ident).unwrap()))
    }

    /// Whether the id is the hash of the record's identifying fields, in the form of
    /// either version (a version-1 record keeps its version-1 id).
    pub fn id_matches(&self) -> bool {
        let id = Some(self.id);
        Some(self.ident_v2()) == id || self.ident_v1() == id
    }

    /// Parse a stored record (`c/<id>` value) of any supported version, checking what
    /// later code relies on: that the id, root and parents are well-formed hex ids
    /// (their serde checks it).
    /// A version-1 record's `parent` becomes `parents`; its id is kept.
    pub fn decode(what: &str, bytes: &[u8]) -> Result<Checkpoint> {
        let bad = |why: String| Error::corrupt(format!("checkpoint {what}"), why);
        let s: StoredCheckpoint = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        let parents = match (s.version, s.parent, s.parents) {
            (1, parent, None) => parent.into_iter().collect(),
            (2, None, Some(parents)) => parents,
            (1 | 2, _, _) => return Err(bad("both or neither of parent and parents".into())),
            (v, _, _) => return Err(bad(format!("unsupported version {v}"))),
        };
        Ok(Checkpoint {
            version: CHECKPOINT_VERSION,
            id: s.id,
            session: s.session,
            root: s.root,
            parents,
            time_ns: s.time_ns,
            message: s.message,
            trigger: s.trigger,
            files_changed: s.files_changed,
            meta: s.meta,
            usage: s.usage,
        })
    }

    /// The first parent: the session's previous checkpoint.
    pub fn parent(&self) -> Option<CheckpointId> {
        self.parents.first().copied()
    }

    /// The metadata op that stores this record.
    pub fn op(&self) -> MetaOp {
        MetaOp::Put(
            meta::checkpoint_key(&self.id),
            serde_json::to_vec(self).unwrap(),
        )
    }
}

/// Load a checkpoint by id.
pub fn load(store: &dyn ObjectStore, id: &CheckpointId) -> Result<Checkpoint> {
    let v = store
        .meta_get(&meta::checkpoint_key(id))?
        .ok_or_else(|| unknown_checkpoint(id))?;
    Checkpoint::decode(&id.to_string(), &v)
}

/// Checkpoint `id`'s record if the store has one (`None`: it does not); a
/// record that does not read or decode is the error, never taken as missing.
pub fn load_present(store: &dyn ObjectStore, id: &CheckpointId) -> Result<Option<Checkpoint>> {
    match store.meta_get(&meta::checkpoint_key(id))? {
        None => Ok(None),
        Some(v) => Checkpoint::decode(&id.to_string(), &v).map(Some),
    }
}

/// Whether checkpoint `old` (hex) is `new` or one of its ancestors: a
/// breadth-first walk up from `new`, each checkpoint visited once, its parents
/// given by `parents` (the caller decides where records come from and what a
/// missing one means).
pub fn is_ancestor_by(
    old: &str,
    new: &str,
    parents: &mut dyn FnMut(&str) -> Result<Vec<String>>,
) -> Result<bool> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut queue: VecDeque<String> = VecDeque::from([new.to_string()]);
    while let Some(h) = queue.pop_front() {
        if h == old {
            return Ok(true);
        }
        if !seen.insert(h.clone()) {
            continue;
        }
        queue.extend(parents(&h)?);
    }
    Ok(false)
}

/// The error for a checkpoint id that is not there (or not visible: the same).
pub(crate) fn unknown_checkpoint(id: &CheckpointId) -> Error {
    Error::NotFound(format!("unknown checkpoint {}", id.to_hex()))
}

/// A branch ref.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RefRecord {
    /// Checkpoint it names (hex in JSON).
    pub checkpoint: CheckpointId,
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

/// The tree a session is based on, as a diff side (like `WORKING`): the tree of
/// the directory it was imported from (a fork's: its source's), moved by a
/// promote or rebase onto the repository's new state. Not a checkpoint: ref specs
/// (suffixes, `checkout`) do not take it; no branch may be named so.
pub const BASELINE: &str = "baseline";

/// Validate a branch name: 1-200 bytes; `/`-separated components that are not
/// empty, `.` or `..`, do not start with `.` or `-`; no whitespace, control
/// characters or any of `~^:?*[\`; no `@{`; not `HEAD`, `WORKING`, `@`,
/// `exec@<digits>` (ref-spec bases) or [`BASELINE`]; not 64 hex digits.
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
    if name == "HEAD" || name == "WORKING" || name == "@" || name == BASELINE {
        return bad("reserved name");
    }
    if name.contains("@{") {
        return bad("contains '@{' (ref syntax: @{-N})");
    }
    if exec_digits(name).is_some() {
        return bad("exec@N and tool@N name the state after an exec");
    }
    if name.len() == 64 && name.chars().all(|c| c.is_ascii_hexdigit()) {
        return bad("looks like a checkpoint id");
    }
    Ok(())
}

/// Read a branch.
pub fn get_ref(store: &dyn ObjectStore, name: &str) -> Result<Option<RefRecord>> {
    match store.meta_get(&meta::ref_key(name))? {
        None => Ok(None),
        Some(v) => RefRecord::decode(name, &v).map(Some),
    }
}

/// The op that writes a branch.
pub fn ref_op(name: &str, r: &RefRecord) -> MetaOp {
    MetaOp::Put(meta::ref_key(name), serde_json::to_vec(r).unwrap())
}

/// The op that deletes a branch.
pub fn delete_ref_op(name: &str) -> MetaOp {
    MetaOp::Delete(meta::ref_key(name))
}

/// All branches, sorted by name.
pub fn list_refs(store: &dyn ObjectStore) -> Result<Vec<(String, RefRecord)>> {
    let mut out = Vec::new();
    for (k, v) in store.meta_scan(meta::REF_PREFIX)? {
        let name = meta::ref_name(&k)
            .ok_or_else(|| Error::corrupt("ref key", format!("not UTF-8: {k:?}")))?;
        let r = RefRecord::decode(name, &v)?;
        out.push((name.to_string(), r));
    }
    Ok(out)
}

/// How many checkpoints an ambiguous id prefix lists.
const AMBIGUOUS_SHOWN: usize = 4;

/// The one checkpoint whose id starts with the hex digits `lower` (any length):
/// a bounded range scan over the prefix's keys.
fn resolve_prefix(store: &dyn ObjectStore, spec: &str, lower: &str) -> Result<Checkpoint> {
    let range = KeyRange::checkpoint_hex(lower)
        .ok_or_else(|| Error::Invalid(format!("bad checkpoint id prefix {spec:?}")))?;
    let found = store
        .meta_range(&range, AMBIGUOUS_SHOWN + 1)?
        .iter()
        .map(|(k, _)| {
            meta::checkpoint_id(k)
                .ok_or_else(|| Error::corrupt("checkpoint key", format!("malformed: {k:?}")))
        })
        .collect::<Result<Vec<CheckpointId>>>()?;
    pick_prefix(store, spec, found)
}

/// The checkpoint of the only id in `found` (the ids an id prefix `spec` matched,
/// at most `AMBIGUOUS_SHOWN + 1`): none is "unknown ref", several are ambiguous.
fn pick_prefix(
    store: &dyn ObjectStore,
    spec: &str,
    found: Vec<CheckpointId>,
) -> Result<Checkpoint> {
    match found.as_slice() {
        [] => Err(Error::NotFound(format!("unknown ref {spec:?}"))),
        [one] => load(store, one),
        many => {
            let shown: Vec<String> = many
                .iter()
                .take(AMBIGUOUS_SHOWN)
                .map(|id| id.to_hex()[..16].to_string())
                .collect();
            let more = if many.len() > AMBIGUOUS_SHOWN {
                ", ..."
            } else {
                ""
            };
            Err(Error::Invalid(format!(
                "checkpoint prefix {spec:?} is ambiguous: it matches {}{more}",
                shown.join(", ")
            )))
        }
    }
}

/// Resolve a ref spec to a checkpoint outside a session's context: `head` is the
/// session's current checkpoint; `@{-N}` and `exec@N` are refused (they need
/// [`resolve_in`] with a session's [`RefContext`]).
pub fn resolve(
    store: &dyn ObjectStore,
    head: Option<CheckpointId>,
    spec: &str,
) -> Result<Checkpoint> {
    resolve_in(store, &HeadOnly(head), spec)
}

#[cfg(test)]
mod tests;
