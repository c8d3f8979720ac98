//! `mount --from-remote REMOTE/REF`: the local session record made from a remote
//! session (or a new session at a remote branch's checkpoint), before the daemon
//! mounts it like any other. Contents then arrive lazily (`remote::lazy`).
//!
//! Owns: [`create`]. For a session ref: its record (root, base, head, config)
//! under the local name, its branch (the local branch is created when absent or
//! moved when a fast-forward; otherwise the session is detached), its log
//! segments imported under the local name, its info record adopted (a new id,
//! the task kept), `meta.upstream` = the remote session, and
//! the tracking ref with the ETag read (so pushing back is a fast-forward unless
//! someone else pushed meanwhile). For a branch ref: a new session at its
//! checkpoint. Only checkpoint records are fetched here (small, batched): tree
//! nodes and chunks come on first read.
//!
//! Invariants: everything is committed in ONE batch that expects the session
//! record absent (a local session of that name is `conflict`, never
//! overwritten), so a failure leaves nothing behind. What the remote chose is not
//! trusted: the origin (a local repository path `promote` writes to and
//! `continue --project` matches) and the eviction policy (whose `evict_to` names
//! a remote to push to) are kept aside in the info's `meta.remote_origin`
//! ([`REMOTE_ORIGIN`]) until the user runs `treefork remote trust SESSION`; the
//! session config (automatic checkpoints, retention, experiment runs) in the
//! record's `meta.remote_config` ([`REMOTE_CONFIG`]), shown and never applied
//! (the session gets the local defaults). Imported operation records name no
//! local branches (see `import`).

use serde_json::{Value, json};

use super::import;
use super::refs::{self, Fetched};
use crate::error::{Error, Result};
use crate::lifecycle::{REMOTE_ORIGIN, SessionInfo};
use crate::meta::{self, MetaOp, TrackKind};
use crate::refs::tracking::Tracking;
use crate::refs::{Checkpoint, RefRecord};
use crate::remote::Remote;
use crate::remote::refval::RefValue;
use crate::session::{self, SessionRecord};
use crate::store::ObjectStore;

/// What [`create`] made.
#[derive(Debug, Clone)]
pub struct Created {
    /// The remote ref's kind.
    pub kind: TrackKind,
    /// Its checkpoint (HEAD).
    pub checkpoint: Option<String>,
    /// Checkpoint records fetched.
    pub checkpoints: usize,
    /// Operation records and messages imported.
    pub operations: u64,
    /// Messages imported.
    pub messages: u64,
    /// The origin path the remote named, kept aside until `remote trust`.
    pub untrusted_origin: Option<String>,
}

/// Key in a pulled session's record `meta`: the remote's session config (shown,
/// never applied).
pub const REMOTE_CONFIG: &str = "remote_config";

/// Split `REMOTE/REF`.
pub fn split(spec: &str) -> Result<(&str, &str)> {
    match spec.split_once('/') {
        Some((r, n)) if !r.is_empty() && !n.is_empty() => Ok((r, n)),
        _ => Err(Error::Invalid(format!(
            "--from-remote {spec:?}: expected REMOTE/REF (e.g. origin/main)"
        ))),
    }
}

/// Create local session `name` from `remote`'s ref `rname` (see module docs).
pub fn create(
    store: &dyn ObjectStore,
    remote: &Remote,
    name: &str,
    rname: &str,
) -> Result<Created> {
    session::validate_session_name(name)?;
    if session::load_record(store, name)?.is_some() {
        return Err(Error::Conflict(format!(
            "session {name} already exists; --from-remote creates a new session"
        )));
    }
    remote.index.refresh(&remote.client)?;
    let f = refs::read_any(&remote.client, rname)?;
    let imported = match &f.value {
        RefValue::Session(sref) => Some(import::import(store, &remote.client, name, &sref.logs)?),
        RefValue::Branch(_) => None,
    };
    let mut heads: Vec<String> = f.checkpoint().into_iter().collect();
    if let Some(imp) = &imported {
        heads.extend(imp.checkpoints.iter().cloned());
    }
    // Checkpoint records first (small; the record and branch checks read them).
    let cps = refs::fetch_checkpoints(store, &remote.client, heads)?;
    let n_cps = cps.len();
    store.commit(cps)?;
    let mut ops = vec![MetaOp::Expect(meta::session_key(name), None)];
    let mut untrusted_origin = None;
    let rec = match &f.value {
        RefValue::Session(sref) => {
            let mut rec = sref.session_record()?;
            rec.name = name.to_string();
            let config = std::mem::take(&mut rec.config);
            if config != session::SessionConfig::default() {
                rec.meta.insert(
                    REMOTE_CONFIG.into(),
                    serde_json::to_value(&config).expect("json"),
                );
            }
            rec.meta.insert(
                crate::remote::push::UPSTREAM.into(),
                json!({"remote": remote.config.name, "session": rname}),
            );
            let (op, origin) = info_op(name, sref.info.as_ref(), &remote.config.name, rname)?;
            ops.push(op);
            untrusted_origin = origin;
            if let Some(v) = sref.conversation.as_ref().filter(|v| !v.is_null()) {
                ops.push(MetaOp::Put(
                    meta::conversation_key(name),
                    serde_json::to_vec(v).expect("json"),
                ));
            }
            rec
        }
        RefValue::Branch(b) => {
            ops.push(info_op(name, None, &remote.config.name, rname)?.0);
            branch_record(store, name, rname, &b.checkpoint)?
        }
    };
    let mut rec = rec;
    attach_branch(store, &mut rec, &mut ops)?;
    let (operations, messages) = match imported {
        Some(imp) => {
            ops.extend(imp.ops);
            (imp.operations, imp.messages)
        }
        None => (0, 0),
    };
    if f.kind == TrackKind::Session {
        let t = Tracking::new(f.kind, f.checkpoint(), f.etag.clone(), f.json.clone());
        ops.push(t.op(&remote.config.name, f.kind, rname));
    }
    ops.push(session::record_op(&rec));
    store.commit(ops).map_err(|e| match e {
        Error::Conflict(_) => Error::Conflict(format!("session {name} already exists")),
        e => e,
    })?;
    Ok(Created {
        kind: f.kind,
        checkpoint: rec.head.map(|h| h.to_hex()),
        checkpoints: n_cps,
        operations,
        messages,
        untrusted_origin,
    })
}

/// The adopted info record: the remote's task with a new id, the local default
/// policy and no origin; the remote's origin and policy wait in
/// `meta.remote_origin` for `remote trust` (see the module docs). Also the
/// origin's path, if the remote named one. A remote info record that does not
/// decode is `Error::Corrupt` (the pull of that session stops, as for a session
/// record that does not), never replaced by a fresh one in silence.
fn info_op(
    name: &str,
    info: Option<&Value>,
    remote: &str,
    rname: &str,
) -> Result<(MetaOp, Option<String>)> {
    let src = match info.filter(|v| !v.is_null()) {
        None => None,
        Some(v) => {
            let bytes = serde_json::to_vec(v).expect("a JSON value serializes");
            Some(SessionInfo::decode(name, &bytes).map_err(|e| {
                log::warn!("remote {remote}: session info of {rname} (pulled as {name}): {e}");
                e
            })?)
        }
    };
    let mut i = SessionInfo::forked(src.as_ref(), name);
    let origin = i.origin.take();
    let policy = std::mem::take(&mut i.policy);
    if let Some(o) = &origin {
        log::warn!(
            "session {name} pulled from {remote}/{rname} names origin {}: not used until `treefork remote trust {name}`",
            o.path.display()
        );
    }
    let path = origin.as_ref().map(|o| o.path.display().to_string());
    if src.is_some() {
        i.meta.insert(
            REMOTE_ORIGIN.into(),
            json!({"remote": remote, "session": rname, "origin": origin, "policy": policy}),
        );
    }
    Ok((i.op(), path))
}

/// A new session record at checkpoint `hex` (a remote branch's): its tree, HEAD
/// there, on the local branch of the same name when that is possible.
fn branch_record(
    store: &dyn ObjectStore,
    name: &str,
    branch: &str,
    hex: &str,
) -> Result<SessionRecord> {
    let cp = fetch_one(store, hex)?;
    let usage = cp.as_ref().and_then(|c| c.usage);
    let (head, root) = cp_root(cp.as_ref(), hex)?;
    let (bytes, inodes) = usage.map_or((0, 1), |u| (u.bytes, u.inodes));
    let mut rec = session::new_record(name, root, bytes, inodes)?;
    rec.head = Some(head);
    rec.branch = Some(branch.to_string());
    Ok(rec)
}

fn fetch_one(store: &dyn ObjectStore, hex: &str) -> Result<Option<Checkpoint>> {
    let Some(id) = crate::id::CheckpointId::from_hex(hex) else {
        return Ok(None);
    };
    match crate::refs::load(store, &id) {
        Ok(c) => Ok(Some(c)),
        Err(Error::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The id and root of `cp` (the checkpoint `hex` names), which must be here.
fn cp_root(
    cp: Option<&Checkpoint>,
    hex: &str,
) -> Result<(crate::id::CheckpointId, crate::id::NodeId)> {
    cp.map(|c| (c.id, c.root)).ok_or_else(|| {
        Error::NotFound(format!(
            "checkpoint {hex} is not in this store (fetch failed?)"
        ))
    })
}

/// Keep `rec.branch` (as the session's own branch) when the local branch of that name is absent (created at
/// HEAD), at HEAD, or an ancestor of HEAD (moved: a fast-forward); else detach.
fn attach_branch(
    store: &dyn ObjectStore,
    rec: &mut SessionRecord,
    ops: &mut Vec<MetaOp>,
) -> Result<()> {
    let (Some(short), Some(head)) = (rec.branch.clone(), rec.head) else {
        rec.branch = None;
        return Ok(());
    };
    // The pulled session's own branch (`refs::names`).
    let short = crate::refs::names::short(&short).to_string();
    let b = crate::refs::names::owned(&rec.name, &short);
    rec.branch = Some(b.clone());
    let now = crate::clock::unix_secs();
    match crate::refs::get_ref(store, &b)? {
        None if crate::refs::validate_ref_name(&short).is_ok() && !clashes(store, &short)? => {
            ops.push(MetaOp::Expect(meta::ref_key(&b), None));
            ops.push(crate::refs::ref_op(
                &b,
                &RefRecord {
                    checkpoint: head,
                    created: now,
                },
            ));
        }
        Some(r) if r.checkpoint == head => {}
        Some(r) if refs::is_ancestor(store, &r.checkpoint.to_hex(), &head.to_hex())? => {
            ops.push(MetaOp::Expect(
                meta::ref_key(&b),
                store.meta_get(&meta::ref_key(&b))?,
            ));
            ops.push(crate::refs::ref_op(
                &b,
                &RefRecord {
                    checkpoint: head,
                    created: r.created,
                },
            ));
        }
        _ => rec.branch = None,
    }
    Ok(())
}

/// Whether branch name `b` would start with a configured remote's name.
fn clashes(store: &dyn ObjectStore, b: &str) -> Result<bool> {
    let first = b.split('/').next().unwrap_or(b);
    Ok(b.contains('/') && store.meta_get(&meta::remote_key(first))?.is_some())
}

/// The remote ref as a tracking record (for callers that have one).
pub fn tracking_of(f: &Fetched) -> Tracking {
    Tracking::new(f.kind, f.checkpoint(), f.etag.clone(), f.json.clone())
}
