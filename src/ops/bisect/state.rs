//! The state of a bisect's search, kept by the daemon between `bisect_step`s:
//! one record under the source session (`meta::bisect_key`: `b/<session>\0<id>`),
//! JSON with a format version, written in the same batch as the forks it names.
//!
//! What it holds: the command (for the result), the range (its two ends and the
//! number of candidates: candidate `i` is the `len - 1 - i`th first parent of the
//! bad end, found again by walking, so the record stays small whatever the
//! range), the pure search ([`Search`]: what is known good and bad, which
//! candidates are pending), the pending candidates' forks, the steps so far and,
//! once found, the result document `bisect_end` records.
//!
//! Invariants: bounded ([`MAX_STATE`] bytes, at most `MAX_STEPS` steps); a record
//! that does not decode is `Error::Corrupt` (never read as absent); deleted by
//! `bisect_end` (and with its session by `session rm`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::search::Search;
use crate::command::bisect::{Bisected, MAX_STEPS, Point, Step};
use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::meta::{self, MetaOp};
use crate::refs::{self, Checkpoint};
use crate::store::ObjectStore;

/// The record's format version.
pub const VERSION: u32 = 1;
/// Largest stored state (its JSON).
pub const MAX_STATE: usize = 1 << 20;
/// Most candidates of one search (checkpoints along the first-parent chain).
pub const MAX_CANDIDATES: usize = 1_000_000;

/// A pending candidate's fork.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingFork {
    /// The candidate (its position; also the fork's `n`).
    pub n: u32,
    /// The fork's session.
    pub session: String,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
}

/// The state of one bisect's search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// [`VERSION`].
    pub v: u32,
    /// The command, as the client runs it.
    pub command: Vec<String>,
    /// Leave the tested forks mounted.
    pub keep: bool,
    /// The caller's place relative to the workspace root (stored in the forks).
    pub cwd: Option<String>,
    /// The forks' base directory asked at begin.
    pub forks_dir: Option<PathBuf>,
    /// When the bisect began (Unix milliseconds).
    pub started_ms: u64,
    /// The good end (candidate 0).
    pub good: Point,
    /// The bad end (candidate `len - 1`).
    pub bad: Point,
    /// The search.
    pub search: Search,
    /// The forks of the pending candidates.
    pub forks: Vec<PendingFork>,
    /// Every candidate tested so far, round by round.
    pub steps: Vec<Step>,
    /// The result, once the search found one.
    pub result: Option<Bisected>,
}

impl State {
    /// The metadata op that stores this state.
    pub fn put(&self, session: &str, id: &str) -> Result<MetaOp> {
        Ok(MetaOp::Put(meta::bisect_key(session, id), self.encode(id)?))
    }

    /// This state as stored (bounded).
    pub fn encode(&self, id: &str) -> Result<Vec<u8>> {
        if self.steps.len() > MAX_STEPS {
            return Err(Error::Invalid(format!(
                "bisect {id}: more than {MAX_STEPS} steps"
            )));
        }
        let v = serde_json::to_vec(self)
            .map_err(|e| Error::Invalid(format!("bisect {id}: state: {e}")))?;
        if v.len() > MAX_STATE {
            return Err(Error::Invalid(format!(
                "bisect {id}: a state of {} bytes, at most {MAX_STATE}",
                v.len()
            )));
        }
        Ok(v)
    }
}

/// The op deleting the state of bisect `id` of `session`.
pub fn delete(session: &str, id: &str) -> MetaOp {
    MetaOp::Delete(meta::bisect_key(session, id))
}

/// The state of bisect `id` of `session`, if it keeps one (a bisect begun
/// without `search` keeps none).
pub fn load(store: &dyn ObjectStore, session: &str, id: &str) -> Result<Option<State>> {
    let what = || format!("bisect state {session}/{id}");
    let Some(v) = store.meta_get(&meta::bisect_key(session, id))? else {
        return Ok(None);
    };
    let s: State = serde_json::from_slice(&v).map_err(|e| Error::corrupt(what(), e.to_string()))?;
    if s.v != VERSION {
        return Err(Error::corrupt(what(), format!("format version {}", s.v)));
    }
    Ok(Some(s))
}

/// A checkpoint as a result names it.
pub fn point(c: &Checkpoint) -> Point {
    let v = crate::ops::views::CheckpointView::from(c);
    Point {
        id: v.id,
        short: v.short,
        message: v.message,
        time: v.time,
    }
}

/// The candidates from `good` (default: the chain's oldest) to `bad` along
/// `bad`'s first parents: their number, and the good end. Errors name `good`
/// and `bad` as the request gave them.
pub fn range(
    store: &dyn ObjectStore,
    bad: &Checkpoint,
    good: Option<(&str, &Checkpoint)>,
    bad_name: &str,
) -> Result<(usize, Checkpoint)> {
    let mut len = 1;
    let mut at = bad.clone();
    loop {
        if good.is_some_and(|(_, g)| g.id == at.id) {
            return Ok((len, at));
        }
        let parent = match at.parent() {
            Some(p) if len < MAX_CANDIDATES => p,
            _ => break,
        };
        at = refs::load(store, &parent)?;
        len += 1;
    }
    match good {
        None => Ok((len, at)),
        Some((name, g)) if len >= MAX_CANDIDATES => Err(Error::Invalid(format!(
            "good {name} ({}) is more than {MAX_CANDIDATES} checkpoints behind bad {bad_name}",
            short(&g.id)
        ))),
        Some((name, g)) => Err(Error::Invalid(format!(
            "good {name} ({}) is not on the first-parent chain of bad {bad_name} ({}); \
             bisect walks first parents from the bad end back to the good one",
            short(&g.id),
            short(&bad.id)
        ))),
    }
}

fn short(id: &CheckpointId) -> String {
    id.to_hex().chars().take(12).collect()
}

/// The checkpoints of candidates `points` (any order) of the range whose bad end
/// is `bad` and which has `len` candidates, by point.
pub fn candidates(
    store: &dyn ObjectStore,
    bad: &str,
    len: usize,
    points: &[usize],
) -> Result<Vec<(usize, Checkpoint)>> {
    let Some(&lowest) = points.iter().min() else {
        return Ok(Vec::new());
    };
    if points.iter().any(|&p| p >= len) {
        return Err(Error::Invalid(format!(
            "bisect: a candidate past the end of the range ({len} candidates)"
        )));
    }
    let id = CheckpointId::from_hex(bad)
        .ok_or_else(|| Error::corrupt("bisect state", format!("bad end {bad:?}")))?;
    let mut at = refs::load(store, &id)?;
    let mut i = len - 1;
    let mut out = Vec::new();
    loop {
        if points.contains(&i) {
            out.push((i, at.clone()));
        }
        if i == lowest {
            break;
        }
        let p = at
            .parent()
            .ok_or_else(|| Error::corrupt("bisect state", "the range is longer than its chain"))?;
        at = refs::load(store, &p)?;
        i -= 1;
    }
    out.sort_by_key(|(i, _)| *i);
    Ok(out)
}
