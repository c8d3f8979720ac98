//! `experiment_begin`: save the session's state, create one fork per run from it,
//! mount each on a directory the daemon makes, answer the forks.
//!
//! Order (as `fork`, for N names at once): check the request; take the view
//! before, checkpoint (or resolve `from`), take the view after; claim every fork
//! name and refuse existing records; open (create) every mountpoint; write all
//! records in one commit; release the source's op lock; mount each. A failure at
//! any step removes what this request made (unmounting the forks already mounted).
//! Forks are root swaps: no tree is copied, so setup is one record write and one
//! mount per run.

use std::path::{Component, Path, PathBuf};
use std::sync::MutexGuard;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{META_KEY, check_id, fork_name, new_id};
use crate::command::wire::{RunCommand, RunSpec, check_spec};
use crate::control::MountFor;
use crate::error::{Error, Result};
use crate::meta::MetaOp;
use crate::ops::record::view_now;
use crate::ops::{Host, Target, ref_or_fresh};
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

/// Longest `cwd`.
const MAX_CWD: usize = 4096;

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

/// A `cwd` from a request: relative, inside the workspace, without `..`.
pub(crate) fn check_cwd(cwd: Option<&str>) -> Result<()> {
    if let Some(cwd) = cwd {
        let p = Path::new(cwd);
        let ok = cwd.len() <= MAX_CWD
            && !cwd.contains('\0')
            && p.components().all(|c| matches!(c, Component::Normal(_)));
        if !ok {
            return Err(Error::Invalid(format!(
                "cwd {cwd:?} must be a relative path inside the workspace"
            )));
        }
    }
    Ok(())
}

/// Where the forks of the session `t` go: `<base>/<name>.experiments`
/// ([`forks_dir_for`]).
pub(super) fn forks_dir(t: &Target, asked: Option<&Path>) -> Result<PathBuf> {
    forks_dir_for(t, asked, "experiments")
}

/// Longest forks directory (asked or set).
const MAX_FORKS_DIR: usize = 4096;

/// `<base>/<name>.<what>` (`what`: `experiments`, `bisect`): where the forks of
/// the session `t` (mounted at `.../<name>`) go. `base` is `asked` (a request of
/// the user socket: agents may not choose), else the session's `forks_dir`
/// setting, else the workspace's parent. No component is added that starts with
/// a dot, so a program in a fork sees no dot-directory the workspace has not.
/// A chosen base must be absolute, without `.` or `..`.
pub(crate) fn forks_dir_for(t: &Target, asked: Option<&Path>, what: &str) -> Result<PathBuf> {
    let mp = &t.mountpoint;
    let set = t.session.record().config.forks_dir;
    let chosen = asked
        .map(|p| (p.to_path_buf(), "--forks-dir"))
        .or_else(|| (!set.is_empty()).then(|| (PathBuf::from(&set), "setting forks_dir")));
    let base = match chosen {
        Some((p, what)) => {
            check_forks_base(&p, what)?;
            p
        }
        None => mp.parent().map(Path::to_path_buf).ok_or_else(|| {
            Error::Invalid(format!(
                "the workspace at {} has no parent directory for its forks",
                mp.display()
            ))
        })?,
    };
    let Some(name) = mp.file_name() else {
        return Err(Error::Invalid(format!(
            "the workspace at {} has no name to name its forks' directory",
            mp.display()
        )));
    };
    let mut n = name.to_os_string();
    n.push(".");
    n.push(what);
    Ok(base.join(n))
}

/// A forks directory asked or set: absolute, only normal components, bounded.
pub(crate) fn check_forks_base(p: &Path, what: &str) -> Result<()> {
    let s = p.as_os_str();
    let ok = p.is_absolute()
        && s.len() <= MAX_FORKS_DIR
        && !s.as_encoded_bytes().contains(&0)
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "{what} {}: give an absolute directory without `.` or `..`",
            p.display()
        )))
    }
}

/// A fork prepared (claimed, record built, mountpoint open), not yet mounted.
struct Prepared<D> {
    rec: SessionRecord,
    dir: D,
    mp: PathBuf,
}

/// Create the forks of an experiment and mount them.
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
    call: &crate::ops::Call,
) -> Result<Begun> {
    let by_agent = call.actor.is_agent();
    check(t, req, by_agent)?;
    let s = &t.session;
    let store = h.store();
    let before = view_now(t)?;
    let c = ref_or_fresh(t, call, req.from.as_deref(), "experiment", "experiment")?;
    let after = view_now(t)?;
    let dir = forks_dir(t, req.forks_dir.as_deref())?;
    let id = new_id();
    check_id(&id)?;
    let n = req.runs.len() as u32;
    let data = json!({
        "id": id, "source": s.name(), "runs": n, "base": c.id, "cwd": req.cwd,
        "before": before, "after": after, "dir": dir,
    });
    let mut claims = Vec::new();
    let made = match prepare(h, t, &c, &dir, &id, req, by_agent, data, who, &mut claims) {
        Ok(m) => m,
        Err(e) => {
            remove_dirs(&dir, s.name(), &id, n);
            return Err(e);
        }
    };
    // Each run is of the source's lineage: its agent sees the runs' history.
    let ops: Vec<MetaOp> = made
        .iter()
        .flat_map(|p| {
            [
                session::record_op(&p.rec),
                crate::visibility::lineage_op(s.name(), &p.rec.name),
            ]
        })
        .collect();
    if let Err(e) = store.commit(ops) {
        remove_dirs(&dir, s.name(), &id, n);
        return Err(e);
    }
    drop(op_lock);
    let mut forks = Vec::new();
    let mut mounted: Vec<(String, PathBuf)> = Vec::new();
    for (p, (claim, spec)) in made.into_iter().zip(claims.iter_mut().zip(&req.runs)) {
        let name = p.rec.name.clone();
        if let Err(e) = h.mount_claimed(claim, p.dir, p.rec, None) {
            undo_begin(h, s.name(), &id, &mounted, n);
            drop(claims);
            remove_dirs(&dir, s.name(), &id, n);
            return Err(e);
        }
        forks.push(ForkMade {
            run: forks.len() as u32 + 1,
            label: spec.label.clone(),
            name: name.clone(),
            mountpoint: p.mp.clone(),
            command: spec.command.clone(),
            env: spec.env.clone(),
        });
        mounted.push((name, p.mp));
    }
    Ok(Begun {
        id,
        base: c.id.to_hex(),
        cwd: req.cwd.clone(),
        forks,
    })
}

/// Claim every fork name, refuse existing records, open every mountpoint and
/// build every record (`data`: the experiment's part of each fork's meta).
#[allow(clippy::too_many_arguments)]
fn prepare<'h, H: Host>(
    h: &'h H,
    t: &Target,
    c: &crate::refs::Checkpoint,
    dir: &Path,
    id: &str,
    req: &ExperimentBegin,
    by_agent: bool,
    data: Value,
    who: MountFor,
    claims: &mut Vec<H::Claim<'h>>,
) -> Result<Vec<Prepared<H::Dir>>> {
    let s = &t.session;
    let store = h.store();
    let mut made = Vec::new();
    for (i, spec) in (1..).zip(&req.runs) {
        let name = fork_name(s.name(), id, i);
        session::validate_session_name(&name)?;
        let claim = h
            .claim(&name)
            .map_err(|e| Error::Conflict(format!("session {name} already exists ({e})")))?;
        claims.push(claim);
        if session::load_record(&*store, &name)?.is_some() {
            return Err(Error::Conflict(format!("session {name} already exists")));
        }
        let mp = dir.join(&name);
        let md = h.open_mountpoint(&mp, who)?;
        let (bytes, inodes) = c.usage.map_or(s.usage(), |u| (u.bytes, u.inodes));
        let mut rec = session::new_record(&name, c.root, bytes, inodes)?;
        rec.head = Some(c.id);
        rec.config = s.record().config;
        let mut m = data.clone();
        m["run"] = json!(i);
        m["label"] = json!(spec.label);
        m["command"] = json!(spec.command);
        m["env"] = json!(spec.env);
        rec.meta.insert(META_KEY.into(), m);
        if by_agent {
            rec.meta
                .insert(crate::quota::AGENT_OF.into(), json!(s.name()));
        }
        made.push(Prepared { rec, dir: md, mp });
    }
    Ok(made)
}

/// Remove the (empty) mountpoints of experiment `id`'s forks and their directory
/// (made by this request), each by its name in its parent opened without
/// symbolic links ([`crate::hostdir::remove_empty_dir`]).
pub(super) fn remove_dirs(dir: &Path, session: &str, id: &str, n: u32) {
    let names = (1..=n).map(|i| fork_name(session, id, i));
    remove_forks_dirs(dir, names);
}

/// Remove the (empty) directories `names` of `dir`, then `dir` once empty, never
/// through a symbolic link.
pub(crate) fn remove_forks_dirs(dir: &Path, names: impl Iterator<Item = String>) {
    for n in names {
        remove_empty(&dir.join(n));
    }
    remove_empty(dir);
}

fn remove_empty(p: &Path) {
    if let Err(e) = crate::hostdir::remove_empty_dir(p) {
        log::warn!("cannot remove {}: {e}", p.display());
    }
}

/// Remove what a failed begin made: unmount the forks mounted, delete every
/// record (the claims of the others are still held by the caller).
fn undo_begin<H: Host>(h: &H, session: &str, id: &str, mounted: &[(String, PathBuf)], n: u32) {
    for (name, mp) in mounted {
        if let Err(e) = h.unmount_session(mp) {
            log::error!("experiment {id}: cannot unmount fork {name}: {e}");
        }
    }
    let store = h.store();
    for i in 1..=n {
        let name = fork_name(session, id, i);
        let r = if mounted.iter().any(|(m, _)| *m == name) {
            h.remove_session(&name)
        } else {
            store.commit(vec![
                MetaOp::Delete(crate::meta::session_key(&name)),
                MetaOp::Delete(crate::meta::lineage_key(session, &name)),
            ])
        };
        if let Err(e) = r {
            log::error!("experiment {id}: cannot remove fork {name}: {e}");
        }
    }
}
