//! `fork`: create a new session from a ref (default: a fresh checkpoint) and mount it.
//!
//! Order (each step can fail without leaving anything behind that another request
//! won): claim the new name (store-wide, in the host's mount table); refuse an
//! existing record; resolve and check the mountpoint once (created when missing,
//! the agent ownership rule applied to the descriptor); checkpoint, write the
//! record and record the operation in the source's log, in one batch
//! (`super::txn`); mount through the checked descriptor. On failure the record is removed,
//! which is safe because the claim is still held.

use std::path::Path;
use std::sync::MutexGuard;

use serde_json::{Value, json};

use super::record::{Call, view_of};
use super::txn::{self, Log};
use super::{Host, Target, syncfs};
use crate::control::{AgentSocket, MountFor};
use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::oplog::View;
use crate::session;

pub(crate) struct Request<'a> {
    pub(crate) name: &'a str,
    pub(crate) from: Option<&'a str>,
    pub(crate) mountpoint: &'a Path,
    pub(crate) agent: Option<AgentSocket>,
    pub(crate) who: MountFor,
    /// Start at this message's workspace, its conversation up to it (else: the
    /// whole visible conversation is copied).
    pub(crate) from_message: Option<&'a str>,
}

pub(crate) fn run<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    op_lock: MutexGuard<'_, ()>,
    req: Request<'_>,
) -> Result<Value> {
    let Request {
        name,
        from,
        mountpoint,
        agent,
        who,
        from_message,
    } = req;
    session::validate_session_name(name)?;
    let store = h.store();
    let mut claim = h
        .claim(name)
        .map_err(|e| Error::Conflict(format!("session {name} already exists ({e})")))?;
    if session::load_record(&*store, name)?.is_some() {
        return Err(Error::Conflict(format!("session {name} already exists")));
    }
    if call.actor.is_agent() {
        crate::quota::check_agent_sessions(&*store, t.session.name(), 1)?;
    }
    let dir = h.open_mountpoint(mountpoint, who)?;
    let s = &t.session;
    let from = from
        .map(|spec| super::refctx::resolve(t, spec))
        .transpose()?;
    let txn = txn::Op::begin(t, "fork");
    syncfs(&t.mount)?;
    // The source's saved changes (when it checkpoints first), the new session's
    // records and the source's operation record: one batch.
    let mut tx = s.txn();
    let root = tx.flush()?;
    let mut before = view_of(tx.before(), root);
    // The branch HEAD is attached to moves when pending changes are saved first:
    // the record names it (an undo moves it back).
    if let Some(b) = before.branch.clone() {
        super::record::touch(&mut before, &*store, &b);
    }
    let mut fresh = None;
    let (c, root) = match from_message {
        // HEAD as it was then, the workspace as it was then (its pending changes
        // stay pending in the fork).
        Some(id) => super::messages::cont::message_start(t, id)?,
        None => {
            let c = match from {
                Some(c) => c,
                None if tx.record().head.is_none() || tx.has_changes()? => {
                    let c = tx.checkpoint(&format!("fork {name}"), "fork")?;
                    fresh = Some(c.clone());
                    c
                }
                None => super::refctx::resolve(t, "HEAD")?,
            };
            let root = c.root;
            (Some(c), root)
        }
    };
    // The fork starts with the usage of the tree it starts from. A record written
    // before checkpoints carried usage falls back to the current session's figures
    // (only `statfs` reads them; the next checkout or restore counts them anew).
    let usage = c.as_ref().and_then(|c| c.usage);
    let (bytes, inodes) = usage.map_or(s.usage(), |u| (u.bytes, u.inodes));
    let mut rec = session::new_record(name, root, bytes, inodes)?;
    if let Some(c) = &c {
        rec.head = Some(c.id);
        rec.base = c.root;
    }
    rec.config = s.record().config;
    let src_info = crate::lifecycle::load(&*store, s.name())?;
    let mut info = crate::lifecycle::SessionInfo::forked(src_info.as_ref(), name);
    // Same baseline, so the source's touched paths are the fork's too.
    let src_touched = crate::lifecycle::touched::list(&*store, s.name())?;
    // The fork is of the source's lineage: the source's agent sees its history.
    let mut ops = vec![
        MetaOp::Expect(meta::session_key(name), None),
        crate::visibility::lineage_op(s.name(), name),
    ];
    ops.extend(crate::lifecycle::touched::add_ops(
        name,
        src_touched.iter().map(Vec::as_slice),
    ));
    if call.actor.is_agent() {
        rec.meta
            .insert(crate::quota::AGENT_OF.into(), json!(s.name()));
    }
    // The conversation travels with the fork, shared by reference (up to the
    // message when given).
    let upto = from_message
        .map(|id| crate::messages::by_id(&*store, s.name(), id).map(|(_, m)| m.seq))
        .transpose()?;
    ops.extend(crate::messages::share::fork_ops(
        &*store,
        s.name(),
        name,
        upto,
    )?);
    ops.extend([session::record_op(&rec), info.op()]);
    // The source's log says where the fork came from (its HEAD moved only if
    // pending changes were saved for it).
    let cid = c.as_ref().map(|c| c.id);
    let mut fork = json!({"session": name, "checkpoint": cid});
    if let Some(m) = from_message {
        fork["message"] = json!(m);
    }
    txn.commit(&mut tx, Log::Next, &mut |_, after| {
        let mut branches = before.branches.clone();
        if let (Some(b), Some(h)) = (&after.branch, &after.head) {
            branches.insert(b.clone(), Some(*h));
        }
        let after = View {
            head: after.head,
            branch: after.branch.clone(),
            workspace: before.workspace,
            branches,
        };
        let mut op = call.op("fork", before.clone(), after);
        op.meta.insert("fork".into(), fork.clone());
        Ok((op, ops.clone()))
    })?;
    drop(tx);
    if let Some(c) = &fresh {
        let at = (c.time_ns / 1_000_000_000) as i64;
        crate::lifecycle::manage::bump(&*store, s.name(), &|m| {
            m.checkpoints += 1;
            m.last_checkpoint = Some(at);
        });
    }
    crate::lifecycle::manage::bump(&*store, s.name(), &|m| m.forks += 1);
    drop(op_lock);
    match h.mount_claimed(&mut claim, dir, rec, agent) {
        Ok(mut v) => {
            v["checkpoint"] = json!(cid);
            Ok(v)
        }
        Err(e) => {
            // The claim is still held: the record is ours to remove.
            let key = meta::session_key(name);
            let mut ops = vec![MetaOp::Delete(key)];
            ops.extend(crate::lifecycle::delete_ops(&*store, name).unwrap_or_default());
            if let Err(e2) = store.commit(ops) {
                log::error!("fork {name}: cannot remove the record of the failed fork: {e2}");
            }
            drop(claim);
            Err(e)
        }
    }
}
