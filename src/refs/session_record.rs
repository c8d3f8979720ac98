//! Session records: the durable description of a session (`s/<name>` in the
//! metadata db, JSON), below every module that reads one (`session`, `reach`,
//! `lifecycle`, `visibility`, `quota`, `ops`, `remote`).
//!
//! Owns: [`SessionRecord`] (with [`BranchMoved`] and the per-session settings
//! [`SessionConfig`]), its format version and decoding, session-name validation,
//! and reading, listing, creating and deleting records. The record names a root
//! node; what that root holds, and the live session built on it, are `crate::session`'s.
//! Invariants: a decoded record has well-formed ids (root, base, head) and the current version
//! (older versions are read as it); unknown fields are ignored and new fields have
//! defaults, so records stay readable both ways.

use serde::{Deserialize, Serialize};

use super::origin::Origin;
use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::meta;
use crate::store::ObjectStore;
use crate::tree::Timespec;

/// Version of the session record format. 2 added `meta`; 3 added `origin` (which
/// 2 kept in `meta.experiment` / `meta.bisect`, see [`crate::refs::origin`]); older
/// records are read as the current version and written back as it at the next
/// flush.
pub const SESSION_RECORD_VERSION: u32 = 3;

/// Default of [`SessionConfig::auto_ref_retention_days`]: keep auto refs 7 days...
pub const AUTO_REF_DEFAULT_DAYS: u64 = 7;
/// ... or the newest 100 of a session ([`SessionConfig::auto_ref_retention_count`]).
pub const AUTO_REF_DEFAULT_COUNT: u64 = 100;

/// Durable description of a session (JSON under `s/<name>`). Extensible: unknown
/// fields are ignored by older readers, new fields must have defaults.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SessionRecord {
    /// Record format version.
    pub version: u32,
    /// Session name.
    pub name: String,
    /// Root node of the working state (hex in JSON).
    pub root: NodeId,
    /// Root the session started from (hex in JSON).
    pub base: NodeId,
    /// Creation time (unix seconds).
    pub created: i64,
    /// Last flush (unix seconds).
    pub updated: i64,
    /// Logical bytes in regular files.
    #[serde(default)]
    pub bytes: i64,
    /// Number of inodes.
    #[serde(default)]
    pub inodes: i64,
    /// The session's current checkpoint (hex in JSON), parent of its next one.
    #[serde(default)]
    pub head: Option<CheckpointId>,
    /// The branch HEAD is attached to: a new checkpoint moves it (see
    /// `Session::checkpoint_with_meta`). `None`: detached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Set when a checkpoint found that someone else had moved (or deleted) the
    /// branch HEAD was attached to, and detached HEAD instead of moving it;
    /// cleared by the next change of HEAD by the session's own request (checkout,
    /// restore, undo, ...). Every answer to the session carries it (see
    /// `ops::branch_notice`) until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_moved: Option<BranchMoved>,
    /// Per-session settings.
    #[serde(default)]
    pub config: SessionConfig,
    /// Request- and feature-defined data (rules: `refs::validate_meta`).
    #[serde(default)]
    pub meta: serde_json::Map<String, serde_json::Value>,
    /// Where the session came from, when the daemon made it from another
    /// (`ops::spawn`); never written by a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// A merge, cherry-pick or rebase stopped on conflicts, waiting for
    /// `--continue` or `--abort` (`ops::merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merging: Option<Merging>,
}

/// A merge, cherry-pick or rebase stopped on conflicts ([`SessionRecord::merging`]).
/// The checkpoints and roots it names are gc roots while it is there.
///
/// Generic over its conflicts, which this layer cannot name: the record stores
/// them undecoded (`C` = [`serde_json::Value`], as the JSON of the session record
/// holds them); `crate::merge::stop` owns their type (`merge::Stop` =
/// `Merging<merge::Conflict>`) and decodes them, a conflict that does not decode
/// being `Error::Corrupt` there. Nothing below `merge` reads `conflicts`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Merging<C = serde_json::Value> {
    /// `merge`, `cherry-pick` or `rebase`.
    pub op: String,
    /// What was merged, as the request named it.
    pub theirs: String,
    /// The checkpoint merged (a merge's second parent, a cherry-pick's source).
    #[serde(default)]
    pub theirs_id: Option<CheckpointId>,
    /// Every checkpoint merged (a merge's parents after HEAD: more than one for
    /// an octopus merge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<CheckpointId>,
    /// The workspace before the operation: the checkpoint holding it (the saved
    /// pending changes, or HEAD) ...
    #[serde(default)]
    pub before: Option<CheckpointId>,
    /// ... and its tree (what `--abort` grafts back).
    pub before_root: NodeId,
    /// The message of the checkpoint `--continue` takes.
    pub message: String,
    /// The conflicts as answered (`crate::merge::Conflict`; undecoded JSON in the
    /// session record, decoded by `crate::merge::stop`).
    pub conflicts: Vec<C>,
    /// A rebase: the new baseline commit and tree, recorded by `--continue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onto: Option<(String, NodeId)>,
}

/// A branch moved under a session by someone else ([`SessionRecord::branch_moved`]).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct BranchMoved {
    /// The branch HEAD was attached to.
    pub branch: String,
    /// What the branch named when it was found moved (`None`: deleted).
    pub to: Option<CheckpointId>,
    /// The session's HEAD then (the checkpoint the branch was expected to name).
    pub head: Option<CheckpointId>,
}

/// Per-session settings (`treefork config`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, schemars::JsonSchema)]
#[serde(default)]
pub struct SessionConfig {
    /// Take an automatic checkpoint after this many mutating operations (0 = off).
    pub auto_checkpoint_ops: u64,
    /// Take an automatic checkpoint after this many idle seconds following a change (0 = off).
    pub auto_checkpoint_idle_secs: u64,
    /// Never take automatic checkpoints closer together than this (seconds).
    pub auto_checkpoint_min_interval_secs: u64,
    /// Keep operation records at least this many days (`gc` prunes older ones
    /// beyond the count below).
    pub op_retention_days: u64,
    /// Keep at least the newest this many operation records.
    pub op_retention_count: u64,
    /// Most runs an experiment may have (`treefork experiment`).
    pub experiment_max_runs: u64,
    /// Take an automatic checkpoint after every this many recorded commands
    /// (`treefork exec`; 0 = off).
    pub auto_checkpoint_commands: u64,
    /// Keep `auto/...` refs at least this many days (`gc` drops older ones
    /// beyond the count below; see `lifecycle::autorefs`).
    pub auto_ref_retention_days: u64,
    /// Keep at least the newest this many `auto/...` refs of the session.
    pub auto_ref_retention_count: u64,
    /// Event that takes an automatic checkpoint: `user_message` (a checkpoint with
    /// trigger `message` at each user message of the conversation log), or empty.
    pub auto_checkpoint_on: String,
    /// The directory (absolute) under which the forks of experiments and bisects
    /// get their directory (`<workspace name>.experiments`, `.bisect`); empty:
    /// the workspace's parent. Set by the user only.
    pub forks_dir: String,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            auto_checkpoint_ops: 0,
            auto_checkpoint_idle_secs: 0,
            auto_checkpoint_min_interval_secs: 30,
            op_retention_days: crate::oplog::retention::DEFAULT_DAYS,
            op_retention_count: crate::oplog::retention::DEFAULT_COUNT,
            experiment_max_runs: 32,
            auto_checkpoint_commands: 0,
            auto_ref_retention_days: AUTO_REF_DEFAULT_DAYS,
            auto_ref_retention_count: AUTO_REF_DEFAULT_COUNT,
            auto_checkpoint_on: String::new(),
            forks_dir: String::new(),
        }
    }
}

/// Validate a session name: 1-64 chars of `[A-Za-z0-9._-]`, not starting with `.` or `-`.
pub fn validate_session_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "invalid session name {name:?}: use 1-64 characters from [A-Za-z0-9._-], not starting with '.' or '-'"
        )))
    }
}

impl SessionRecord {
    /// Parse a stored session record (`s/<name>` value); its ids' serde checks
    /// that they are well-formed (opening the session relies on it).
    pub fn decode(name: &str, bytes: &[u8]) -> Result<SessionRecord> {
        let bad = |why: String| Error::corrupt(format!("session record {name}"), why);
        let mut r: SessionRecord = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        if !(1..=SESSION_RECORD_VERSION).contains(&r.version) {
            return Err(bad(format!("unsupported version {}", r.version)));
        }
        if r.version < 3 && r.origin.is_none() {
            r.origin = super::origin::from_legacy_meta(name, &mut r.meta);
        }
        r.version = SESSION_RECORD_VERSION;
        Ok(r)
    }
}

/// Read a session record.
pub fn load_record(store: &dyn ObjectStore, name: &str) -> Result<Option<SessionRecord>> {
    match store.meta_get(&meta::session_key(name))? {
        None => Ok(None),
        Some(v) => SessionRecord::decode(name, &v).map(Some),
    }
}

/// All session records.
pub fn list_records(store: &dyn ObjectStore) -> Result<Vec<SessionRecord>> {
    let mut out = Vec::new();
    for (k, v) in store.meta_scan(meta::SESSION_PREFIX)? {
        let name = meta::session_name(&k).unwrap_or("(not UTF-8)");
        out.push(SessionRecord::decode(name, &v)?);
    }
    Ok(out)
}

/// Delete session `name`'s record (the caller makes sure it is not mounted). Its
/// objects and checkpoints stay until a gc finds nothing else names them.
pub fn remove_record(store: &dyn ObjectStore, name: &str) -> Result<()> {
    validate_session_name(name)?;
    if load_record(store, name)?.is_none() {
        return Err(Error::NotFound(format!("no session named {name}")));
    }
    store.commit(vec![meta::MetaOp::Delete(meta::session_key(name))])
}

/// Create a session record for `name` starting at `root` (committed durably).
pub fn create_record(
    store: &dyn ObjectStore,
    name: &str,
    root: NodeId,
    bytes: i64,
    inodes: i64,
) -> Result<SessionRecord> {
    let rec = new_record(name, root, bytes, inodes)?;
    store.commit(vec![record_op(&rec)])?;
    Ok(rec)
}

/// A new session record for `name` starting at `root` (not yet stored).
pub fn new_record(name: &str, root: NodeId, bytes: i64, inodes: i64) -> Result<SessionRecord> {
    validate_session_name(name)?;
    let now = Timespec::now().sec;
    Ok(SessionRecord {
        version: SESSION_RECORD_VERSION,
        name: name.to_string(),
        root,
        base: root,
        created: now,
        updated: now,
        bytes,
        inodes,
        head: None,
        branch: None,
        branch_moved: None,
        config: SessionConfig::default(),
        meta: serde_json::Map::new(),
        origin: None,
        merging: None,
    })
}

/// The metadata op storing `rec` under its key.
pub fn record_op(rec: &SessionRecord) -> meta::MetaOp {
    meta::MetaOp::Put(
        meta::session_key(&rec.name),
        serde_json::to_vec(rec).expect("session record serializes"),
    )
}
