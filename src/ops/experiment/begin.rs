//! `experiment_begin`: save the session's state, create one fork per run from it,
//! mount each on a directory the daemon makes, answer the forks.
//!
//! Order (as `fork`, for N names at once, through `crate::ops::spawn::Spawn`):
//! check the request; claim every fork name, refuse existing records and open
//! (create) every mountpoint; then ONE batch of the source: the checkpoint of its
//! pending changes the runs start from (or `from`), every fork's record (with its origin) and
//! lineage, and the `experiment-begin` operation; release the source's op lock;
//! mount each. A failure at any step removes what this request made (the spawn
//! unmounts and removes the forks, then the directories go). Forks are root
//! swaps: no tree is copied, so setup is one batch and one mount per run.

use std::path::{Path, PathBuf};
use std::sync::MutexGuard;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{check_id, fork_name, new_id};
use crate::command::wire::{RunCommand, RunSpec, check_spec};
use crate::control::MountFor;
use crate::error::{Error, Result};
use crate::ops::forkdir::{check_cwd, forks_dir_for, remove_forks_dirs};
use crate::ops::record::{Call, view_of};
use crate::ops::spawn::Spawn;
use crate::ops::txn::{self, Log};
use crate::ops::{Host, Target, syncfs};
use crate::refs::Checkpoint;
use crate::refs::origin::{ExperimentRun, Origin};
use crate::session::{self, SessionRecord};

/// Start an experiment: save the state, create and mount one fork per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentBegin {
    /// Ref to start from (default: the current state, checkpointed).
    #[serde(default)]
    pub from: Option<String>,
    /// The runs (at least one, at most the `experiment_max_runs` setting).
    pub runs: Vec<RunSpec>,
    /// The caller's directory relative to the workspace root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The directory (absolute) under which the forks' directory
    /// `<workspace name>.experiments` is made (default: the session's
    /// `forks_dir` setting, else the workspace's parent). Refused on an agent
    /// socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forks_dir: Option<PathBuf>,
}

/// Check the request: at least one run, at most the session's limit, each run
/// well formed, `cwd` relative without `..`.
fn check(t: &Target, req: &ExperimentBegin, by_agent: bool) -> Result<()> {
    let max = t.session.record().config.experiment_max_runs;
    if req.runs.is_empty() {
        return Err(Error::Invalid(
            "an experiment needs at least one run (-c CMD, or --command CMD with --env)".into(),
        ));
    }
    if req.runs.len() as u64 > max {
        return Err(Error::Invalid(format!(
            "{} runs asked; at most {max} per experiment (setting experiment_max_runs)",
            req.runs.len()
        )));
    }
    let store = t.session.store();
    let limits = crate::quota::load(&**store)?;
    crate::quota::check(
        "experiment_runs",
        limits.experiment_runs,
        0,
        req.runs.len() as u64,
        "runs",
    )?;
    if by_agent {
        crate::quota::check_agent_sessions(&**store, t.session.name(), req.runs.len() as u64)?;
    }
    for (i, r) in req.runs.iter().enumerate() {
        check_spec(i, r)?;
    }
    check_cwd(req.cwd.as_deref())
}

/// Where the forks of the session `t` go: `<base>/<name>.experiments`
/// ([`forks_dir_for`]).
pub(super) fn forks_dir(t: &Target, asked: Option<&Path>) -> Result<PathBuf> {
    forks_dir_for(t, asked, "experiments")
}

/// The answer to `experiment_begin`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Begun {
    /// The experiment id (send it with `experiment_end`).
    pub id: String,
    /// The checkpoint every run starts from (hex).
    pub base: String,
    /// The working directory the runs are given (workspace-relative); `null`: the root.
    pub cwd: Option<String>,
    /// One mounted fork per run, in run order.
    pub forks: Vec<ForkMade>,
}

/// One run's fork, mounted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ForkMade {
    /// Run number (from 1).
    pub run: u32,
    /// The run's label.
    pub label: String,
    /// The fork's session name.
    pub name: String,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// What the run runs.
    pub command: RunCommand,
    /// Environment variables set for it.
    pub env: BTreeMap<String, String>,
}

pub(crate) fn begin<H: Host>(
    h: &H,
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    who: MountFor,
    req: &ExperimentBegin,
    call: &Call,
) -> Result<Begun> {
    check(t, req, call.actor.is_agent())?;
    let s = &t.session;
    let from = req
        .from
        .as_deref()
        .map(|spec| crate::ops::refctx::resolve(t, spec))
        .transpose()?;
    let dir = forks_dir(t, req.forks_dir.as_deref())?;
    let id = new_id();
    check_id(&id)?;
    let n = req.runs.len() as u32;
    let mut spawn = Spawn::new(h, "experiment");
    let base = match commit_begin(t, &mut spawn, call, from, &dir, &id, req, who) {
        Ok(c) => c,
        Err(e) => {
            drop(spawn);
            remove_dirs(&dir, s.name(), &id, n);
            return Err(e);
        }
    };
    drop(op_lock);
    let mounted = match spawn.mount() {
        Ok(m) => m,
        // (The spawn took back every fork it made.)
        Err(e) => {
            remove_dirs(&dir, s.name(), &id, n);
            return Err(e);
        }
    };
    let forks = mounted
        .into_iter()
        .zip(&req.runs)
        .enumerate()
        .map(|(i, (m, spec))| ForkMade {
            run: i as u32 + 1,
            label: spec.label.clone(),
            name: m.session,
            mountpoint: m.mountpoint,
            command: spec.command.clone(),
            env: spec.env.clone(),
        })
        .collect();
    Ok(Begun {
        id,
        base: base.id.to_hex(),
        cwd: req.cwd.clone(),
        forks,
    })
}

/// Claim every fork (name, record, mountpoint) and commit, in ONE batch of the
/// source (`crate::ops::txn`): its pending changes saved as the checkpoint the
/// runs start from (unless `from` names one), every fork's record and lineage,
/// and the `experiment-begin` operation. Returns the checkpoint.
#[allow(clippy::too_many_arguments)]
fn commit_begin<H: Host>(
    t: &Target,
    spawn: &mut Spawn<'_, H>,
    call: &Call,
    from: Option<Checkpoint>,
    dir: &Path,
    id: &str,
    req: &ExperimentBegin,
    who: MountFor,
) -> Result<Checkpoint> {
    let s = &t.session;
    let store = s.store().clone();
    for i in 1..=req.runs.len() as u32 {
        let name = fork_name(s.name(), id, i);
        spawn.claim(&name, &dir.join(&name), who)?;
    }
    syncfs(&t.mount)?;
    let mut tx = s.txn();
    let root = tx.flush()?;
    let mut before = view_of(tx.before(), root);
    if let Some(b) = before.branch.clone() {
        crate::ops::record::touch(&mut before, &*store, &b)?;
    }
    let c = match from {
        Some(c) => c,
        None if tx.record().head.is_none() || tx.has_changes()? => {
            tx.checkpoint_with("experiment", "experiment", &[], serde_json::Map::new())?
        }
        None => crate::ops::refctx::resolve(t, "HEAD")?,
    };
    let mut ops = Vec::new();
    for (i, spec) in req.runs.iter().enumerate() {
        let run = i as u32 + 1;
        let name = fork_name(s.name(), id, run);
        let origin = Origin::Experiment(ExperimentRun {
            id: id.to_string(),
            source: s.name().to_string(),
            run,
            runs: req.runs.len() as u32,
            base: c.id,
            cwd: req.cwd.clone(),
            dir: dir.to_path_buf(),
            label: spec.label.clone(),
            command: json!(spec.command),
            env: spec.env.clone(),
        });
        let rec = fork_record(t, &c, &name, call.actor.is_agent())?;
        spawn.set(i, rec, origin, None);
    }
    ops.extend(spawn.ops()?);
    let txn = txn::Transaction::begin(t, BEGIN_KIND);
    txn.commit(&mut tx, Log::Next, &mut |_, a| {
        let mut op = call.op(BEGIN_KIND, before.clone(), view_of(a, root));
        op.meta.insert(
            "experiment".into(),
            json!({"id": id, "runs": req.runs.len(), "base": c.id}),
        );
        Ok((op, ops.clone()))
    })?;
    spawn.committed();
    Ok(c)
}

/// The kind of the operation recording an experiment's start.
pub const BEGIN_KIND: &str = "experiment-begin";

/// The record of a run's fork `name`, at checkpoint `c` (its origin is
/// [`Spawn::set`]'s).
fn fork_record(t: &Target, c: &Checkpoint, name: &str, by_agent: bool) -> Result<SessionRecord> {
    let s = &t.session;
    let (bytes, inodes) = c.usage.map_or(s.usage(), |u| (u.bytes, u.inodes));
    let mut rec = session::new_record(name, c.root, bytes, inodes)?;
    rec.head = Some(c.id);
    rec.config = s.record().config;
    if by_agent {
        rec.meta
            .insert(crate::quota::AGENT_OF.into(), json!(s.name()));
    }
    Ok(rec)
}

/// Remove the (empty) mountpoints of experiment `id`'s forks and their directory
/// (made by this request), each by its name in its parent opened without
/// symbolic links ([`crate::hostdir::remove_empty_dir`]).
pub(super) fn remove_dirs(dir: &Path, session: &str, id: &str, n: u32) {
    let names = (1..=n).map(|i| fork_name(session, id, i));
    remove_forks_dirs(dir, names);
}
