//! `bisect_end`: remove forks of a bisect and, on the final call, record its
//! result as one inert `bisect` operation in the source session's log.
//!
//! Only forks of this bisect of this session are ever removed: every name in
//! `remove` is checked to be one before anything is removed (a request naming
//! any other session is refused whole). With `abort` every fork of the bisect
//! is removed and nothing is recorded.
//!
//! A bisect whose search the daemon keeps (`bisect_begin` with `search`) is
//! recorded from that state: the final `bisect_end` carries no `result` (one
//! that does is refused), the document recorded is the daemon's, and the state is
//! deleted with the record (or with `abort`).

use std::sync::MutexGuard;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{KIND, check_id, forks, recorded, state};
use crate::command::bisect::Bisected;
use crate::error::{Error, Result};
use crate::meta::MetaOp;
use crate::oplog::Actor;
use crate::ops::experiment::answer::CleanupError;
use crate::ops::spawn::Removing;
use crate::ops::txn;
use crate::ops::{Host, Target};
use crate::session::SessionRecord;

/// Largest recorded result (its JSON).
pub const MAX_RESULT: usize = 900 << 10;

/// Which forks to remove: names, or `"all"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Remove {
    /// These forks (session names).
    Names(Vec<String>),
    /// Every fork of the bisect.
    Every(All),
}

/// The word `all`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum All {
    /// Every fork.
    All,
}

impl Default for Remove {
    fn default() -> Remove {
        Remove::Names(Vec::new())
    }
}

/// Remove forks of a bisect; with `result`, record the bisect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BisectEnd {
    /// The bisect id (from `bisect_begin`).
    pub id: String,
    /// The forks to unmount and remove: their session names, or `"all"`.
    #[serde(default)]
    pub remove: Remove,
    /// The final call of a bisect that keeps no search: what the bisect found,
    /// recorded as one `bisect` operation. (A search's final call has none: the
    /// daemon records its own result.)
    #[serde(default)]
    pub result: Option<Box<Bisected>>,
    /// The bisect was interrupted: remove every fork, record nothing.
    #[serde(default)]
    pub abort: bool,
}

/// The answer to `bisect_end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BisectEnded {
    /// The bisect id.
    pub id: String,
    /// The forks removed.
    pub removed: Vec<String>,
    /// The forks that could not be removed, and why.
    pub errors: Vec<CleanupError>,
    /// The operation recorded (with `result`, or a search's result).
    pub seq: Option<u64>,
    /// The document recorded, when it is the daemon's (a search's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<Bisected>>,
}

/// `bisect_end`.
pub fn end<H: Host>(
    h: &H,
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    actor: &Actor,
    req: BisectEnd,
) -> Result<BisectEnded> {
    check_id(&req.id)?;
    let s = &t.session;
    let store = h.store();
    if req.abort && req.result.is_some() {
        return Err(Error::Invalid(
            "an aborted bisect records no result (abort with result)".into(),
        ));
    }
    let kept = state::load(&*store, s.name(), &req.id)?;
    if kept.is_some() && req.result.is_some() {
        return Err(Error::Invalid(format!(
            "bisect {} keeps its search: the daemon records its own result \
             (send bisect_end without result)",
            req.id
        )));
    }
    let live = forks(&*store, s.name(), &req.id)?;
    let chosen = chosen(&req, &live, s.name())?;
    let doc: Option<Bisected> = match (&req.result, &kept) {
        (Some(r), _) => Some((**r).clone()),
        (None, Some(st)) if !req.abort => st.result.clone(),
        _ => None,
    };
    let result = match &doc {
        Some(r) => Some(checked(h, t, &req.id, r, actor)?),
        None => None,
    };
    drop(op_lock);
    // The forks go in the batch of the record that ends the bisect, and the
    // search's state with them (one batch; unmounted and claimed first).
    let mut removing = Removing::new(h, "bisect");
    let errors = take(&mut removing, s.name(), &req.id, chosen);
    let mut extra = removing.ops()?;
    if kept.is_some() && (result.is_some() || req.abort) {
        extra.push(state::delete(s.name(), &req.id));
    }
    let seq = match result {
        Some(meta) => {
            let request = json!({"op": "bisect_end", "id": req.id});
            let again = || match recorded(&*store, s.name(), &req.id)? {
                Some(_) => Err(Error::Conflict(format!(
                    "bisect {} has already ended",
                    req.id
                ))),
                None => Ok(()),
            };
            Some(txn::record_result(t, actor, KIND, request, meta, extra, &again)?.seq)
        }
        None if extra.is_empty() => None,
        None => {
            store.commit(extra)?;
            None
        }
    };
    let removed = removing.names();
    drop(removing);
    remove_dir_when_done(t, &live, removed.len())?;
    let from_state = kept.is_some() && seq.is_some();
    Ok(BisectEnded {
        id: req.id,
        removed,
        errors,
        seq,
        result: doc.filter(|_| from_state).map(Box::new),
    })
}

/// Remove `chosen` (of bisect `id`'s `live` forks) in one batch with `extra`
/// (the search state's change that goes with it), then, once every live fork is
/// gone, the directory they were made in. Returns the forks removed and those
/// that could not be.
pub(super) fn remove_forks<H: Host>(
    h: &H,
    t: &Target,
    id: &str,
    live: &[(u32, SessionRecord)],
    chosen: Vec<String>,
    extra: Vec<MetaOp>,
) -> Result<(Vec<String>, Vec<CleanupError>)> {
    let mut removing = Removing::new(h, "bisect");
    let errors = take(&mut removing, t.session.name(), id, chosen);
    let mut ops = removing.ops()?;
    ops.extend(extra);
    if !ops.is_empty() {
        h.store().commit(ops)?;
    }
    let removed = removing.names();
    drop(removing);
    remove_dir_when_done(t, live, removed.len())?;
    Ok((removed, errors))
}

/// Unmount and claim each of `chosen`, candidates of bisect `id` of `session`,
/// into `removing` (`spawn::Removing`); the errors of those that could not be.
fn take<H: Host>(
    removing: &mut Removing<'_, H>,
    session: &str,
    id: &str,
    chosen: Vec<String>,
) -> Vec<CleanupError> {
    let ours = |r: &SessionRecord| super::candidate_of(r, session, id).is_some();
    let mut errors = Vec::new();
    for name in chosen {
        if let Err(e) = removing.take(&name, &ours) {
            errors.push(CleanupError {
                fork: name,
                error: e.to_string(),
            });
        }
    }
    errors
}

/// Once every one of the bisect's `live` forks is removed (`removed` of them),
/// the directory they were made in (recorded by `bisect_begin`; only one named
/// as this bisect's kind).
fn remove_dir_when_done(t: &Target, live: &[(u32, SessionRecord)], removed: usize) -> Result<()> {
    if live.len() != removed {
        return Ok(());
    }
    let ours = crate::ops::forkdir::forks_dir_for(t, None, "bisect")?;
    let dirs: std::collections::BTreeSet<std::path::PathBuf> = live
        .iter()
        .filter_map(|(_, r)| Some(r.origin.as_ref()?.bisect()?.dir.clone()))
        .filter(|d: &std::path::PathBuf| d.file_name() == ours.file_name())
        .collect();
    for dir in dirs {
        crate::ops::forkdir::remove_forks_dirs(&dir, std::iter::empty());
    }
    Ok(())
}

/// Remove every fork of bisect `id` of the target's session, in one batch with
/// `extra`.
pub(super) fn remove_all<H: Host>(
    h: &H,
    t: &Target,
    id: &str,
    extra: Vec<MetaOp>,
) -> Result<(Vec<String>, Vec<CleanupError>)> {
    let live = forks(&*h.store(), t.session.name(), id)?;
    let all = live.iter().map(|(_, r)| r.name.clone()).collect();
    remove_forks(h, t, id, &live, all, extra)
}

/// The forks to remove: every name asked must be a live fork of this bisect of
/// this session (else the whole request is refused).
fn chosen(req: &BisectEnd, live: &[(u32, SessionRecord)], source: &str) -> Result<Vec<String>> {
    let all = || live.iter().map(|(_, r)| r.name.clone()).collect();
    match &req.remove {
        _ if req.abort => Ok(all()),
        Remove::Every(All::All) => Ok(all()),
        Remove::Names(names) => {
            let mut out: Vec<String> = Vec::new();
            for n in names {
                if !live.iter().any(|(_, r)| r.name == *n) {
                    return Err(Error::Invalid(format!(
                        "session {n:?} is not a fork of bisect {} of session {source}; \
                         bisect_end removes only that bisect's forks",
                        req.id
                    )));
                }
                if !out.contains(n) {
                    out.push(n.clone());
                }
            }
            Ok(out)
        }
    }
}

/// The result to record, checked: well formed and bounded, its checkpoints in
/// the store, this bisect not recorded yet, the agent's record quota.
fn checked<H: Host>(
    h: &H,
    t: &Target,
    id: &str,
    r: &Bisected,
    actor: &Actor,
) -> Result<serde_json::Map<String, Value>> {
    r.check()?;
    let store = h.store();
    for p in [
        Some(&r.good),
        Some(&r.bad),
        r.first_bad.as_ref(),
        r.last_good.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        // In the caller's view: on an agent socket a checkpoint it does not see
        // answers as one that does not exist.
        crate::ops::refctx::resolve(t, &p.id)?;
    }
    let name = t.session.name();
    if recorded(&*store, name, id)?.is_some() {
        return Err(Error::Conflict(format!("bisect {id} is recorded already")));
    }
    if actor.is_agent() {
        crate::quota::check_op_records(&*store, name)?;
    }
    let mut meta = match serde_json::to_value(r) {
        Ok(Value::Object(m)) => m,
        _ => unreachable!("a struct serializes to an object"),
    };
    meta.insert("id".into(), json!(id));
    meta.insert("source".into(), json!(name));
    let size = serde_json::to_vec(&meta).map_or(usize::MAX, |v| v.len());
    if size > MAX_RESULT {
        return Err(Error::Invalid(format!(
            "bisect result of {size} bytes; at most {MAX_RESULT}"
        )));
    }
    Ok(meta)
}
