//! Session operations served on the control sockets: checkpoint, log, status,
//! branches, checkout, restore, fork, diff, config, and automatic checkpoints. One
//! file per verb; this module holds the plumbing they share.
//!
//! Ops reach the daemon only through [`Host`] (find a mounted session, the store,
//! the store-wide name lock, session name claims, mountpoints, mounting), so `ops`
//! never imports `daemon`; and they reach the kernel only through each target's
//! [`Mount`] (`syncfs`, cache invalidations). Both have an in-memory twin in the
//! tests (`memhost`), which runs ops and their model tests without FUSE.
//!
//! Each session op runs under its session's op lock (so a checkout waits for a
//! running checkpoint; `diff` holds it only while resolving its two roots, then
//! walks and streams without it), first pushes the kernel's writeback cache to the daemon with
//! `syncfs(2)` (so what programs wrote is included), and sends kernel cache
//! invalidations after the tree changed, on every path out, errors included (an
//! invalidation produced and not sent leaves the kernel with orphaned node ids).
//!
//! Every successful answer to a session op carries `branch_moved` when someone
//! else moved the session's branch (`status::branch_notice`): a session is never
//! detached silently.
//!
//! Every request carries a [`Scope`] decided by the caller's role: on an agent
//! socket every ref name and id an op resolves (through `refctx`) and the
//! `branches` list are limited to what the session's lineage sees
//! (`crate::visibility`); hidden ones answer like missing ones.
//!
//! Names are created atomically store-wide: a branch under [`Host::name_lock`]
//! (check and write in one critical section), a session by [`Host::claim`] (the
//! daemon's mount table owns each session name from creation to the end of its
//! last flush).

mod auto;
mod branch;
mod checkout;
mod checkpoint;
mod config;
mod diff;
pub mod exec;
pub mod experiment;
mod fork;
mod lifecycle;
mod log;
#[cfg(test)]
mod memhost;
pub mod messages;
#[cfg(test)]
mod model_tests;
mod mount;
mod oplog_list;
pub mod promote;
pub(crate) mod record;
mod refctx;
mod restore;
mod show;
mod status;
mod timeline;
mod undo;

#[cfg(test)]
mod log_reads_tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use serde_json::{Value, json};

pub use auto::auto_checkpoints;
pub use lifecycle::{command_done, command_running, evict_checkpoint, syncfs_at};
pub use mount::{KernelMount, Mount};

use crate::control::{AgentSocket, MountFor, Op};
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::oplog::Actor;
use crate::refs::Checkpoint;
use crate::session::snapshot::Inval;
use crate::session::{Session, SessionRecord};
use crate::store::ObjectStore;
use crate::tree::Timespec;
pub use crate::visibility::Scope;

/// Default number of log entries.
pub const DEFAULT_LOG_LIMIT: usize = 20;

/// A mounted (live) session, as ops see it.
#[derive(Clone)]
pub struct Target {
    /// The session.
    pub session: Arc<Session>,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// The mount: `syncfs` and kernel cache invalidations go through it (a
    /// [`KernelMount`] in the daemon).
    pub mount: Arc<dyn Mount>,
    /// Unix ms of its last automatic checkpoint.
    pub last_auto_ms: Arc<AtomicU64>,
    /// What names and ids resolve to for this request: everything, or (on an
    /// agent socket) what the session's lineage sees. Set by [`run`] from the
    /// caller's role.
    pub scope: Scope,
}

/// What ops need from whoever serves the mounted sessions (the daemon).
pub trait Host {
    /// A checked mountpoint, resolved once.
    type Dir;
    /// A session name owned by the caller until dropped (or mounted).
    type Claim<'a>
    where
        Self: 'a;
    /// The store.
    fn store(&self) -> Arc<dyn ObjectStore>;
    /// The live session `name`, or the only one when `name` is `None`.
    fn target(&self, name: Option<&str>) -> Result<Target>;
    /// Every live session.
    fn live(&self) -> Vec<Target>;
    /// Held while a branch name is checked and written (store-wide).
    fn name_lock(&self) -> std::sync::MutexGuard<'_, ()>;
    /// Own session name `name` (refused while anyone else owns it: mounted,
    /// being mounted, created, unmounted or removed).
    fn claim(&self, name: &str) -> Result<Self::Claim<'_>>;
    /// Resolve and check a mountpoint for `who`, creating it when missing.
    fn open_mountpoint(&self, path: &Path, who: MountFor) -> Result<Self::Dir>;
    /// Mount the session of `rec` (its name claimed by `claim`) on `dir`. On
    /// success the name passes to the mount; on failure the caller still owns it.
    fn mount_claimed(
        &self,
        claim: &mut Self::Claim<'_>,
        dir: Self::Dir,
        rec: SessionRecord,
        agent: Option<AgentSocket>,
    ) -> Result<Value>;
    /// Flush and unmount the live session mounted at `mp`.
    fn unmount_session(&self, mp: &Path) -> Result<()>;
    /// Delete the record of session `name`, which must not be mounted (`session rm`).
    fn remove_session(&self, name: &str) -> Result<()>;
}

/// Whether `op` starts something that appends an operation record: refused on
/// an agent socket once the session's log holds `op_records` records (see
/// `crate::quota`). Ops that finish what was started (`exec_end`,
/// `experiment_end`) and the daemon's own records (automatic checkpoints) are
/// never refused: nothing already made is left unrecorded.
fn records(op: &Op) -> bool {
    matches!(
        op,
        Op::Checkpoint { .. }
            | Op::Branch { .. }
            | Op::Checkout { .. }
            | Op::Undo { .. }
            | Op::Redo { .. }
            | Op::OpRestore { .. }
            | Op::Note { .. }
            | Op::Restore { .. }
            | Op::Fork { .. }
            | Op::Rewind { .. }
            | Op::ExecBegin { .. }
            | Op::ExperimentBegin { .. }
            | Op::ExperimentAdopt { .. }
    )
}

/// Run a session op for a caller `who`, aimed at `session` when given. Event lines
/// (`{"event":...}`, sent before the response) go to `events`: `diff` with
/// `stream` sends each file's patch there.
pub fn run<H: Host>(
    h: &H,
    who: MountFor,
    actor: &Actor,
    explanation: Option<&str>,
    session: Option<&str>,
    op: Op,
    events: &mut dyn FnMut(Value),
) -> Result<Value> {
    let call = record::Call {
        actor,
        explanation: explanation.map(str::to_string),
        request: serde_json::to_value(&op).unwrap_or(Value::Null),
    };
    // What names resolve to for this caller: an agent socket sees its session's
    // lineage only (`crate::visibility`); every resolution below goes through it.
    let scope = if actor.is_agent() {
        Scope::Lineage
    } else {
        Scope::All
    };
    match op {
        Op::Branches if scope == Scope::All => return branch::list(&*h.store(), None),
        Op::BranchShare { name, with } => return branch::share(&*h.store(), &name, &with),
        Op::BranchDelete { name } => {
            let t = h.target(session).ok();
            let _pins = t.as_ref().map(|t| t.session.pin_roots());
            return branch::delete(h, t.as_ref(), &call, &name);
        }
        Op::Continue {
            project,
            name,
            mountpoint,
        } => return messages::continue_session(h, who, &call, &project, &name, &mountpoint),
        _ => {}
    }
    let mut t = h.target(session)?;
    t.scope = scope;
    if actor.is_agent() && records(&op) {
        crate::quota::check_op_records(&*h.store(), t.session.name())?;
    }
    let s = t.session.clone();
    // Until the op's record is committed, the roots its views name stay gc roots.
    let _pins = s.pin_roots();
    s.note_access();
    // The conversation log's appends and reads run without the op lock.
    let op = match messages::unlocked(&t, &call, op)? {
        Ok(v) => return Ok(v),
        Err(op) => op,
    };
    let op_lock = s.op_lock.lock().unwrap();
    let r = session_op(h, who, actor, &call, &t, op_lock, op, events);
    // Whatever the op, the session is told when someone else moved its branch.
    r.map(|mut v| {
        if let (Some(n), Some(m)) = (status::branch_notice(&s), v.as_object_mut()) {
            m.insert("branch_moved".into(), n);
        }
        v
    })
}

/// Run a session op on `t` under its op lock.
#[allow(clippy::too_many_arguments)]
fn session_op<H: Host>(
    h: &H,
    who: MountFor,
    actor: &Actor,
    call: &record::Call,
    t: &Target,
    op_lock: std::sync::MutexGuard<'_, ()>,
    op: Op,
    events: &mut dyn FnMut(Value),
) -> Result<Value> {
    let s = &t.session;
    let t = t.clone();
    match op {
        Op::Branches => branch::list(&*h.store(), refctx::agent_view(&t).as_ref()),
        Op::Checkpoint {
            message,
            trigger,
            meta,
        } => checkpoint::run(&t, call, &message, &trigger, meta),
        Op::Log { limit, from, path } => log::run(&t, limit, from.as_deref(), path.as_deref()),
        Op::Show { target, path } => show::run(&t, op_lock, &target, path.as_deref(), events),
        Op::Status => status::run(&t),
        Op::Branch { name, from } => branch::create(h, &t, call, &name, from.as_deref()),
        Op::BranchRename { old, new } => branch::rename(h, &t, call, &old, &new),
        Op::Checkout { target, create } => {
            checkout::run(h, &t, call, target.as_deref(), create.as_deref())
        }
        Op::Fork {
            name,
            from,
            mountpoint,
            agent_socket,
            agent_uid,
            from_message,
        } => {
            let agent = AgentSocket::from_request(agent_socket, agent_uid)?;
            if from.is_some() && from_message.is_some() {
                return Err(Error::Invalid(
                    "fork takes a ref or a message to start from, not both".into(),
                ));
            }
            let req = fork::Request {
                name: &name,
                from: from.as_deref(),
                mountpoint: &mountpoint,
                agent,
                who,
                from_message: from_message.as_deref(),
            };
            fork::run(h, &t, call, op_lock, req)
        }
        Op::Diff { a, b, mode, stream } => {
            let req = diff::Request {
                a: a.as_deref(),
                b: b.as_deref(),
                mode,
                stream,
            };
            diff::run(&t, op_lock, req, events)
        }
        Op::Restore {
            target,
            paths,
            dry_run,
        } => restore::run(&t, call, &target, &paths, dry_run),
        Op::Config { set } => config::run(&t, call, set),
        Op::Undo { what, if_last } => undo::step(h, &t, call, undo::Way::Undo, what, if_last),
        Op::Redo { what, if_last } => undo::step(h, &t, call, undo::Way::Redo, what, if_last),
        Op::OpRestore { seq, what } => undo::restore(h, &t, call, seq, what),
        Op::OpLog { limit } => oplog_list::run(&t, limit),
        Op::Timeline {
            since,
            actor,
            limit,
        } => timeline::run(&t, since, actor.as_deref(), limit),
        Op::Note { text, kind } => timeline::note(&t, call, kind.as_deref(), &text),
        Op::ExperimentBegin { from, runs, cwd } => {
            let req = experiment::begin::Begin {
                from: from.as_deref(),
                runs: &runs,
                cwd: cwd.as_deref(),
                by_agent: call.actor.is_agent(),
            };
            experiment::begin(h, &t, op_lock, who, req)
        }
        Op::ExperimentEnd {
            id,
            results,
            rank_by,
            keep,
            abort,
        } => {
            let req = experiment::end::End {
                id: &id,
                results,
                rank_by: rank_by.as_deref(),
                keep,
                abort,
            };
            experiment::end(h, &t, op_lock, actor, req)
        }
        Op::ExperimentShow { id } => experiment::show(&*h.store(), s.name(), id.as_deref()),
        Op::ExperimentAdopt { id, run, winner } => {
            let req = experiment::adopt::Adopt {
                id: id.as_deref(),
                run,
                winner,
            };
            experiment::adopt(h, &t, &op_lock, actor, req)
        }
        Op::ExecBegin { argv, cwd } => exec::begin(
            &t,
            actor,
            exec::Begin {
                argv,
                cwd,
                explanation: call.explanation.clone(),
            },
        ),
        Op::ExecOutput { exec, stream, data } => exec::output(&t, exec, &stream, &data),
        Op::ExecEnd {
            exec,
            exit_code,
            signal,
            error,
            pid,
            duration_ms,
            stdout_truncated,
            stderr_truncated,
            timed_out,
        } => {
            let e = exec::Ending {
                exit_code,
                signal,
                error,
                pid,
                duration_ms: Some(duration_ms),
                truncated: [stdout_truncated, stderr_truncated],
                timed_out,
                abandoned: false,
            };
            exec::end(&t, exec, e)
        }
        Op::History { limit } => exec::list(&t, limit),
        Op::HistoryShow { exec } => exec::show(&t, exec),
        Op::Promote {
            paths,
            strategy,
            message,
            dry_run,
            branch,
            onto_head,
            allow_large,
        } => {
            let req = promote::Request {
                paths,
                strategy: promote::Strategy::parse(&strategy)?,
                message,
                dry_run,
                branch,
                onto_head,
                allow_large,
            };
            promote::run(&t, call, req)
        }
        Op::Rewind { to, what, dry_run } => {
            messages::rewind(&t, call, &to, what.as_deref(), dry_run)
        }
        _ => Err(Error::Invalid("not a session operation".into())),
    }
}

/// Push the kernel's dirty pages of the mount `m` to the daemon (for a real
/// mount from a child process, through the mount's identity: see
/// [`crate::fs::outside`]).
fn syncfs(m: &Arc<dyn Mount>) -> Result<()> {
    m.syncfs()
        .map_err(|e| crate::daemon::mount_error(m.path(), e))
}

fn send_invals(t: &Target, inval: Vec<Inval>) {
    crate::failpoint::before_invalidations();
    for i in inval {
        let r = match &i {
            Inval::Entry(parent, name) => t.mount.inval_entry(*parent, name),
            Inval::Inode(ino) => t.mount.inval_inode(*ino),
        };
        if let Err(e) = r {
            // ENOENT: the kernel had nothing cached for it.
            if e.raw_os_error() != Some(libc::ENOENT) {
                ::log::warn!("invalidation {i:?} failed: {e}");
            }
        }
    }
}

fn ckpt_json(c: &Checkpoint) -> Value {
    json!({
        "id": c.id, "short": &c.id[..12], "session": c.session, "root": c.root,
        "parent": c.parent(), "parents": c.parents, "meta": c.meta, "time_ns": c.time_ns.to_string(),
        "time": (c.time_ns / 1_000_000_000) as i64,
        "message": c.message, "trigger": c.trigger, "files_changed": c.files_changed,
    })
}

fn auto_ref(kind: &str) -> String {
    let t = Timespec::now();
    format!("auto/{kind}-{}{:09}", t.sec, t.nsec)
}

type Saved = Option<(Checkpoint, String)>;

fn saved_json(saved: Saved) -> Value {
    json!(saved.map(|(c, r)| json!({"checkpoint": c.id, "ref": r})))
}

/// Save pending changes as a checkpoint beside HEAD under an `auto/...` ref, if
/// there are any (HEAD and the attached branch stay: see `Session::save_side`).
fn save_pending(s: &Session, kind: &str, what: &str) -> Result<Saved> {
    if !s.has_changes()? {
        return Ok(None);
    }
    let name = auto_ref(kind);
    let c = s.save_side(&format!("auto: before {what}"), kind, &name)?;
    Ok(Some((c, name)))
}

/// Save pending changes, then graft `target` — retrying when programs wrote in
/// between, so no acknowledged write is left out of both the saved checkpoint and
/// the new tree. `grafted` runs under the write gate right after the swap, with
/// the root the workspace had before it. Returns the saved checkpoint and how many
/// invalidations were sent.
///
/// The kernel invalidations go out the moment the gate is released, before any
/// commit, on every path (a graft that failed midway changed part of the tree).
/// Until they arrive the kernel may still resolve a replaced path to the old inode
/// (entry TTL one hour), so this window is kept as short as sending them. They
/// cannot be sent under the gate: a FUSE request blocked on it can hold the
/// directory lock or page locks the kernel takes to invalidate (deadlock).
fn save_and_graft(
    t: &Target,
    kind: &str,
    what: &str,
    target: NodeId,
    paths: Option<&[Vec<u8>]>,
    grafted: &mut dyn FnMut(NodeId) -> Result<()>,
) -> Result<(Saved, usize)> {
    let mut saved_any = None;
    for _ in 0..5 {
        // syncfs first: it makes the kernel send writes, which need the gate.
        let t0 = std::time::Instant::now();
        syncfs(&t.mount)?;
        let t_sync = t0.elapsed();
        // Writes wait (a few ms) until the tree is swapped: nothing falls between
        // the save and the graft. The generation check stays as a guard.
        let gate = crate::session::relock(t.session.gate.write());
        let generation = t.session.generation();
        let saved = save_pending(&t.session, kind, what)?;
        if saved.is_some() {
            saved_any = saved;
        }
        // The workspace as it was (saved: a flush now only reads it back).
        let before_root = t.session.flush()?;
        let t_save = t0.elapsed();
        let (inval, r) = t.session.graft(target, paths, Some(generation));
        // What must follow the swap before any write does (checkout's HEAD commit:
        // a write flushed in between would otherwise be overwritten by it).
        let r = r.and_then(|()| grafted(before_root));
        if !inval.is_empty() {
            // Still under the gate: every entry the kernel cached is stale from
            // here on, so no path walk reaches an inode the graft replaced (see
            // `fs::KernelCache`). The per-entry invalidations follow the gate.
            t.mount.inc_epoch();
        }
        drop(gate);
        let n = inval.len();
        send_invals(t, inval);
        ::log::debug!(
            "{what}: syncfs {t_sync:?} save {:?} graft+{n} invalidations {:?}",
            t_save - t_sync,
            t0.elapsed() - t_save
        );
        match r {
            Err(Error::Conflict(_)) if n == 0 => continue,
            Ok(()) => {
                touched_by_graft(t, before_root);
                // The new tree's `.git/HEAD` is no commit made in the workspace.
                auto::git_rebaseline(&t.session);
                return Ok((saved_any, n));
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::Conflict(format!(
        "{what}: the workspace kept changing while being saved; retry when writers pause"
    )))
}

/// Add what a graft changed (the live tree before it against after it) to the
/// session's touched files (best effort: a failure is logged).
fn touched_by_graft(t: &Target, before_root: NodeId) {
    let s = &t.session;
    let r = s.flush().and_then(|after| {
        let store = s.store();
        let changed = crate::diff::diff_roots(&**store, before_root, after)?;
        let ops =
            crate::lifecycle::touched::add_ops(s.name(), changed.iter().map(|e| e.path.as_slice()));
        if ops.is_empty() {
            return Ok(());
        }
        store.commit(ops)
    });
    if let Err(e) = r {
        ::log::error!(
            "session {}: recording touched files of a graft: {e}",
            s.name()
        );
    }
}

/// The checkpoint named by `from`, or (without it) HEAD — checkpointing the live
/// state first when it has changes or the session has no checkpoint yet.
fn ref_or_fresh(
    t: &Target,
    from: Option<&str>,
    message: &str,
    trigger: &str,
) -> Result<Checkpoint> {
    let s = &t.session;
    if let Some(spec) = from {
        return refctx::resolve(t, spec);
    }
    syncfs(&t.mount)?;
    if s.record().head.is_none() || s.has_changes()? {
        s.checkpoint(message, trigger, None)
    } else {
        refctx::resolve(t, "HEAD")
    }
}

fn working_root(t: &Target) -> Result<NodeId> {
    syncfs(&t.mount)?;
    t.session.flush()
}

/// The root of a diff side: a ref, or `WORKING` for the live state.
fn side_root(t: &Target, spec: &str) -> Result<NodeId> {
    if spec == "WORKING" {
        return working_root(t);
    }
    refctx::resolve(t, spec)?.root_id()
}
