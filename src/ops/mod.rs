//! Session operations served on the control sockets: checkpoint, log, status,
//! branches, checkout, restore, fork, diff, config, and automatic checkpoints. One
//! file per verb, each defining the answer type it builds; this module holds the
//! plumbing they share, and [`views`] the answer shapes several of them share.
//!
//! Ops reach the daemon only through [`Host`] (find a mounted session, the store,
//! the store-wide name lock, session name claims, mountpoints, mounting), so `ops`
//! never imports `daemon`; and they reach the kernel only through each target's
//! [`Mount`] (`syncfs`, cache invalidations). Both are defined in [`crate::host`]
//! (below `ops` and `remote`, which use them) and re-exported here. Both have an in-memory twin in the
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
//! (`crate::visibility`); hidden ones answer like missing ones. On an agent
//! socket it also carries the agent's uid ([`Target::agent_uid`]): an op that
//! composes a tree out of parts of several (restore of paths here in
//! `save_and_graft`, merges in `merge`) checks the result with
//! `crate::merge::contain` before anything changes; whole-tree swaps are not
//! checked.
//!
//! Names are created atomically store-wide: a branch under [`Host::name_lock`]
//! (check and write in one critical section), a session by [`Host::claim`] (the
//! daemon's mount table owns each session name from creation to the end of its
//! last flush).

pub(crate) mod auto;
pub mod bisect;
pub mod branch;
pub mod checkout;
pub mod checkpoint;
pub mod config;
pub mod diff;
pub mod exec;
pub mod experiment;
pub mod fork;
pub(crate) mod forkdir;
pub(crate) mod lifecycle;
pub mod log;
#[cfg(test)]
pub(crate) mod memhost;
pub mod merge;
pub mod messages;
pub mod oplog_list;
pub mod oplog_words;
pub mod promote;
pub(crate) mod record;
pub(crate) mod refctx;
pub mod restore;
pub mod show;
pub(crate) mod spawn;
pub mod status;
pub mod timeline;
pub(crate) mod txn;
pub mod undo;
pub mod views;

#[cfg(test)]
mod log_reads_tests;

use std::path::Path;

/// `syncfs` of a target's mount, as the ops call it ([`syncfs_at`]).
use crate::host::syncfs_at as syncfs;
/// The host trait and the mount types, defined below `ops` and `remote` in
/// [`crate::host`]; re-exported so `ops::Host`, `super::Target`, ... keep working.
pub use crate::host::{Host, Mount, Target, syncfs_at};
pub use auto::auto_checkpoints;
pub use lifecycle::{command_running, evict_checkpoint};
pub(crate) use record::Call;
pub(crate) use status::branch_notice;

use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::oplog;
use crate::refs::Checkpoint;
use crate::session::snapshot::Inval;
use crate::tree::Timespec;
pub use crate::visibility::Scope;

/// Default number of log entries.
pub const DEFAULT_LOG_LIMIT: usize = 20;

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

fn auto_ref(kind: &str) -> String {
    let t = Timespec::now();
    format!("auto/{kind}-{}{:09}", t.sec, t.nsec)
}

type Saved = Option<(Checkpoint, String)>;

/// Save pending changes as a checkpoint beside HEAD under an `auto/...` ref, in
/// the batch `tx`, if there are any (HEAD and the attached branch stay: see
/// `session::Txn::save_side`).
fn save_pending(tx: &mut crate::session::Txn<'_>, kind: &str, what: &str) -> Result<Saved> {
    if !tx.has_changes()? {
        return Ok(None);
    }
    // The session's own `auto/...` ref (`refs::names`); answers name it as the
    // session writes it.
    let short = auto_ref(kind);
    let full = crate::refs::names::owned(&tx.record().name, &short);
    let c = tx.save_side(&format!("auto: before {what}"), kind, &full)?;
    Ok(Some((c, short)))
}

/// What an op commits right after its tree swap, under the write gate: given the
/// batch (the saved pending changes and the touched paths in it, its record naming
/// the grafted tree) and the workspace roots before and after the swap, it sets
/// the state change and commits the batch with the operation record
/// ([`txn::Transaction::commit`]).
type Grafted<'a> =
    &'a mut dyn FnMut(&mut crate::session::Txn<'_>, NodeId, NodeId) -> Result<oplog::Operation>;

/// Save pending changes, then graft `target` and commit — retrying when programs
/// wrote in between, so no acknowledged write is left out of both the saved
/// checkpoint and the new tree. Everything durable is ONE batch (see `txn`):
/// the pending changes' checkpoint and its `auto/...` ref, the session record
/// naming the grafted tree, the paths the graft touched, and what `grafted` adds
/// (the state change and the operation record); it is committed under the write
/// gate right after the swap, so a write (and its flush) may only come after it,
/// never be overwritten by it. When the commit fails the graft is undone (the
/// tree before it grafted back) and nothing durable changed. Returns the saved
/// checkpoint, how many invalidations were sent, and the operation record.
///
/// The kernel invalidations go out the moment the gate is released, after the
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
    grafted: Grafted<'_>,
) -> Result<(Saved, usize, oplog::Operation)> {
    for _ in 0..5 {
        // syncfs first: it makes the kernel send writes, which need the gate.
        let t0 = std::time::Instant::now();
        syncfs(&t.mount)?;
        let t_sync = t0.elapsed();
        // Writes wait (a few ms) until the tree is swapped and committed: nothing
        // falls between the save and the graft. The generation check stays as a
        // guard.
        let gate = crate::session::relock(t.session.gate.write());
        let mut tx = t.session.txn();
        let generation = t.session.generation();
        let saved = save_pending(&mut tx, kind, what)?;
        // The workspace as it was (saved: a flush now only reads it back).
        let before_root = tx.flush()?;
        if let (Some(agent), Some(paths)) = (t.agent_uid, paths) {
            contain_paths(t, &mut tx, agent, what, (before_root, target), paths)?;
        }
        let t_save = t0.elapsed();
        let (mut inval, r) = tx.graft(target, paths, Some(generation));
        // A write between the save and the graft: save again (a refused commit is
        // the op's answer, not a reason to retry).
        let raced = matches!(r, Err(Error::Conflict(_)));
        let r = match r {
            Ok(()) => {
                let whole = paths.is_none().then_some(target);
                let r = commit_graft(t, &mut tx, before_root, whole, grafted);
                if r.is_err() {
                    // Nothing was committed: the live tree goes back to what it was.
                    let (back, b) = tx.graft(before_root, paths, None);
                    inval.extend(back);
                    if let Err(e) = b {
                        ::log::error!("{what}: undoing the graft after a failed commit: {e}");
                    }
                }
                r
            }
            Err(e) => Err(e),
        };
        if !inval.is_empty() {
            // Still under the gate: every entry the kernel cached is stale from
            // here on, so no path walk reaches an inode the graft replaced (see
            // `fs::KernelCache`). The per-entry invalidations follow the gate.
            t.mount.inc_epoch();
        }
        drop(tx);
        drop(gate);
        let n = inval.len();
        send_invals(t, inval);
        ::log::debug!(
            "{what}: syncfs {t_sync:?} save {:?} graft+commit+{n} invalidations {:?}",
            t_save - t_sync,
            t0.elapsed() - t_save
        );
        match r {
            Err(Error::Conflict(_)) if raced && n == 0 => continue,
            Ok(op) => {
                // The new tree's `.git/HEAD` is no commit made in the workspace.
                auto::git_rebaseline(&t.session);
                return Ok((saved, n, op));
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::Conflict(format!(
        "{what}: the workspace kept changing while being saved; retry when writers pause"
    )))
}

/// Refuse (before anything changes) an agent's graft of `paths` from `target`
/// into the workspace `before_root` that `merge::contain` forbids: the result is
/// built beside first, from the same tree by the same rules the live graft
/// follows, under the write gate (so no write comes between the check and the
/// graft). A graft of the whole tree is a swap to an existing state: not checked.
fn contain_paths(
    t: &Target,
    tx: &mut crate::session::Txn<'_>,
    agent: u32,
    what: &str,
    (before_root, target): (NodeId, NodeId),
    paths: &[Vec<u8>],
) -> Result<()> {
    let result = tx.build_beside(before_root, &mut |s| s.graft(target, Some(paths), None).1)?;
    let store = t.session.store();
    crate::merge::contain::check(&**store, agent, what, before_root, result, &[target])
}

/// After a successful graft: make the batch's record name the grafted tree, add
/// the paths the graft changed ([`touched_by_graft`]), and let the op commit.
///
/// A whole-tree graft (`whole`: its target) leaves the live table equal in
/// content to the target, so the record names the target itself and nothing is
/// encoded here: the renumbered inodes are written by the next flush that has a
/// write to save (until then [`Txn::flush`](crate::session::Txn::flush) answers
/// the target). A graft of some paths leaves a tree no stored node names yet: it
/// is encoded now.
fn commit_graft(
    t: &Target,
    tx: &mut crate::session::Txn<'_>,
    before_root: NodeId,
    whole: Option<NodeId>,
    grafted: Grafted<'_>,
) -> Result<oplog::Operation> {
    let after_root = match whole {
        Some(target) => {
            tx.set_root(target);
            target
        }
        None => tx.flush()?,
    };
    tx.push(touched_by_graft(t, before_root, after_root)?);
    grafted(tx, before_root, after_root)
}

/// The ops adding what a graft changed (the tree before it against after it) to
/// the session's touched files.
fn touched_by_graft(
    t: &Target,
    before_root: NodeId,
    after_root: NodeId,
) -> Result<Vec<crate::meta::MetaOp>> {
    let s = &t.session;
    let changed = crate::diff::diff_roots(&**s.store(), before_root, after_root)?;
    Ok(crate::lifecycle::touched::add_ops(
        s.name(),
        changed.iter().map(|e| e.path.as_slice()),
    ))
}

/// The checkpoint named by `from`, or (without it) HEAD — checkpointing the live
/// state first when it has changes or the session has no checkpoint yet, recorded
/// as a `checkpoint` operation asked by `call` (`checkpoint::take`).
fn ref_or_fresh(
    t: &Target,
    call: &Call,
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
        let call = Call {
            actor: call.actor,
            explanation: call.explanation.clone(),
            request: serde_json::json!({"op": "checkpoint", "trigger": trigger, "message": message}),
        };
        let (c, _) = checkpoint::take(s, &call, &checkpoint::Taking::new(message, trigger))?;
        Ok(c)
    } else {
        refctx::resolve(t, "HEAD")
    }
}

fn working_root(t: &Target) -> Result<NodeId> {
    syncfs(&t.mount)?;
    t.session.flush()
}

/// For read-only questions (`status`, `diff`): the live root as
/// [`working_root`] saves it, or, when the store is full and it cannot be saved,
/// the root last saved and the message saying so (and what to do).
fn working_root_or_saved(t: &Target) -> Result<(NodeId, Option<String>)> {
    match working_root(t) {
        Ok(root) => Ok((root, None)),
        Err(e) if e.is_full() => {
            let s = &t.session;
            ::log::warn!("session {}: answering from the last save: {e}", s.name());
            let dir = s.store().dir().unwrap_or(Path::new(".")).to_path_buf();
            let e = e.when_full("the latest writes are not saved and not shown", || {
                crate::store::space::measure(&dir)
            });
            Ok((s.record().root, Some(e.to_string())))
        }
        Err(e) => Err(e),
    }
}

/// The root of a diff side: a ref, `WORKING` for the live state, or `baseline`
/// for the tree the session is based on.
fn side_root(t: &Target, spec: &str) -> Result<NodeId> {
    if spec == "WORKING" {
        return working_root(t);
    }
    if spec == crate::refs::BASELINE {
        return refctx::baseline_root(t);
    }
    Ok(refctx::resolve(t, spec)?.root)
}
