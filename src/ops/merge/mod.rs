//! `merge`, `cherry-pick`, `revert` and `rebase`: bring another history's changes
//! into the session (or take one change out) by a three-way merge
//! (`crate::merge`), and `--continue` / `--abort` of one that stopped on
//! conflicts. One answer shape for all four ([`MergeAnswer`]),
//! so a conflict reads the same over the socket, in the CLI, MCP and Python.
//!
//! Split by concern: [`start`] (merge, cherry-pick and revert: which changes,
//! against which base), [`rebase`] (the durable repository's new head, from git), [`finish`]
//! (continue and abort), and here the landing they share ([`land`]): merge into
//! the flushed workspace beside it, then save the pending changes and graft the
//! result in one batch with either the new checkpoint (clean) or the stopped
//! state (`SessionRecord::merging`: conflicts).
//!
//! Invariants:
//! - a write that lands between the merge and the graft is never lost: the graft
//!   commits only if the workspace it replaces is the one merged, else the merge
//!   runs again (at most [`ATTEMPTS`] times);
//! - the whole operation is one recorded operation (undo puts back the workspace
//!   and HEAD as they were);
//! - while a session has a stopped merge, no other merge, cherry-pick or rebase
//!   starts; a change of HEAD by checkout, undo or the like ends it.

mod baseline;
pub mod finish;
pub mod rebase;
pub mod start;
#[cfg(test)]
mod tests;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::record::{Call, view_of};
use super::txn::{self, Log};
use super::views::{PathChange, Saved};
use super::{Target, save_and_graft, working_root};
use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::merge::{self, Change, Conflict, Stop, Theirs};

/// Most refs one merge takes (an octopus merge).
pub const REFS_MAX: usize = 16;
use crate::meta::MetaOp;
use crate::session::SessionRecord;

/// Times a merge is computed again when programs wrote in between.
pub const ATTEMPTS: usize = 5;

/// How a merge, cherry-pick or rebase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Done: the result is in the workspace and checkpointed.
    Merged,
    /// Stopped: the result is in the workspace with conflicts to resolve, then
    /// `--continue` (or `--abort`).
    MergeConflict,
    /// Nothing to bring in.
    UpToDate,
    /// A dry run: what would change and conflict.
    Planned,
    /// `--abort`: the workspace is back as it was before.
    Aborted,
}

/// The answer of `merge`, `cherry-pick` and `rebase` (and their `--continue`,
/// `--abort`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MergeAnswer {
    /// `merge`, `cherry-pick` or `rebase`.
    pub op: String,
    /// How it ended.
    pub status: Status,
    /// What was merged, as named (a ref; a rebase: the commit it went onto).
    pub theirs: String,
    /// The merge base: a checkpoint id, or (rebase) the old baseline commit.
    #[serde(default)]
    pub base: Option<String>,
    /// The paths the workspace changed at (or would).
    pub changes: Vec<PathChange>,
    /// The conflicts, by path (empty when clean).
    pub conflicts: Vec<Conflict>,
    /// The checkpoint taken (status `merged`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// Pending changes saved before the workspace changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved: Option<Saved>,
    /// The operation recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<u64>,
    /// What to do next, in words (conflicts: how to go on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

impl MergeAnswer {
    /// An answer with nothing done yet.
    pub(crate) fn new(op: &str, status: Status, theirs: &str, base: Option<String>) -> MergeAnswer {
        MergeAnswer {
            op: op.to_string(),
            status,
            theirs: theirs.to_string(),
            base,
            changes: Vec::new(),
            conflicts: Vec::new(),
            checkpoint: None,
            saved: None,
            record: None,
            next: None,
        }
    }
}

/// What one merge brings in and how it ends when clean.
pub(crate) struct Job {
    /// `merge`, `cherry-pick` or `rebase` (also the checkpoint's trigger).
    pub op: &'static str,
    /// What is merged, as named.
    pub theirs_spec: String,
    /// The checkpoint merged, if it is one.
    pub theirs_id: Option<CheckpointId>,
    /// The base, for the answer.
    pub base: Option<String>,
    /// Theirs' changes since the base, and where grafted versions come from:
    /// one step, or one per ref of an octopus merge (merged in turn).
    pub steps: Vec<(Vec<Change>, Theirs)>,
    /// The stored trees the result is made from (theirs and the bases): what an
    /// agent's result is checked against (`merge::contain`).
    pub sources: Vec<NodeId>,
    /// The checkpoint's message.
    pub message: String,
    /// The checkpoint's parents after HEAD (a merge: theirs).
    pub more_parents: Vec<CheckpointId>,
    /// The checkpoint's `meta`.
    pub meta: serde_json::Map<String, serde_json::Value>,
    /// A rebase: the new baseline (commit, tree).
    pub onto: Option<(String, NodeId)>,
    /// Metadata ops the clean landing adds (a rebase: the new baseline), built
    /// when the batch is.
    pub finish_ops: Option<FinishOps>,
}

/// Builds extra metadata ops for the batch that ends an operation (read-guarded,
/// so built again on a retry).
pub(crate) type FinishOps = fn(&Target, &Stop) -> Result<Vec<MetaOp>>;

/// Refuse to start while a stopped merge waits.
pub(crate) fn refuse_if_stopped(t: &Target, op: &str) -> Result<()> {
    if let Some(m) = t.session.record().merging {
        return Err(Error::Conflict(format!(
            "session {}: a {} of {} stopped on conflicts; resolve them and run `treefork {} --continue`, or `treefork {} --abort`, before a {op}",
            t.session.name(),
            m.op,
            m.theirs,
            m.op,
            m.op
        )));
    }
    Ok(())
}

/// The words saying how to go on after conflicts.
pub(crate) fn next_words(op: &str, conflicts: &[Conflict]) -> String {
    let sides = if op == "rebase" {
        // The reverse of `git rebase`'s ours/theirs: said outright.
        " In the markers, `<<<<<<< session (yours)` is the session's side and `>>>>>>> repository (upstream)` the repository's."
    } else {
        ""
    };
    format!(
        "resolve the {} conflicted path(s) (edit the files: remove the conflict markers; delete or keep each PATH~theirs), then run `treefork {op} --continue`; or `treefork {op} --abort` to go back.{sides}",
        conflicts.len()
    )
}

/// Merge `job` into the workspace: a dry run answers the plan; otherwise the
/// result is grafted and either checkpointed (clean) or left stopped (conflicts).
pub(crate) fn land(t: &Target, call: &Call, job: &Job, dry_run: bool) -> Result<MergeAnswer> {
    let store = t.session.store().clone();
    for _ in 0..ATTEMPTS {
        let ours = working_root(t)?;
        let mut merged = merge::Merged {
            root: ours,
            conflicts: Vec::new(),
        };
        for (changes, theirs) in &job.steps {
            let m = merge::merge(&t.session, merged.root, changes, *theirs)?;
            merged.root = m.root;
            merged.conflicts.extend(m.conflicts);
        }
        let changes: Vec<PathChange> = crate::diff::diff_roots(&*store, ours, merged.root)?
            .iter()
            .map(PathChange::from)
            .collect();
        // An agent's result is refused, dry run or not, when it would put what
        // the agent cannot write where it could not write it (`merge::contain`).
        if let Some(agent) = t.agent_uid {
            merge::contain::check(&*store, agent, job.op, ours, merged.root, &job.sources)?;
        }
        let mut out = MergeAnswer::new(job.op, Status::Planned, &job.theirs_spec, job.base.clone());
        out.changes = changes;
        out.conflicts = merged.conflicts.clone();
        if dry_run {
            if !out.conflicts.is_empty() {
                out.next = Some(format!(
                    "{} path(s) would conflict: run it, resolve them, then `treefork {} --continue`",
                    out.conflicts.len(),
                    job.op
                ));
            }
            return Ok(out);
        }
        if out.changes.is_empty()
            && out.conflicts.is_empty()
            && job.more_parents.is_empty()
            && job.onto.is_none()
        {
            out.status = Status::UpToDate;
            return Ok(out);
        }
        match graft_result(t, call, job, ours, &merged, &mut out)? {
            true => return Ok(out),
            false => continue,
        }
    }
    Err(Error::Conflict(format!(
        "{}: the workspace kept changing while merging; retry when writers pause",
        job.op
    )))
}

/// Save, graft the merged tree and commit; false when the workspace changed
/// after it was merged (nothing was committed: merge again).
fn graft_result(
    t: &Target,
    call: &Call,
    job: &Job,
    ours: NodeId,
    merged: &merge::Merged,
    out: &mut MergeAnswer,
) -> Result<bool> {
    let txn = txn::Transaction::begin(t, job.op);
    let mut raced = false;
    let mut checkpoint = None;
    let conflicts = &merged.conflicts;
    let r = save_and_graft(
        t,
        &format!("before-{}", job.op),
        &format!("{} of {}", job.op, job.theirs_spec),
        merged.root,
        None,
        &mut |tx, before_root, after_root| {
            if before_root != ours {
                raced = true;
                return Err(Error::Conflict(format!(
                    "{}: the workspace changed while merging",
                    job.op
                )));
            }
            let before = view_of(tx.before(), before_root);
            let stopped = stopped_state(job, tx.before(), before_root, conflicts);
            if conflicts.is_empty() {
                let c =
                    tx.checkpoint_with(&job.message, job.op, &job.more_parents, job.meta.clone())?;
                checkpoint = Some(c.id.to_hex());
            } else {
                let m = merge::stop::encode(&stopped);
                tx.edit(&mut |rec| rec.merging = Some(m.clone()));
            }
            txn.commit(tx, Log::Next, &mut |_, after| {
                let extra = match (conflicts.is_empty(), job.finish_ops) {
                    (true, Some(f)) => f(t, &stopped)?,
                    _ => Vec::new(),
                };
                let mut op = call.op(job.op, before.clone(), view_of(after, after_root));
                op.meta = op_meta(job, conflicts.len());
                Ok((op, extra))
            })
        },
    );
    let (saved, _, op) = match r {
        Err(Error::Conflict(_)) if raced => return Ok(false),
        r => r?,
    };
    out.saved = Saved::of(&saved);
    out.record = Some(op.seq);
    out.checkpoint = checkpoint;
    if out.conflicts.is_empty() {
        out.status = Status::Merged;
    } else {
        out.status = Status::MergeConflict;
        out.next = Some(next_words(job.op, &out.conflicts));
    }
    Ok(true)
}

/// The stopped state a conflicted landing records.
fn stopped_state(
    job: &Job,
    before: &SessionRecord,
    before_root: NodeId,
    conflicts: &[Conflict],
) -> Stop {
    Stop {
        op: job.op.to_string(),
        theirs: job.theirs_spec.clone(),
        theirs_id: job.more_parents.first().copied().or(job.theirs_id),
        parents: job.more_parents.clone(),
        before: before.head,
        before_root,
        message: job.message.clone(),
        conflicts: conflicts.to_vec(),
        onto: job.onto.clone(),
    }
}

fn op_meta(job: &Job, conflicts: usize) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("theirs".into(), job.theirs_spec.clone().into());
    if let Some(b) = &job.base {
        m.insert("base".into(), b.clone().into());
    }
    m.insert("conflicts".into(), conflicts.into());
    // The checkpoint merged (picked, reverted), for the row that shows it.
    if let Some(id) = job.more_parents.first().copied().or(job.theirs_id) {
        m.insert("theirs_id".into(), id.to_hex().into());
    }
    if let Some(n) = job.meta.get("reverts_exec") {
        m.insert("reverts_exec".into(), n.clone());
    }
    m
}
