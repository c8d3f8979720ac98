//! `experiment_adopt`: bring one run's final state into the session the experiment
//! started from, as a checkout of that run's final checkpoint does: pending changes
//! are saved first (`save_and_graft`), HEAD moves to the run's checkpoint, and an
//! `adopt` operation records the exact views before and after, so `undo` returns
//! to the state before. The saved changes, HEAD, the attached branch's move and
//! the record are one batch (`crate::ops::txn`). Unless the experiment kept its
//! forks, the adopted run's fork is then unmounted and removed (its state lives on
//! as the session's HEAD).

use std::sync::MutexGuard;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{ADOPT_KIND, recorded_or_err};
use crate::diff::Tree;
use crate::error::{Error, Result};
use crate::oplog::{Actor, NewOp, View};
use crate::ops::record::view_of;
use crate::ops::spawn::Removing;
use crate::ops::txn::{Log, Transaction as Txn};
use crate::ops::views::{CheckpointView, Saved};
use crate::ops::{Host, Target, save_and_graft};
use crate::refs;

/// Bring a run's final state into the session (saving pending changes first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentAdopt {
    /// The experiment id (default: the newest).
    #[serde(default)]
    pub id: Option<String>,
    /// The run number.
    #[serde(default)]
    pub run: Option<u32>,
    /// Adopt the winner.
    #[serde(default)]
    pub winner: bool,
}

/// The answer to `experiment_adopt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Adopted {
    /// The experiment.
    pub id: String,
    /// The run adopted.
    pub run: u32,
    /// The run's final checkpoint, now the session's HEAD.
    pub checkpoint: CheckpointView,
    /// Pending changes saved first; `null` when none.
    pub saved: Option<Saved>,
    /// The `adopt` operation (`undo` reverts it).
    pub op: u64,
    /// The run's fork, when the adopt removed it.
    pub removed: Option<String>,
    /// Why the run's fork, which should have gone, was not removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_removed: Option<String>,
}

/// Adopt a run of a recorded experiment.
pub fn adopt<H: Host>(
    h: &H,
    t: &Target,
    _op_lock: &MutexGuard<'_, ()>,
    actor: &Actor,
    req: &ExperimentAdopt,
) -> Result<Adopted> {
    let s = &t.session;
    let store = h.store();
    let op = recorded_or_err(&*store, s.name(), req.id.as_deref())?;
    let field = |v: &serde_json::Value, k: &str| -> Result<String> {
        v[k].as_str().map(str::to_string).ok_or_else(|| {
            Error::corrupt(
                format!("experiment operation {} of session {}", op.seq, s.name()),
                format!("no {k}"),
            )
        })
    };
    let id = field(&serde_json::Value::Object(op.meta.clone()), "id")?;
    let run = match (req.run, req.winner) {
        (Some(r), false) => r,
        (None, true) => op.meta["winner"]
            .as_u64()
            .and_then(|w| u32::try_from(w).ok())
            .ok_or_else(|| {
                Error::NotFound(format!("experiment {id} has no winner (no run exited 0)"))
            })?,
        _ => {
            return Err(Error::Invalid(
                "name one run to adopt, or the winner (not both)".into(),
            ));
        }
    };
    let entry = op.meta["runs"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["run"].as_u64() == Some(u64::from(run))))
        .ok_or_else(|| Error::NotFound(format!("experiment {id} has no run {run}")))?
        .clone();
    // A record written before winners had to succeed may name a failed run.
    let ok = entry["exit"].as_i64() == Some(0)
        && entry["error"].is_null()
        && entry["timed_out"].as_bool() != Some(true);
    if req.winner && !ok {
        return Err(Error::NotFound(format!(
            "experiment {id} has no winner (its recorded winner, run {run}, did not exit 0)"
        )));
    }
    let cid = field(&entry, "checkpoint")?;
    let cid = cid.as_str();
    let gone = || {
        Error::NotFound(format!(
            "run {run} of experiment {id}: its final state is gone (removed with its fork, \
             then reclaimed); only the winner's fork is kept: run with --keep to adopt any run"
        ))
    };
    let c = refs::resolve(&*store, None, cid).map_err(|_| gone())?;
    // A state only the removed fork had is reclaimable: refused even before a gc
    // reclaims it, so the answer does not depend on when gc ran. Until then its
    // checkpoint still reads (diff, show, restore), and the refusal says so.
    let fork = field(&entry, "fork")?;
    let fork = fork.as_str();
    if c.session == fork && crate::session::load_record(&*store, fork)?.is_none() {
        let short = c.id.short();
        return Err(Error::NotFound(format!(
            "run {run} of experiment {id} cannot be adopted: its fork was removed (only the \
             winner's is kept; run with --keep to adopt any run). Until a gc reclaims it, its \
             final checkpoint {short} still reads: `treefork diff {short}`, `treefork show \
             {short}`, `treefork restore {short}`"
        )));
    }
    let root = c.root;
    Tree::load(&*store, root).map_err(|_| gone())?;
    // The adopted run's fork goes (unless the experiment kept its forks): it is
    // unmounted and claimed now and deleted in the adopt's batch.
    // Only a fork of this very run of this experiment (its origin and name):
    // never a session a record, possibly pulled from a remote, merely names.
    let mut removing = Removing::new(h, "experiment");
    let mut not_removed = None;
    let ours =
        |r: &crate::session::SessionRecord| super::run_of_fork(r, s.name(), &id) == Some(run);
    if op.meta["keep"].as_bool() != Some(true)
        && crate::session::load_record(&*store, fork)?.is_some()
        && let Err(e) = removing.take(fork, &ours)
    {
        log::warn!("adopt: fork {fork} not removed: {e}");
        not_removed = Some(e.to_string());
    }
    let removal = removing.ops()?;
    // HEAD moves to the run's state; the branch it is attached to moves with it
    // (guarded by its value; undo moves it back), in the commit under the gate.
    let txn = Txn::begin(t, ADOPT_KIND);
    let (saved, _, rec) = save_and_graft(
        t,
        "before-adopt",
        &format!("adopt of run {run} of experiment {id}"),
        root,
        None,
        &mut |tx, before_root, live| {
            let rec = tx.before().clone();
            let mut before = view_of(&rec, before_root);
            let mut extra = removal.clone();
            let mut after_branch = None;
            if let Some(b) = &rec.branch {
                let key = crate::meta::ref_key(b);
                let raw = store.meta_get(&key)?;
                let old = raw
                    .as_deref()
                    .map(|v| refs::RefRecord::decode(b, v))
                    .transpose()?;
                extra.push(crate::meta::MetaOp::Expect(key, raw));
                extra.push(refs::ref_op(
                    b,
                    &refs::RefRecord {
                        checkpoint: c.id,
                        created: old.as_ref().map_or(0, |r| r.created),
                    },
                ));
                before
                    .branches
                    .insert(b.to_string(), old.map(|r| r.checkpoint));
                after_branch = Some(b.clone());
            }
            tx.set_state(crate::session::snapshot::StateChange {
                head: Some(c.id),
                branch: rec.branch.clone(),
                base: root,
                root: Some(live),
            });
            txn.commit(tx, Log::Next, &mut |_, a| {
                let mut after: View = view_of(a, live);
                if let Some(b) = &after_branch {
                    after.branches.insert(b.to_string(), Some(c.id));
                }
                let request = json!({"op": "experiment_adopt", "id": id, "run": run});
                let mut new = NewOp::new(actor, ADOPT_KIND, request, before.clone(), after);
                new.meta.insert("experiment".into(), json!(id));
                new.meta.insert("run".into(), json!(run));
                Ok((new, extra.clone()))
            })
        },
    )?;
    Ok(Adopted {
        id,
        run,
        checkpoint: CheckpointView::from(&c),
        saved: Saved::of(&saved),
        op: rec.seq,
        removed: removing.names().pop(),
        not_removed,
    })
}
