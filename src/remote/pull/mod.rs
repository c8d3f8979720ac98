//! `pull`, `mount --from-remote` and `hydrate`: bringing a remote's refs,
//! checkpoint records, logs and objects into the local store (see
//! docs/design.md, "Remote tier: pull and lazy hydration").
//!
//! Owns: the order of a pull ([`pull`]): refresh the remote index; read the refs
//! (all under `refs/`, or the named ones) with their ETags; fetch the checkpoint
//! records of their ancestry (verified); walk each ref's trees, fetching a
//! missing node's whole node pack (`fetch::NodeFetcher`) and never descending
//! into what was local before; then, per ref, move a local branch of the same
//! name if that is a fast-forward (a session's branch: recorded as a `pull`
//! operation of that session in the same batch, so undo moves it back),
//! fast-forward an unmounted local session whose
//! state equals its tracking ref (record + new log segments), and write the
//! tracking ref. The parts: `refs` (remote refs, checkpoint records), `fetch`
//! (batched, verified range reads), `import` (segments -> local keys),
//! `session` (the record of a session mounted from a remote), `hydrate`.
//!
//! Invariants: nothing a remote sends is kept unverified; a second pull with
//! nothing new fetches no checkpoint and no node (O(changes)); a local branch or
//! session is only ever moved forward, atomically with `Expect` on what was read;
//! a mounted session is never changed (only its tracking ref moves).

pub mod fetch;
pub mod hydrate;
pub mod import;
pub mod refs;
pub mod session;

use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::Result;
use crate::host::{Host, Serving};
use crate::id::{NodeId, ObjectId};
use crate::meta::{self, MetaOp};
use crate::reach::{ChunkCheck, Walk};
use crate::refs::RefRecord;
use crate::refs::tracking::{self, Tracking};
use crate::remote::Remote;
use crate::remote::lazy::Source;
use crate::remote::refval::RefValue;
use crate::store::{Kind, ObjectStore};

/// What to pull.
#[derive(Debug, Clone, Default)]
pub struct PullRequest {
    /// Remote ref names (a branch, else a session); empty: every ref.
    pub refs: Vec<String>,
    /// Who asked, and from which session: a store-wide branch the pull moves is
    /// recorded in that session's log (a session's own branch, in its owner's).
    pub by: Option<PulledBy>,
}

/// Who asked for a pull (see [`PullRequest::by`]).
#[derive(Debug, Clone)]
pub struct PulledBy {
    /// The caller.
    pub actor: crate::oplog::Actor,
    /// The explanation given with the request.
    pub explanation: Option<String>,
    /// The session it was asked from, if any.
    pub session: Option<String>,
}

/// One ref pulled.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct RefPulled {
    /// Its name on the remote.
    pub name: String,
    /// `branch` or `session`.
    pub kind: String,
    /// The checkpoint the tracking ref named before (None: first seen).
    pub old: Option<String>,
    /// The checkpoint it names now.
    pub new: Option<String>,
    /// What moved locally: `fast-forward` (the local branch or session of that
    /// name), `up-to-date`, or `tracking-only` (no local counterpart that could
    /// move: absent, mounted, diverged).
    pub status: String,
    /// What to do next, when the local session of that name lacks what the
    /// remote's has (diverged, or mounted): merge it, then push.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// What a pull did: the answer to `pull`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PullReport {
    /// The remote.
    pub remote: String,
    /// The refs.
    pub refs: Vec<RefPulled>,
    /// Checkpoint records fetched.
    pub checkpoints: usize,
    /// Tree nodes fetched.
    pub nodes: u64,
    /// Bytes read from the remote for nodes.
    pub bytes: u64,
    /// Wall time.
    pub seconds: f64,
}

/// Pull `req` from `remote` into the store of daemon `h`.
pub fn pull<H: Host>(
    h: &H,
    remote: &Remote,
    req: &PullRequest,
    progress: &mut dyn FnMut(Value),
) -> Result<PullReport> {
    pull_env(&*h.store(), h, remote, req, progress)
}

/// Pull `req` from `remote` into the store `store` served by `env` (see the
/// module docs): a session is moved only when `env` has it unmounted, under its
/// claim; a branch under `env`'s branch-name lock.
pub fn pull_env(
    store: &dyn ObjectStore,
    env: &dyn Serving,
    remote: &Remote,
    req: &PullRequest,
    progress: &mut dyn FnMut(Value),
) -> Result<PullReport> {
    let t0 = Instant::now();
    let c = &remote.client;
    remote.index.refresh(c)?;
    let fetched = if req.refs.is_empty() {
        refs::list_all(c)?
    } else {
        req.refs
            .iter()
            .map(|n| refs::read_any(c, n))
            .collect::<Result<Vec<_>>>()?
    };
    let cps = refs::fetch_checkpoints(store, c, fetched.iter().filter_map(|f| f.checkpoint()))?;
    let n_cps = cps.len();
    store.commit(cps)?;
    progress(json!({"event": "progress", "phase": "checkpoints", "done": n_cps, "total": n_cps}));
    let src = Source::from(remote);
    let roots = tree_roots(store, &fetched)?;
    let nf = fetch::NodeFetcher::new(store, &src);
    let read = |k: Kind, id: &ObjectId| nf.read(k, id);
    let boundary = |id: &ObjectId| match src.index.get(id) {
        Some(e) if e.kind == Kind::Chunk => true,
        _ => nf.was_local(id),
    };
    let mut w = Walk::new(&read, ChunkCheck::Mark).with_boundary(&boundary);
    for r in &roots {
        w.root("pull", *r);
    }
    for p in w.problems.iter().take(5) {
        log::warn!(
            "pull from {}: {} at {}: {}",
            remote.config.name,
            p.owner,
            p.path,
            p.error
        );
    }
    store.commit(Vec::new())?;
    let stats = *nf.stats.lock().unwrap();
    progress(
        json!({"event": "progress", "phase": "nodes", "done": stats.objects,
                    "total": stats.objects, "bytes": stats.bytes}),
    );
    let mut out = Vec::new();
    for f in &fetched {
        out.push(update_local(store, env, remote, req.by.as_ref(), f)?);
    }
    Ok(PullReport {
        remote: remote.config.name.clone(),
        refs: out,
        checkpoints: n_cps,
        nodes: stats.objects,
        bytes: stats.bytes,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The tree roots of the pulled refs: each checkpoint's root and each session's
/// workspace root. The checkpoints were fetched just before: a record missing or
/// not decoding is the error (its tree would silently not be fetched).
fn tree_roots(store: &dyn ObjectStore, fetched: &[refs::Fetched]) -> Result<Vec<NodeId>> {
    let mut out = Vec::new();
    for f in fetched {
        if let Some(r) = f.workspace_root().and_then(|h| NodeId::from_hex(&h)) {
            out.push(r);
        }
        if let Some(id) = f
            .checkpoint()
            .and_then(|h| crate::id::CheckpointId::from_hex(&h))
        {
            out.push(crate::refs::load(store, &id)?.root);
        }
    }
    out.sort_by_key(|n| n.0);
    out.dedup();
    Ok(out)
}

/// Move the local counterpart of `f` when that is a fast-forward, and write its
/// tracking ref.
fn update_local(
    store: &dyn ObjectStore,
    env: &dyn Serving,
    remote: &Remote,
    by: Option<&PulledBy>,
    f: &refs::Fetched,
) -> Result<RefPulled> {
    let rname = &remote.config.name;
    let old = tracking::get(store, rname, f.kind, &f.name)?;
    let new = f.checkpoint();
    let took = Tracking::new(f.kind, new.clone(), f.etag.clone(), f.json.clone());
    // Seen only: the local counterpart did not take it in.
    let seen = took.clone().seen(old.as_ref());
    let mut status = "tracking-only";
    let mut run = || -> Result<()> {
        let mut ops = Vec::new();
        // The local branch's value before, under the name lock (`branch_ff`
        // guards its move with the same read).
        let old_branch = match f.value {
            RefValue::Branch(_) => crate::refs::get_ref(store, &f.name)?.map(|r| r.checkpoint),
            RefValue::Session(_) => None,
        };
        status = match &f.value {
            RefValue::Branch(_) => branch_ff(store, &f.name, new.as_deref(), &mut ops)?,
            RefValue::Session(_) => session_ff(store, remote, f, old.as_ref(), &mut ops)?,
        };
        let track = if status == "tracking-only" {
            &seen
        } else {
            &took
        };
        ops.push(track.op(rname, f.kind, &f.name));
        match (status, &f.value) {
            // A session's branch moved: an operation of its session, in the
            // same batch (undo moves it back).
            ("fast-forward", RefValue::Branch(_)) => {
                match ff_record(store, by, rname, &f.name, old_branch, new.as_deref())? {
                    Some((owner, op)) => crate::oplog::append(store, &owner, op, ops).map(|_| ()),
                    None => store.commit(ops),
                }
            }
            _ => store.commit(ops),
        }
    };
    match &f.value {
        RefValue::Branch(_) => env.with_names(&mut run)?,
        RefValue::Session(_) if env.mounted(Some(&f.name)).is_ok() => {
            store.commit(vec![seen.op(rname, f.kind, &f.name)])?
        }
        RefValue::Session(_) => {
            let exists = crate::session::load_record(store, &f.name)?.is_some();
            match (exists, env.with_claim(&f.name, &mut run)) {
                (_, Ok(())) => {}
                // Owned by someone else right now (being mounted): only track.
                (true, Err(crate::error::Error::Busy(_) | crate::error::Error::Conflict(_))) => {
                    store.commit(vec![seen.op(rname, f.kind, &f.name)])?
                }
                (_, Err(e)) => return Err(e),
            }
        }
    }
    let next = match (status, &f.value) {
        ("tracking-only", RefValue::Session(_)) => {
            behind_hint(store, rname, &f.name, new.as_deref())?
        }
        _ => None,
    };
    Ok(RefPulled {
        name: f.name.clone(),
        kind: f.kind.as_str().to_string(),
        old: old.and_then(|t| t.checkpoint),
        new,
        status: status.to_string(),
        next,
    })
}

/// When the local session `name` exists and lacks the remote's HEAD `new`: how
/// to take it in (a merge in the session, then a push, which is then a
/// fast-forward of the remote).
fn behind_hint(
    store: &dyn ObjectStore,
    remote: &str,
    name: &str,
    new: Option<&str>,
) -> Result<Option<String>> {
    let (Some(new), Some(local)) = (new, crate::session::load_record(store, name)?) else {
        return Ok(None);
    };
    if let Some(h) = local.head
        && refs::is_ancestor(store, new, &h.to_hex())?
    {
        return Ok(None);
    }
    Ok(Some(format!(
        "session {name} lacks what {remote}/{name} has: run `treefork merge {remote}/{name}` in it (mount it first), then `treefork push`"
    )))
}

fn branch_ff(
    store: &dyn ObjectStore,
    name: &str,
    new: Option<&str>,
    ops: &mut Vec<MetaOp>,
) -> Result<&'static str> {
    let (Some(new), Some(local)) = (new, crate::refs::get_ref(store, name)?) else {
        return Ok("tracking-only");
    };
    let Some(new_id) = crate::id::CheckpointId::from_hex(new) else {
        return Ok("tracking-only");
    };
    if local.checkpoint == new_id {
        return Ok("up-to-date");
    }
    if !refs::is_ancestor(store, &local.checkpoint.to_hex(), new)? {
        return Ok("tracking-only");
    }
    ops.push(MetaOp::Expect(
        meta::ref_key(name),
        store.meta_get(&meta::ref_key(name))?,
    ));
    ops.push(crate::refs::ref_op(
        name,
        &RefRecord {
            checkpoint: new_id,
            created: local.created,
        },
    ));
    Ok("fast-forward")
}

/// The operation recording the fast-forward of branch `name` from `old` to `new`
/// by a pull from `remote`, for the log of the session that owns the branch
/// (`SESSION:NAME`), or for a store-wide branch the session the pull was asked
/// from (`by`); `None` when there is neither. HEAD and the workspace are that
/// session's as stored, the same on both sides (undo then moves only the
/// branch).
fn ff_record(
    store: &dyn ObjectStore,
    by: Option<&PulledBy>,
    remote: &str,
    name: &str,
    old: Option<crate::id::CheckpointId>,
    new: Option<&str>,
) -> Result<Option<(String, crate::oplog::NewOp)>> {
    let owner = match crate::refs::names::split(name) {
        (Some(owner), _) => owner,
        (None, _) => match by.and_then(|b| b.session.as_deref()) {
            Some(s) => s,
            None => return Ok(None),
        },
    };
    let Some(rec) = crate::session::load_record(store, owner)? else {
        return Ok(None);
    };
    let view = |at: Option<crate::id::CheckpointId>| crate::oplog::View {
        head: rec.head,
        branch: rec.branch.clone(),
        workspace: rec.root,
        branches: [(name.to_string(), at)].into(),
    };
    let new = new.and_then(crate::id::CheckpointId::from_hex);
    let daemon = crate::oplog::Actor::daemon();
    let actor = by.map_or(&daemon, |b| &b.actor);
    let request = json!({"op": "pull", "remote": remote, "ref": name});
    let mut op = crate::oplog::NewOp::new(actor, "pull", request, view(old), view(new));
    op.explanation = by.and_then(|b| b.explanation.clone());
    Ok(Some((owner.to_string(), op)))
}

/// Root and HEAD of a session record (JSON or typed).
fn state_of(v: &Value) -> (Value, Value) {
    let r = v.get("record").unwrap_or(&Value::Null);
    (
        r.get("root").cloned().unwrap_or(Value::Null),
        r.get("head").cloned().unwrap_or(Value::Null),
    )
}

/// Fast-forward unmounted local session `f.name` (claimed by the caller) when its
/// state equals its tracking ref's: the remote record (keeping the local name)
/// and the segments the tracking ref did not list.
fn session_ff(
    store: &dyn ObjectStore,
    remote: &Remote,
    f: &refs::Fetched,
    old: Option<&Tracking>,
    ops: &mut Vec<MetaOp>,
) -> Result<&'static str> {
    let RefValue::Session(sref) = &f.value else {
        return Ok("tracking-only");
    };
    let Some(local) = crate::session::load_record(store, &f.name)? else {
        return Ok("tracking-only");
    };
    let mine = (json!(local.root), json!(local.head));
    if state_of(&f.json) == mine {
        return Ok("up-to-date");
    }
    // From the state the local session took in last (not the newest look).
    let Some(old) = old
        .and_then(|t| t.integrated.as_ref())
        .filter(|i| state_of(&i.value) == mine)
    else {
        return Ok("tracking-only");
    };
    let seen: Vec<String> =
        old.value
            .get("logs")
            .and_then(Value::as_array)
            .map_or_else(Vec::new, |a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            });
    let fresh: Vec<String> = sref
        .logs
        .iter()
        .filter(|h| !seen.contains(h))
        .cloned()
        .collect();
    let imp = import::import(store, &remote.client, &f.name, &fresh)?;
    let cps = refs::fetch_checkpoints(store, &remote.client, imp.checkpoints.iter().cloned())?;
    store.commit(cps)?;
    let mut rec = sref.session_record()?;
    rec.name = local.name.clone();
    rec.branch = local.branch.clone().filter(|_| rec.branch == local.branch);
    rec.meta = local.meta.clone();
    rec.origin = local.origin.clone();
    // The remote's config is not trusted (see `session`): the local one stays,
    // the remote's is kept for display when it differs.
    let theirs = std::mem::replace(&mut rec.config, local.config.clone());
    if theirs != rec.config {
        rec.meta.insert(
            session::REMOTE_CONFIG.into(),
            serde_json::to_value(&theirs).expect("json"),
        );
    }
    ops.push(MetaOp::Expect(
        meta::session_key(&f.name),
        store.meta_get(&meta::session_key(&f.name))?,
    ));
    ops.extend(imp.ops);
    ops.push(crate::session::record_op(&rec));
    Ok("fast-forward")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::CheckpointId;
    use crate::store::MemStore;

    fn session(store: &MemStore, name: &str) {
        let root = crate::session::empty_root(store, 0, 0).unwrap();
        let rec = crate::session::new_record(name, root, 0, 1).unwrap();
        store.commit(vec![crate::session::record_op(&rec)]).unwrap();
    }

    #[test]
    fn a_fast_forward_is_recorded_in_the_owner_or_the_asking_session() {
        let store = MemStore::default();
        session(&store, "s");
        session(&store, "asker");
        let (a, b) = (CheckpointId([1; 32]), CheckpointId([2; 32]));
        let by = PulledBy {
            actor: crate::oplog::Actor::peer("user", 0, 1),
            explanation: Some("why".into()),
            session: Some("asker".into()),
        };
        // A session's own branch: its owner's log, whoever asked.
        let (owner, op) = ff_record(
            &store,
            Some(&by),
            "origin",
            "s:feat",
            Some(a),
            Some(&b.to_hex()),
        )
        .unwrap()
        .unwrap();
        assert_eq!(owner, "s");
        assert_eq!(op.before.branches["s:feat"], Some(a));
        assert_eq!(op.after.branches["s:feat"], Some(b));
        assert_eq!(op.before.workspace, op.after.workspace);
        assert_eq!(op.before.head, op.after.head);
        assert_eq!(op.explanation.as_deref(), Some("why"));
        // A store-wide branch: the asking session's; none without one.
        let (owner, _) = ff_record(&store, Some(&by), "origin", "feat", None, Some(&b.to_hex()))
            .unwrap()
            .unwrap();
        assert_eq!(owner, "asker");
        assert!(
            ff_record(&store, None, "origin", "feat", None, Some(&b.to_hex()))
                .unwrap()
                .is_none()
        );
        // An owner without a record: nothing to record in.
        assert!(
            ff_record(&store, Some(&by), "origin", "gone:feat", None, None)
                .unwrap()
                .is_none()
        );
    }
}
