//! Starting sessions from a conversation: `continue` (the latest session imported
//! from a durable repository, forked with its messages) and the start of
//! `fork --from-message` ([`message_start`]).
//!
//! `continue` follows `fork`'s order: claim the new name, refuse an existing
//! record, check the mountpoint, write the record (with the shared conversation's
//! bases, in one commit), mount; on a failed mount the record is removed while the claim
//! is still held.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::record::Call;
use super::super::{Host, Target, syncfs};
use crate::control::MountFor;
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::lifecycle::{self, SessionInfo, State};
use crate::messages::{self, Stream, conversation};
use crate::refs::{self, Checkpoint};
use crate::session::{self, SessionRecord};
use crate::store::ObjectStore;

/// Where `fork --from-message ID` starts: HEAD as it was when the message was
/// recorded (if there was one) and the workspace root it recorded.
pub(crate) fn message_start(t: &Target, id: &str) -> Result<(Option<Checkpoint>, NodeId)> {
    let s = &t.session;
    let store = s.store();
    let (stream, m) = messages::by_id(&**store, s.name(), id)?;
    let hidden = conversation::hidden(&**store, s.name())?;
    if stream != Stream::Messages || conversation::is_hidden(&hidden, m.seq) {
        return Err(Error::Invalid(format!(
            "message {id} is not a visible message of the conversation"
        )));
    }
    let c = m
        .checkpoint
        .map(|cid| refs::load(&**store, &cid))
        .transpose()?;
    Ok((c, m.workspace))
}

/// The latest session (by its last activity: last access or newest message,
/// then creation) whose info names
/// `project` as its durable path; discarded sessions are skipped.
fn latest_of(store: &dyn ObjectStore, project: &Path) -> Result<String> {
    let mut best: Option<((i128, i64), String)> = None;
    for i in crate::lifecycle::list(store)? {
        let name = i.session.as_str();
        let from_project = i.origin.as_ref().is_some_and(|o| o.path == project);
        if !from_project || i.state == State::Discarded {
            continue;
        }
        if session::load_record(store, name)?.is_none() {
            continue;
        }
        // Seconds are coarse (and last access is written once a minute): the
        // newest message, in ns, tells apart sessions used in the same second.
        let newest = messages::list(
            store,
            name,
            &messages::Query {
                limit: Some(1),
                ..Default::default()
            },
        )?
        .messages
        .last()
        .map_or(0, |m| m.time_ns);
        let secs = i128::from(i.last_access.max(i.created)) * 1_000_000_000;
        let key = (secs.max(newest), i.created);
        if best.as_ref().is_none_or(|(b, _)| key > *b) {
            best = Some((key, name.to_string()));
        }
    }
    best.map(|(_, n)| n).ok_or_else(|| {
        Error::NotFound(format!(
            "no session was imported from {}",
            project.display()
        ))
    })
}

/// The source's state: flushed first when it is mounted (its queued messages
/// written).
fn source_record<H: Host>(h: &H, src: &str) -> Result<SessionRecord> {
    if let Ok(t) = h.target(Some(src)) {
        super::wait(&t)?;
        let _lock = t.session.op_lock.lock().unwrap_or_else(|e| e.into_inner());
        syncfs(&t.mount)?;
        t.session.flush()?;
        return Ok(t.session.record());
    }
    session::load_record(&*h.store(), src)?
        .ok_or_else(|| Error::NotFound(format!("no session named {src}")))
}

/// The answer to `continue`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Continued {
    /// The new session.
    pub session: String,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// The session it continues (the latest imported from the project).
    pub from: String,
    /// The checkpoint it starts at (the source's HEAD, hex); `null` when it had none.
    pub checkpoint: Option<String>,
    /// How many visible messages it shares with the source.
    pub messages: u64,
}

pub(crate) fn run<H: Host>(
    h: &H,
    who: MountFor,
    call: &Call,
    project: &Path,
    name: &str,
    mountpoint: &Path,
) -> Result<Continued> {
    if !project.is_absolute() {
        return Err(Error::Invalid(format!(
            "project {} must be an absolute path",
            project.display()
        )));
    }
    let project = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf());
    session::validate_session_name(name)?;
    let store = h.store();
    let src = latest_of(&*store, &project)?;
    let mut spawn = crate::ops::spawn::Spawn::new(h, "continue");
    let new = spawn.claim(name, mountpoint, who)?;
    // A mounted source's flushed root stays a gc root until the new record names
    // it (see `Session::pin_roots`).
    let src_t = h.target(Some(&src)).ok();
    let _pins = src_t.as_ref().map(|t| t.session.pin_roots());
    let from = source_record(h, &src)?;
    let mut rec = session::new_record(name, from.root, from.bytes, from.inodes)?;
    rec.head = from.head;
    rec.base = from.base;
    rec.config = from.config.clone();
    let src_info = lifecycle::load(&*store, &src)?;
    let mut info = SessionInfo::forked(src_info.as_ref(), name);
    let touched = lifecycle::touched::list(&*store, &src)?;
    // The conversation is shared, not copied (`messages::share`).
    let copied = messages::share::fork_ops(&*store, &src, name, None)?;
    let n = messages::visible_count(&*store, &src)?;
    let origin = crate::refs::origin::Origin::Continue {
        source: src.to_string(),
    };
    spawn.set(new, rec.clone(), origin, None);
    let mut ops = spawn.ops()?;
    ops.push(info.op());
    ops.extend(lifecycle::touched::add_ops(
        name,
        touched.iter().map(Vec::as_slice),
    ));
    ops.extend(copied);
    // The source's metrics count the fork, and the new session's log starts with
    // where it came from: one batch.
    ops.extend(lifecycle::manage::bump_ops(&*store, &src, &|m| {
        m.forks += 1
    })?);
    let view = |r: &session::SessionRecord| crate::ops::record::view_of(r, r.root);
    let mut op = call.op("continue", view(&from), view(&rec));
    op.inert = true;
    op.meta.insert(
        "continue".into(),
        serde_json::json!({"from": src, "project": project}),
    );
    ops.extend(op.build(name, 1).ops());
    store.commit(ops)?;
    spawn.committed();
    // An agent socket and skipped files are never part of a continued session:
    // the mount's answer adds nothing else.
    let m = spawn.mount()?.remove(0);
    Ok(Continued {
        session: name.to_string(),
        mountpoint: m.mountpoint,
        from: src,
        checkpoint: from.head.map(|h| h.to_hex()),
        messages: n,
    })
}
