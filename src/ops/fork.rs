//! `fork`: create a new session from a ref (default: a fresh checkpoint) and mount it.
//! The verb's request ([`Fork`]) and answer ([`Forked`]) are defined here.
//!
//! The new session is made by [`super::spawn::Spawn`] (claim, checked
//! mountpoint, mount, roll back); the source's saved changes, the new record and
//! the operation in the source's log are one batch (`super::txn`).

use std::path::PathBuf;
use std::sync::MutexGuard;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::record::{Call, view_of};
use super::spawn::Spawn;
use super::txn::{self, Log};
use super::views::Mounted;
use super::{Host, Target, syncfs};
use crate::control::{AgentSocket, MountFor};
use crate::error::{Error, Result};
use crate::oplog::View;
use crate::refs::origin::Origin;
use crate::session;

// The `fork` verb's request, taken by `run` as it came over the wire; re-exported
// as `verbs::Fork`, which adds its role rule. (Its doc comment is its schema's
// description.)
/// Create a new session from a ref (default: a fresh checkpoint) and mount it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fork {
    /// New session name.
    pub name: String,
    /// Ref to start from.
    #[serde(default)]
    pub from: Option<String>,
    /// Where to mount it (absolute, empty directory).
    pub mountpoint: PathBuf,
    /// Also serve the session on an agent-role socket at this absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_socket: Option<PathBuf>,
    /// A uid allowed on the agent socket besides the daemon's and root (the socket
    /// file is then owned by it, mode 0600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_uid: Option<u32>,
    /// Start from a message instead: the files as they were when it was
    /// recorded, the conversation up to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_message: Option<String>,
}

/// The answer to `fork`: the new session as mounted, and where it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Forked {
    /// The new session and its mount.
    #[serde(flatten)]
    pub mounted: Mounted,
    /// The checkpoint it starts at (hex); `null` for a fork from a message
    /// written before the session's first checkpoint.
    pub checkpoint: Option<String>,
}

/// Fork `t`'s session as `req` asks, for `who` (whose rule the mountpoint
/// follows); `op_lock` is released before the mount.
pub(crate) fn run<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    op_lock: MutexGuard<'_, ()>,
    req: Fork,
    who: MountFor,
) -> Result<Forked> {
    let Fork {
        name,
        from,
        mountpoint,
        agent_socket,
        agent_uid,
        from_message,
    } = req;
    let agent = AgentSocket::from_request(agent_socket, agent_uid)?;
    if from.is_some() && from_message.is_some() {
        return Err(Error::Invalid(
            "fork takes a ref or a message to start from, not both".into(),
        ));
    }
    let (name, from, from_message) = (&name[..], from.as_deref(), from_message.as_deref());
    let store = h.store();
    if call.actor.is_agent() {
        crate::quota::check_agent_sessions(&*store, t.session.name(), 1)?;
    }
    let mut spawn = Spawn::new(h, "fork");
    let new = spawn.claim(name, &mountpoint, who)?;
    let s = &t.session;
    let from = from
        .map(|spec| super::refctx::resolve(t, spec))
        .transpose()?;
    syncfs(&t.mount)?;
    // The source's saved changes (when it checkpoints first), the new session's
    // records and the source's operation record: one batch.
    let mut tx = s.txn();
    let root = tx.flush()?;
    let mut before = view_of(tx.before(), root);
    // The branch HEAD is attached to moves when pending changes are saved first:
    // the record names it (an undo moves it back).
    if let Some(b) = before.branch.clone() {
        super::record::touch(&mut before, &*store, &b)?;
    }
    let (c, root) = match from_message {
        // HEAD as it was then, the workspace as it was then (its pending changes
        // stay pending in the fork).
        Some(id) => super::messages::cont::message_start(t, id)?,
        None => {
            let c = match from {
                Some(c) => c,
                None if tx.record().head.is_none() || tx.has_changes()? => {
                    tx.checkpoint(&format!("fork {name}"), "fork")?
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
    // The fork is of the source's lineage (`Spawn::ops`): the source's agent
    // sees its history.
    let mut ops = Vec::new();
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
    let origin = Origin::Fork {
        source: s.name().to_string(),
    };
    spawn.set(new, rec, origin, agent);
    ops.extend(spawn.ops()?);
    ops.push(info.op());
    // The source's log says where the fork came from (its HEAD moved only if
    // pending changes were saved for it).
    let cid = c.as_ref().map(|c| c.id);
    let mut fork = json!({"session": name, "checkpoint": cid});
    if let Some(m) = from_message {
        fork["message"] = json!(m);
    }
    // Counted in the source's metrics in the same batch.
    let txn = txn::Transaction::begin(t, "fork").counting(|m| m.forks += 1);
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
    spawn.committed();
    drop(tx);
    drop(op_lock);
    let mounted = spawn.mount()?.remove(0);
    Ok(Forked {
        mounted,
        checkpoint: cid.map(|c| c.to_hex()),
    })
}
