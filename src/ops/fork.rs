//! `fork`: create a new session from a ref (default: a fresh checkpoint) and mount it.
//!
//! Order (each step can fail without leaving anything behind that another request
//! won): claim the new name (store-wide, in the host's mount table); refuse an
//! existing record; resolve and check the mountpoint once (created when missing,
//! the agent ownership rule applied to the descriptor); checkpoint; write the
//! record; mount through the checked descriptor. On failure the record is removed,
//! which is safe because the claim is still held.

use std::path::Path;
use std::sync::MutexGuard;

use serde_json::{Value, json};

use super::record::{self, Call, refs_after, touch, view_now};
use super::{Host, Target, ref_or_fresh};
use crate::control::{AgentSocket, MountFor};
use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::session;

pub(super) struct Request<'a> {
    pub(super) name: &'a str,
    pub(super) from: Option<&'a str>,
    pub(super) mountpoint: &'a Path,
    pub(super) agent: Option<AgentSocket>,
    pub(super) who: MountFor,
    /// Start at this message's workspace, its conversation up to it (else: the
    /// whole visible conversation is copied).
    pub(super) from_message: Option<&'a str>,
}

pub(super) fn run<H: Host>(
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
    let mut before = view_now(t)?;
    // The branch HEAD is attached to moves when pending changes are saved first.
    if let Some(b) = before.branch.clone() {
        touch(&mut before, &*store, &b);
    }
    let (c, root) = match from_message {
        // HEAD as it was then, the workspace as it was then (its pending changes
        // stay pending in the fork).
        Some(id) => super::messages::cont::message_start(t, id)?,
        None => {
            let c = ref_or_fresh(t, from, &format!("fork {name}"), "fork")?;
            let root = c.root_id()?;
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
        rec.head = Some(c.id.clone());
        rec.base = c.root.clone();
    }
    rec.config = s.record().config;
    let src_info = crate::lifecycle::load(&*store, s.name())?;
    let mut info = crate::lifecycle::SessionInfo::forked(src_info.as_ref(), name);
    // Same baseline, so the source's touched paths are the fork's too.
    let src_touched = crate::lifecycle::touched::list(&*store, s.name())?;
    // The fork is of the source's lineage: the source's agent sees its history.
    let mut ops = vec![crate::visibility::lineage_op(s.name(), name)];
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
    store.commit(ops)?;
    crate::lifecycle::manage::bump(&*store, s.name(), &|m| m.forks += 1);
    // The source's log says where the fork came from (its HEAD moved only if
    // pending changes were saved for it).
    let mut after = refs_after(t, &before);
    for b in before.branches.keys() {
        touch(&mut after, &*store, b);
    }
    let mut op = call.op("fork", before, after);
    let cid = c.as_ref().map(|c| c.id.clone());
    let mut fork = json!({"session": name, "checkpoint": cid});
    if let Some(m) = from_message {
        fork["message"] = json!(m);
    }
    op.meta.insert("fork".into(), fork);
    let _ = record::append(t, op);
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
