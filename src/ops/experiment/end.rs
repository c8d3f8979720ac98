//! `experiment_end`: take each fork's final state (a checkpoint of the fork), rank
//! the runs, compare them pairwise, record one `experiment` operation in the source
//! session's log (one batch; the start is `experiment-begin`'s record), then (unless `keep`) unmount the forks and remove all but the
//! winner's (kept, unmounted, until it is adopted). With `abort` (the CLI was
//! interrupted) every fork is removed.
//!
//! Pairwise file-tree diffs are computed here, while every fork's final tree is
//! certainly in the store, and stored in the record (at most [`MAX_TREE_DIFF`]
//! entries a pair); output diffs are recomputed from the stored results whenever
//! the experiment is shown.

use std::collections::BTreeSet;
use std::sync::MutexGuard;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::answer::{
    Cleanup, CleanupError, Comparison, FileDiff, KeptFork, Pair, Recorded, RunEntry,
};
use super::compare::{self, RankBy};
use super::{KIND, forks, recorded};
use crate::command::wire::{RunResult, check_result};
use crate::diff::{self, Change, DiffEntry};
use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::oplog::Actor;
use crate::ops::spawn::{self, Removing};
use crate::ops::txn;
use crate::ops::{Host, Target, ref_or_fresh};
use crate::refs;
use crate::refs::origin::ExperimentRun;
use crate::session::SessionRecord;
use crate::store::ObjectStore;
use crate::tree::{Content, Record};

/// Most file-tree diff entries stored per pair of runs.
pub const MAX_TREE_DIFF: usize = 1000;

/// Finish an experiment: record every run's result as one operation and remove
/// the forks (all but the winner's, unless `keep`; all with `abort`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentEnd {
    /// The experiment id (from `experiment_begin`).
    pub id: String,
    /// What each run did.
    #[serde(default)]
    pub results: Vec<RunResult>,
    /// `exit`, `duration`, `output` or `score` (default: exit 0 first, then duration).
    #[serde(default)]
    pub rank_by: Option<String>,
    /// Leave every fork mounted.
    #[serde(default)]
    pub keep: bool,
    /// The experiment was interrupted: remove every fork.
    #[serde(default)]
    pub abort: bool,
    /// The signal that interrupted it (with `abort`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<i32>,
}

/// One run's fork at the end.
struct Final {
    rec: SessionRecord,
    checkpoint: CheckpointId,
    root: NodeId,
    files_changed: u64,
    score_files_changed: Option<u64>,
}

/// Record the experiment and clean up its forks.
pub fn end<H: Host>(
    h: &H,
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    actor: &Actor,
    mut req: ExperimentEnd,
) -> Result<Comparison> {
    super::check_id(&req.id)?;
    let by = RankBy::parse(req.rank_by.as_deref())?;
    let s = &t.session;
    let store = h.store();
    let forks = forks(&*store, s.name(), &req.id)?;
    if forks.is_empty() {
        return Err(Error::NotFound(format!(
            "session {} has no running experiment {}",
            s.name(),
            req.id
        )));
    }
    if recorded(&*store, s.name(), Some(&req.id))?.is_some() {
        return Err(Error::Conflict(format!(
            "experiment {} has already ended",
            req.id
        )));
    }
    drop(op_lock);
    let results = complete_results(std::mem::take(&mut req.results), &forks)?;
    let finals = forks
        .iter()
        .map(|(run, rec)| final_state(h, &*store, *run, rec, run_checkpoint(&results, *run)))
        .collect::<Result<Vec<_>>>()?;
    let ranking = compare::rank(&results, by);
    let winner = compare::winner(&results, &ranking).filter(|_| !req.abort);
    let pairs = tree_pairs(&*store, &results, &finals)?;
    let runs: Vec<RunEntry> = results
        .iter()
        .zip(&finals)
        .map(|(r, f)| run_entry(r, f))
        .collect::<Result<_>>()?;
    let first = &forks[0].1;
    let doc = Recorded {
        id: req.id.clone(),
        source: s.name().to_string(),
        base: run_of(first)?.base.to_hex(),
        cwd: run_of(first)?.cwd.clone(),
        rank_by: by,
        keep: req.keep,
        aborted: req.abort,
        interrupted_by: req.interrupted_by.filter(|_| req.abort),
        runs,
        decided_by: compare::decided_by(&results, &ranking, by, winner),
        ranking,
        winner,
        stats: compare::stats(&results),
        pairs,
    };
    let meta = match serde_json::to_value(&doc) {
        Ok(Value::Object(m)) => m,
        _ => unreachable!("a struct serializes to an object"),
    };
    let request = json!({"op": "experiment_end", "id": req.id, "rank_by": by, "keep": req.keep});
    // One batch of the source: the record (its state as it is now on both sides:
    // the experiment's own state change, the checkpoint the runs started from,
    // is `experiment-begin`'s record).
    // The forks that go are unmounted and claimed first, and deleted in it.
    let mut removing = Removing::new(h, "experiment");
    let mut cleanup = take_forks(h, s.name(), &forks, winner, &req, &mut removing);
    let again = || match recorded(&*store, s.name(), Some(&req.id))? {
        Some(_) => Err(Error::Conflict(format!(
            "experiment {} has already ended",
            req.id
        ))),
        None => Ok(()),
    };
    let extra = removing.ops()?;
    let rec = txn::record_result(t, actor, KIND, request, meta, extra, &again)?;
    cleanup.removed = removing.names();
    let mut out = doc.answer(rec.seq);
    out.cleanup = Some(cleanup);
    Ok(out)
}

/// The experiment run fork `rec` is (`forks` names only those).
fn run_of(rec: &SessionRecord) -> Result<&ExperimentRun> {
    rec.origin
        .as_ref()
        .and_then(|o| o.experiment())
        .ok_or_else(|| {
            Error::corrupt(
                format!("session record {}", rec.name),
                "an experiment's fork whose origin is not an experiment run",
            )
        })
}

/// Every fork's result, in run order: those reported (checked, each run at most
/// once), and for a run without one, a result saying so.
fn complete_results(got: Vec<RunResult>, forks: &[(u32, SessionRecord)]) -> Result<Vec<RunResult>> {
    let runs: BTreeSet<u32> = forks.iter().map(|(r, _)| *r).collect();
    let mut seen = BTreeSet::new();
    for r in &got {
        check_result(r)?;
        if !runs.contains(&r.run) || !seen.insert(r.run) {
            return Err(Error::Invalid(format!(
                "result for run {}: no such run, or reported twice",
                r.run
            )));
        }
    }
    let mut out: Vec<RunResult> = runs
        .iter()
        .map(|&run| {
            got.iter()
                .find(|r| r.run == run)
                .cloned()
                .unwrap_or_else(|| RunResult {
                    run,
                    error: Some("no result was reported for this run".into()),
                    ..RunResult::default()
                })
        })
        .collect();
    out.sort_by_key(|r| r.run);
    Ok(out)
}

/// A fork's final state: a checkpoint of its live tree (when mounted; its HEAD
/// otherwise, e.g. after a daemon restart), and how many paths differ from the base.
fn final_state<H: Host>(
    h: &H,
    store: &dyn ObjectStore,
    run: u32,
    rec: &SessionRecord,
    before_score: Option<&str>,
) -> Result<Final> {
    let msg = format!("experiment run {run}");
    let c = match h.target(Some(&rec.name)) {
        Ok(ft) => {
            let _l = ft.session.op_lock.lock().unwrap_or_else(|p| p.into_inner());
            let actor = crate::oplog::Actor::daemon();
            let call = crate::ops::Call {
                actor: &actor,
                explanation: None,
                request: json!({"op": "checkpoint", "trigger": "experiment", "message": msg}),
            };
            ref_or_fresh(&ft, &call, None, &msg, "experiment")?
        }
        Err(_) => refs::resolve(store, rec.head, "HEAD")?,
    };
    let root = c.root;
    let base = run_of(rec)?.base.to_hex();
    let base_root = refs::resolve(store, None, &base)?.root;
    // The run's own changes end where the CLI checkpointed the fork before the
    // score command: only a checkpoint of this very fork counts (the client's
    // word: one that names nothing is ignored; one that does not read fails).
    let mid = match before_score.map(|hex| refs::resolve(store, None, hex)) {
        Some(Ok(m)) if m.session == rec.name => Some(m),
        Some(Err(e)) if !matches!(e, Error::NotFound(_) | Error::Invalid(_)) => return Err(e),
        _ => None,
    };
    let (files_changed, score_files_changed) = match mid {
        Some(m) => (
            diff::diff_count(store, base_root, m.root)?,
            Some(diff::diff_count(store, m.root, root)?),
        ),
        None => (diff::diff_count(store, base_root, root)?, None),
    };
    Ok(Final {
        rec: rec.clone(),
        checkpoint: c.id,
        root,
        files_changed,
        score_files_changed,
    })
}

/// The checkpoint the CLI reported for run `run` before its score command.
fn run_checkpoint(results: &[RunResult], run: u32) -> Option<&str> {
    results
        .iter()
        .find(|r| r.run == run)
        .and_then(|r| r.run_checkpoint.as_deref())
}

/// A run's stored entry: its result and its fork's facts (from the fork's
/// record's origin, written by `begin`).
fn run_entry(r: &RunResult, f: &Final) -> Result<RunEntry> {
    let run = run_of(&f.rec)?;
    let command = serde_json::from_value(run.command.clone()).map_err(|e| {
        Error::corrupt(
            format!("session record {}", f.rec.name),
            format!("experiment run command: {e}"),
        )
    })?;
    Ok(RunEntry {
        result: r.clone(),
        label: run.label.clone(),
        command,
        env: run.env.clone(),
        fork: f.rec.name.clone(),
        checkpoint: f.checkpoint.to_hex(),
        files_changed: f.files_changed,
        score_files_changed: f.score_files_changed,
    })
}

/// A file's content hash in a diff: the stored node id, or blake3 of a symlink's
/// target; `None` for no content (empty file, directory entry without node).
fn hash_of(r: Option<&Record>) -> Option<String> {
    match &r?.content {
        Content::Node(id) => Some(id.to_hex()),
        Content::Bytes(b) => Some(blake3::hash(b).to_hex().to_string()),
        Content::None => None,
    }
}

fn file_diff(e: &DiffEntry) -> FileDiff {
    let kind = match e.change {
        Change::Added => "added",
        Change::Deleted => "removed",
        _ => "modified",
    };
    FileDiff {
        path: e.path_str(),
        kind: kind.into(),
        a_hash: hash_of(e.old.as_ref()),
        b_hash: hash_of(e.new.as_ref()),
    }
}

/// For each pair of runs (a < b): the file-tree diff between their final states.
fn tree_pairs(
    store: &dyn ObjectStore,
    results: &[RunResult],
    finals: &[Final],
) -> Result<Vec<Pair>> {
    let mut out = Vec::new();
    for (i, j) in compare::pairs(results) {
        let mut files = Vec::new();
        let mut truncated = false;
        diff::diff_walk(
            store,
            finals[i].root,
            finals[j].root,
            &mut |e: DiffEntry| {
                if files.len() == MAX_TREE_DIFF {
                    truncated = true;
                    return false;
                }
                files.push(file_diff(&e));
                true
            },
        )?;
        out.push(Pair {
            a: results[i].run,
            b: results[j].run,
            files,
            files_truncated: truncated,
            output: None,
        });
    }
    Ok(out)
}

/// Which forks stay and which go once experiment `req` is recorded: every fork
/// stays (mounted) with `keep`; else the winner's stays, unmounted, and the others
/// are unmounted and claimed into `removing`, for the record's batch to delete
/// (`removed` is filled in after it). A fork that cannot be unmounted or claimed
/// stays, with its error.
fn take_forks<'h, H: Host>(
    h: &'h H,
    session: &str,
    forks: &[(u32, SessionRecord)],
    winner: Option<u32>,
    req: &ExperimentEnd,
    removing: &mut Removing<'h, H>,
) -> Cleanup {
    let mut kept = Vec::new();
    let mut errors = Vec::new();
    if req.keep && !req.abort {
        kept.extend(forks.iter().map(|(_, r)| r.name.clone()));
    } else {
        for (run, rec) in forks {
            let keep = winner == Some(*run) && !req.abort;
            let r = if keep {
                spawn::unmount(h, &rec.name)
            } else {
                let ours = |r: &SessionRecord| super::run_of_fork(r, session, &req.id).is_some();
                removing.take(&rec.name, &ours)
            };
            match r {
                Ok(()) if keep => kept.push(rec.name.clone()),
                Ok(()) => {}
                Err(e) => errors.push(CleanupError {
                    fork: rec.name.clone(),
                    error: e.to_string(),
                }),
            }
        }
    }
    let kept_at = kept
        .iter()
        .map(|f| KeptFork {
            fork: f.clone(),
            mountpoint: h
                .target(Some(f))
                .ok()
                .map(|t| t.mountpoint.display().to_string()),
        })
        .collect();
    Cleanup {
        removed: Vec::new(),
        kept,
        errors,
        kept_at,
    }
}
