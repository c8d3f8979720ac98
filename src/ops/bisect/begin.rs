//! `bisect_begin`: make and mount one fork per candidate checkpoint of a bisect.
//!
//! Order (as `experiment_begin`, through `crate::ops::spawn::Spawn`): check the
//! request; resolve every checkpoint (in the caller's scope); claim every fork
//! name, refuse existing records and open (create) every mountpoint; write all
//! records and lineage keys in one batch; release the source's op lock; mount
//! each. A failure at any step removes what this request made. Nothing is
//! recorded in the operation log (the result is, at `bisect_end`).
//!
//! With `search` the daemon keeps the search (`ops::bisect::searching`): it finds the
//! candidates itself, chooses the first round's and stores the search state in
//! the same commit as those forks' records ([`make`] takes the extra ops).

use std::path::{Path, PathBuf};
use std::sync::MutexGuard;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::state::PendingFork;
use super::{MAX_N, check_id, fork_name, forks};
pub use crate::command::bisect::BisectFork;
use crate::command::bisect::{SearchSpec, Stepped};
use crate::control::MountFor;
use crate::error::{Error, Result};
use crate::meta::MetaOp;
use crate::ops::forkdir::{check_cwd, forks_dir_for};
use crate::ops::spawn::Spawn;
use crate::ops::{Host, Target, refctx};
use crate::refs::origin::{BisectCandidate, Origin};
use crate::session::{self, SessionRecord};

/// Most forks of one bisect alive at once.
pub const MAX_LIVE: usize = 1024;

/// Make and mount one fork per checkpoint of a bisect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BisectBegin {
    /// The bisect to add forks to (absent: a new bisect, its id chosen here).
    #[serde(default)]
    pub id: Option<String>,
    /// The checkpoints to fork (ids; at least one, at most the
    /// `experiment_max_runs` setting). None with `search`.
    #[serde(default)]
    pub checkpoints: Vec<String>,
    /// The forks' numbers `n` (names `S-bID-n`), one per checkpoint: the
    /// candidates' positions (default: counting on from the highest live fork's).
    #[serde(default)]
    pub numbers: Option<Vec<u32>>,
    /// The caller's directory relative to the workspace root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The directory (absolute) under which the forks' directory
    /// `<workspace name>.bisect` is made (default: the session's `forks_dir`
    /// setting, else the workspace's parent). Refused on an agent socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forks_dir: Option<PathBuf>,
    /// Start a search the daemon keeps (no `id`, `checkpoints` nor `numbers`):
    /// it finds the candidates, makes the first round's forks and answers what
    /// to run (`search` in the answer); then `bisect_step` per round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchSpec>,
}

/// The answer to `bisect_begin`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BisectBegun {
    /// The bisect id (send it with the next `bisect_begin` and `bisect_end`).
    pub id: String,
    /// One mounted fork per checkpoint, in request order.
    pub forks: Vec<BisectFork>,
    /// With `search`: the range and the first round to run (`next.kind` is
    /// `test`, its forks those above; or the search is over at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Box<Stepped>>,
}

/// The numbers of the forks asked: given (distinct, bounded, one per
/// checkpoint) or counting on from the highest live fork's.
fn numbers(req: &BisectBegin, live: &[(u32, SessionRecord)]) -> Result<Vec<u32>> {
    let k = req.checkpoints.len();
    let ns = match &req.numbers {
        Some(ns) => ns.clone(),
        None => {
            let from = live.iter().map(|(n, _)| n + 1).max().unwrap_or(1);
            (from..).take(k).collect()
        }
    };
    let mut seen = std::collections::BTreeSet::new();
    let ok = ns.len() == k && ns.iter().all(|n| *n <= MAX_N && seen.insert(*n));
    if !ok {
        return Err(Error::Invalid(format!(
            "numbers: one distinct number (at most {MAX_N}) per checkpoint"
        )));
    }
    if let Some((n, r)) = live.iter().find(|(n, _)| seen.contains(n)) {
        return Err(Error::Conflict(format!(
            "fork {n} of this bisect exists already ({})",
            r.name
        )));
    }
    Ok(ns)
}

/// Check the request's bounds: at least one checkpoint, at most the session's
/// `experiment_max_runs` per request and [`MAX_LIVE`] alive, the agent quota.
fn check(t: &Target, req: &BisectBegin, live: usize, by_agent: bool) -> Result<()> {
    let max = t.session.record().config.experiment_max_runs;
    let k = req.checkpoints.len();
    if k == 0 {
        return Err(Error::Invalid(
            "bisect_begin needs at least one checkpoint".into(),
        ));
    }
    if k as u64 > max {
        return Err(Error::Invalid(format!(
            "{k} forks asked; at most {max} per request (setting experiment_max_runs)"
        )));
    }
    if live + k > MAX_LIVE {
        return Err(Error::Invalid(format!(
            "this bisect has {live} forks; at most {MAX_LIVE} at once"
        )));
    }
    if by_agent {
        let store = t.session.store();
        crate::quota::check_agent_sessions(&**store, t.session.name(), k as u64)?;
    }
    check_cwd(req.cwd.as_deref())
}

/// `bisect_begin` without `search`: the forks asked.
pub fn begin<H: Host>(
    h: &H,
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    who: MountFor,
    req: &BisectBegin,
    by_agent: bool,
) -> Result<BisectBegun> {
    let id = match &req.id {
        Some(id) => id.clone(),
        None => crate::ops::experiment::new_id(),
    };
    let forks = make(h, t, op_lock, who, &id, req, by_agent, |_| Ok(Vec::new()))?;
    Ok(BisectBegun {
        id,
        forks,
        search: None,
    })
}

/// Make and mount the forks `req` asks for bisect `id`; `extra` gives the ops
/// committed with their records (a search's state, from the forks it names).
#[allow(clippy::too_many_arguments)]
pub(super) fn make<H: Host>(
    h: &H,
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    who: MountFor,
    id: &str,
    req: &BisectBegin,
    by_agent: bool,
    extra: impl FnOnce(&[PendingFork]) -> Result<Vec<MetaOp>>,
) -> Result<Vec<BisectFork>> {
    let s = &t.session;
    let store = h.store();
    check_id(id)?;
    let live = forks(&*store, s.name(), id)?;
    check(t, req, live.len(), by_agent)?;
    let ns = numbers(req, &live)?;
    let dir = forks_dir_for(t, req.forks_dir.as_deref(), "bisect")?;
    let mut spawn = Spawn::new(h, "bisect");
    // (On any failure the spawn takes back what it made, then the directories go.)
    let (made, checkpoints) = match prepare(t, &mut spawn, &dir, id, req, &ns, who, by_agent) {
        Ok(m) => m,
        Err(e) => {
            drop(spawn);
            remove_dirs(&dir, s.name(), id, &ns);
            return Err(e);
        }
    };
    let committed = spawn.ops().and_then(|mut ops| {
        ops.extend(extra(&made)?);
        store.commit(ops)
    });
    if let Err(e) = committed {
        drop(spawn);
        remove_dirs(&dir, s.name(), id, &ns);
        return Err(e);
    }
    spawn.committed();
    drop(op_lock);
    if let Err(e) = spawn.mount() {
        remove_dirs(&dir, s.name(), id, &ns);
        return Err(e);
    }
    Ok(made
        .into_iter()
        .zip(checkpoints)
        .map(|(p, checkpoint)| BisectFork {
            n: p.n,
            checkpoint,
            session: p.session,
            mountpoint: p.mountpoint,
        })
        .collect())
}

/// Resolve every checkpoint and, through `spawn`, claim every fork name, refuse
/// existing records, open every mountpoint and build every record.
#[allow(clippy::too_many_arguments)]
fn prepare<H: Host>(
    t: &Target,
    spawn: &mut Spawn<'_, H>,
    dir: &Path,
    id: &str,
    req: &BisectBegin,
    ns: &[u32],
    who: MountFor,
    by_agent: bool,
) -> Result<(Vec<PendingFork>, Vec<String>)> {
    let s = &t.session;
    let mut made = Vec::new();
    let mut checkpoints = Vec::new();
    for (&n, spec) in ns.iter().zip(&req.checkpoints) {
        let c = refctx::resolve(t, spec)?;
        let name = fork_name(s.name(), id, n);
        let mp = dir.join(&name);
        let i = spawn.claim(&name, &mp, who)?;
        let (bytes, inodes) = c.usage.map_or(s.usage(), |u| (u.bytes, u.inodes));
        let mut rec = session::new_record(&name, c.root, bytes, inodes)?;
        rec.head = Some(c.id);
        rec.config = s.record().config;
        let origin = Origin::Bisect(BisectCandidate {
            id: id.to_string(),
            source: s.name().to_string(),
            n,
            checkpoint: c.id,
            cwd: req.cwd.clone(),
            dir: dir.to_path_buf(),
        });
        if by_agent {
            rec.meta
                .insert(crate::quota::AGENT_OF.into(), json!(s.name()));
        }
        spawn.set(i, rec, origin, None);
        made.push(PendingFork {
            n,
            session: name,
            mountpoint: mp,
        });
        checkpoints.push(c.id.to_hex());
    }
    Ok((made, checkpoints))
}

/// Remove the (empty) mountpoints of these forks, and their directory once empty
/// (never through a symbolic link).
fn remove_dirs(dir: &Path, session: &str, id: &str, ns: &[u32]) {
    let names = ns.iter().map(|n| fork_name(session, id, *n));
    crate::ops::forkdir::remove_forks_dirs(dir, names);
}
