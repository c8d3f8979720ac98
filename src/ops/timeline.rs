//! `timeline` and `note`: a session's activity for the person reviewing what an
//! agent did (seed 004's activity log), and the agent's own entries in it.
//!
//! The timeline is the operation log oldest first — checkpoints (manual and
//! automatic), checkouts, restores, branch changes, forks, execs, experiments,
//! undos and notes — each with the files its workspace change touched (the diff of
//! its before and after workspace roots, at most [`PATHS_SHOWN`] paths and the
//! count). Filters: `since` (unix seconds) and `actor` (a role: user, agent,
//! daemon). It is read newest first in pages and stops at `limit` entries
//! (at most `oplog::walk::MAX_SHOWN`), at the first record older than `since`, or
//! after `oplog::walk::SCAN_LIMIT` records (then `scan_limited` says so). A note
//! is an inert operation (undo skips it) of kind `note`, its type (`action`,
//! `decision`, `error`, `nudge`) and text in `meta`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Target;
use super::oplog_list::op_view_in;
use super::record::{Call, view_of};
use super::views::{OpView, PathChange};
use crate::diff;
use crate::error::{Error, Result};
use crate::oplog::Operation;
use crate::oplog::walk::{self, Walked};

/// Most paths listed per entry.
pub const PATHS_SHOWN: usize = 50;
/// Default number of entries.
pub const DEFAULT_ENTRIES: usize = 200;
/// Longest note.
pub const MAX_NOTE: usize = 16 << 10;
/// Note types.
pub const NOTE_TYPES: &[&str] = &["action", "decision", "error", "nudge"];

/// The answer to `timeline`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimelineAnswer {
    /// The entries, oldest first.
    pub entries: Vec<TimelineEntry>,
    /// Present when only the newest this many records were searched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_limited: Option<usize>,
}

/// An entry of the timeline: the operation as `op_log` shows it, and the files
/// its workspace change touched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimelineEntry {
    /// The operation.
    #[serde(flatten)]
    pub op: OpView,
    /// The paths its workspace change touched.
    pub files: FilesTouched,
}

/// The paths an operation's workspace change touched, or why they are not known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum FilesTouched {
    /// The diff of its workspace roots.
    Listed {
        /// How many paths changed.
        count: u64,
        /// The first of them, at most 50 (`PATHS_SHOWN`).
        paths: Vec<PathChange>,
    },
    /// The diff could not be read.
    Unknown {
        /// Why.
        error: String,
    },
}

/// The answer to `note`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Noted {
    /// The note's operation number.
    pub op: u64,
}

pub(crate) fn run(
    t: &Target,
    since: Option<i64>,
    actor: Option<&str>,
    limit: Option<usize>,
) -> Result<TimelineAnswer> {
    let s = &t.session;
    let store = s.store();
    let (ops, walked) = select(&**store, s.name(), since, actor, limit)?;
    let entries = ops
        .iter()
        .map(|o| TimelineEntry {
            op: op_view_in(&**store, o),
            files: files_of(&**store, o),
        })
        .collect();
    Ok(TimelineAnswer {
        entries,
        // Only the newest SCAN_LIMIT records were searched for matching entries.
        scan_limited: (walked == Walked::Exhausted).then_some(walk::SCAN_LIMIT),
    })
}

/// The operations a timeline shows (oldest first) and how the walk back ended.
pub(crate) fn select(
    store: &dyn crate::store::ObjectStore,
    session: &str,
    since: Option<i64>,
    actor: Option<&str>,
    limit: Option<usize>,
) -> Result<(Vec<Operation>, Walked)> {
    let limit = limit.unwrap_or(DEFAULT_ENTRIES).min(walk::MAX_SHOWN);
    let mut ops: Vec<Operation> = Vec::new();
    // Newest first: records are appended in time order, so the first one older
    // than `since` ends the walk.
    let walked = walk::back(store, session, None, walk::SCAN_LIMIT, &mut |o| {
        if since.is_some_and(|t| o.time_ns / 1_000_000_000 < t as i128) {
            return Ok(false);
        }
        if actor.is_none_or(|a| o.actor.role == a) {
            ops.push(o);
        }
        Ok(ops.len() < limit)
    })?;
    ops.reverse();
    Ok((ops, walked))
}

/// The paths an operation's workspace change touched.
fn files_of(store: &dyn crate::store::ObjectStore, o: &Operation) -> FilesTouched {
    if o.before.workspace == o.after.workspace {
        return FilesTouched::Listed {
            count: 0,
            paths: Vec::new(),
        };
    }
    let (a, b) = (o.before.workspace, o.after.workspace);
    let mut paths = Vec::new();
    let mut count = 0u64;
    let r = diff::diff_walk(store, a, b, &mut |e| {
        count += 1;
        if paths.len() < PATHS_SHOWN {
            paths.push(PathChange::from(&e));
        }
        true
    });
    match r {
        Ok(()) => FilesTouched::Listed { count, paths },
        Err(e) => FilesTouched::Unknown {
            error: e.to_string(),
        },
    }
}

pub(crate) fn note(t: &Target, call: &Call, kind: Option<&str>, text: &str) -> Result<Noted> {
    let kind = kind.unwrap_or("action");
    if !NOTE_TYPES.contains(&kind) {
        return Err(Error::Invalid(format!(
            "note type {kind:?}: expected one of {}",
            NOTE_TYPES.join(", ")
        )));
    }
    if text.trim().is_empty() {
        return Err(Error::Invalid("a note needs text".into()));
    }
    if text.len() > MAX_NOTE {
        return Err(Error::Invalid(format!(
            "a note is at most {MAX_NOTE} bytes ({} given)",
            text.len()
        )));
    }
    let rec = t.session.record();
    let v = view_of(&rec, rec.root);
    let mut op = call.op("note", v.clone(), v);
    op.inert = true;
    op.meta
        .insert("note".into(), json!({"type": kind, "text": text}));
    // A note changes no state: its record is the whole batch.
    let o = crate::oplog::append(&**t.session.store(), t.session.name(), op, Vec::new())?;
    Ok(Noted { op: o.seq })
}
