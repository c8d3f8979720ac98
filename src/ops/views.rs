//! The shapes several answers share, one type each: a checkpoint as answers show
//! it ([`CheckpointView`]), the pending changes an op saved first ([`Saved`]), a
//! changed path ([`PathChange`]), an operation record as shown ([`OpView`]) and
//! the notice that someone else moved the session's branch ([`BranchMoved`]), a
//! message ([`MessageView`]) and a session just mounted ([`Mounted`]).
//!
//! Invariant: each serializes to exactly the JSON these answers have always had
//! (field names, nulls vs absent fields, numbers vs strings), so clients written
//! against the untyped answers read them unchanged; deserializing tolerates
//! fields added later (no `deny_unknown_fields`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::diff::Change;
use crate::oplog::Operation;
use crate::refs::Checkpoint;

/// A checkpoint as answers show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointView {
    /// Checkpoint id (64 hex digits).
    pub id: String,
    /// The id's first 12 hex digits.
    pub short: String,
    /// The session it was taken in.
    pub session: String,
    /// Root node of its tree (hex).
    pub root: String,
    /// First parent (hex); `null` for a checkpoint without parents.
    pub parent: Option<String>,
    /// Every parent (hex), first parent first.
    pub parents: Vec<String>,
    /// Caller- and feature-defined data stored in the record.
    pub meta: Map<String, Value>,
    /// Unix time in nanoseconds, as a decimal string (it does not fit a double).
    pub time_ns: String,
    /// Unix time in seconds.
    pub time: i64,
    /// Message.
    pub message: String,
    /// Why it was taken (`manual`, `auto`, `before-risky`, ...).
    pub trigger: String,
    /// Paths changed since its first parent (or since the session's start).
    pub files_changed: u64,
}

impl From<&Checkpoint> for CheckpointView {
    fn from(c: &Checkpoint) -> CheckpointView {
        CheckpointView {
            id: c.id.to_hex(),
            short: c.id.short(),
            session: c.session.clone(),
            root: c.root.to_hex(),
            parent: c.parent().map(|p| p.to_hex()),
            parents: c.parents.iter().map(|p| p.to_hex()).collect(),
            meta: c.meta.clone(),
            time_ns: c.time_ns.to_string(),
            time: (c.time_ns / 1_000_000_000) as i64,
            message: c.message.clone(),
            trigger: c.trigger.clone(),
            files_changed: c.files_changed,
        }
    }
}

/// Pending changes an op saved as a checkpoint beside HEAD before changing the
/// workspace (answers carry `null` when there were none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Saved {
    /// The checkpoint holding them (hex id).
    pub checkpoint: String,
    /// The `auto/...` ref that names it.
    #[serde(rename = "ref")]
    pub name: String,
}

impl Saved {
    /// The view of what `save_pending` returned.
    pub(crate) fn of(saved: &Option<(Checkpoint, String)>) -> Option<Saved> {
        saved.as_ref().map(|(c, r)| Saved {
            checkpoint: c.id.to_hex(),
            name: r.clone(),
        })
    }
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PathChange {
    /// Workspace-relative, `/`-separated (lossy for names that are not UTF-8).
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub change: Change,
    /// The workspace's ignore files ignore it (`status`/`diff` asked for ignored
    /// paths); absent otherwise.
    #[serde(default, skip_serializing_if = "crate::control::is_false")]
    pub ignored: bool,
}

impl From<&crate::diff::DiffEntry> for PathChange {
    fn from(e: &crate::diff::DiffEntry) -> PathChange {
        PathChange {
            path: e.path_str(),
            change: e.change,
            ignored: e.ignored,
        }
    }
}

/// An operation record as shown to clients: the record, its time in seconds and a
/// one-line summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpView {
    /// The stored record.
    #[serde(flatten)]
    pub record: Operation,
    /// Unix time in seconds.
    pub time: i64,
    /// One line saying what it did.
    pub summary: String,
}

/// Someone else moved (or deleted) the session's branch: carried as
/// `branch_moved` by every answer to a session op while it is so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BranchMoved {
    /// The branch.
    pub branch: String,
    /// Where it is now (hex); `null` when deleted.
    pub to: Option<String>,
    /// The session's HEAD (hex).
    pub head: Option<String>,
    /// Whether a checkpoint already detached HEAD from it.
    pub detached: bool,
    /// What happened and what to do, for people.
    pub message: String,
}

/// A message of the conversation log as answers show it (MSG in
/// docs/protocol.md): the message plus its time in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageView {
    /// The message.
    #[serde(flatten)]
    pub message: crate::messages::Message,
    /// When it was appended, unix seconds.
    pub time: i64,
}

impl From<&crate::messages::Message> for MessageView {
    fn from(m: &crate::messages::Message) -> MessageView {
        MessageView {
            time: (m.time_ns / 1_000_000_000) as i64,
            message: m.clone(),
        }
    }
}

/// A session just mounted: the answer to `mount`, and the start of `fork`'s
/// (defined beside [`crate::host::Host::mount_claimed`], which returns it).
pub use crate::host::Mounted;
