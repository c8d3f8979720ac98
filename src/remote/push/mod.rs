//! `push`: send local branches and sessions to a remote (see docs/design.md,
//! "Remote tier: push").
//!
//! Owns: resolving what a push names ([`PushRequest`]: `REF`, `SRC:DST`,
//! `SESSION`, or the current session), the order of a push, and its report.
//! The parts: `closure` (what to send), `upload` (packs + idx, checkpoint
//! records, segments), `refs` (fast-forward rules, compare-and-swap, tracking
//! refs), `session` (flush, upstream, log entries, the session ref value).
//!
//! Order of a push (what makes a killed push safe and a rerun O(missing)):
//! refresh the remote index; read every destination ref (with its ETag) and
//! refuse a non-fast-forward before sending anything; upload packs (chunks, then
//! nodes children first; each pack then its idx), then checkpoint records
//! (parents first), then one log segment per session, then each ref by
//! compare-and-swap, then the tracking refs (`q/`). Everything before the refs is
//! immutable and content-named, so a rerun skips what is there: the index says
//! which objects, the listing of `checkpoints/` which records.

mod closure;
mod refs;
mod session;
mod upload;

use std::collections::HashSet;
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::host::{Host, Serving};
use crate::id::{NodeId, ObjectId};
use crate::meta::{MetaOp, TrackKind};
use crate::refs::tracking;
use crate::remote::Remote;
use crate::store::{Kind as ObjKind, ObjectStore};

pub use closure::node_children;
pub use session::{UPSTREAM, upstream};

/// How often a forced push retries a lost compare-and-swap.
const FORCE_RETRIES: u32 = 3;

/// What to push.
#[derive(Debug, Clone, Default)]
pub struct PushRequest {
    /// `REF` (a local branch, or a session name), `SRC:DST` (a branch, session or
    /// any ref expression to remote branch `DST`; a session to remote session
    /// `DST`); empty: the current session.
    pub refs: Vec<String>,
    /// The current session (the socket's, or named by the caller); `None`: the
    /// only mounted one.
    pub session: Option<String>,
    /// Overwrite remote refs that are not fast-forwards.
    pub force: bool,
}

/// One ref a push moved (or found up to date).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct RefPushed {
    /// What was pushed, as named.
    pub src: String,
    /// The remote ref's name.
    pub dst: String,
    /// `branch` or `session`.
    pub kind: String,
    /// The checkpoint the remote ref named before (a session's HEAD), if any.
    pub old: Option<String>,
    /// The checkpoint it names now.
    pub new: Option<String>,
    /// `created`, `updated`, `forced` or `up-to-date`.
    pub status: String,
}

/// What a push did: the answer to `push`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PushReport {
    /// The remote.
    pub remote: String,
    /// The refs.
    pub refs: Vec<RefPushed>,
    /// Objects uploaded.
    pub objects: u64,
    /// Bytes uploaded.
    pub bytes: u64,
    /// Packs uploaded.
    pub packs: u64,
    /// Checkpoint records uploaded.
    pub checkpoints: u64,
    /// Wall time.
    pub seconds: f64,
}

/// Push what `req` names to `remote`; progress events go to `progress`.
pub fn push<H: Host>(
    h: &H,
    remote: &Remote,
    req: &PushRequest,
    progress: &mut dyn FnMut(Value),
) -> Result<PushReport> {
    push_env(&*h.store(), h, remote, req, progress)
}

/// Push session `session` to its upstream on `remote` (or to the same name),
/// as a plain `push SESSION` would (eviction to a remote uses it).
pub fn push_session<H: Host>(
    h: &H,
    remote: &Remote,
    session: &str,
    force: bool,
    progress: &mut dyn FnMut(Value),
) -> Result<PushReport> {
    let req = PushRequest {
        refs: vec![],
        session: Some(session.to_string()),
        force,
    };
    push(h, remote, &req, progress)
}

/// [`push`] of the store `store` served by `env` (a test's store nobody serves:
/// [`crate::host::Unserved`]).
pub fn push_env(
    store: &dyn ObjectStore,
    env: &dyn Serving,
    remote: &Remote,
    req: &PushRequest,
    progress: &mut dyn FnMut(Value),
) -> Result<PushReport> {
    let t0 = Instant::now();
    let items = resolve(store, env, remote, req)?;
    remote.index.refresh(&remote.client)?;
    let mut plan = Plan::default();
    for it in items {
        prepare(store, env, remote, req.force, it, &mut plan)?;
    }
    let listed = listed_checkpoints(remote)?;
    let ckpts = closure::checkpoints(store, &listed, &plan.required, &plan.optional)?;
    let mut roots: Vec<NodeId> = Vec::new();
    for (_, _, c) in ckpts.iter() {
        roots.push(c.root);
    }
    for r in &plan.roots {
        roots.push(
            NodeId::from_hex(r)
                .ok_or_else(|| Error::corrupt("push", format!("malformed root id {r:?}")))?,
        );
    }
    let index = remote.index.clone();
    let has = move |id: &ObjectId| index.has(id);
    let objects = closure::objects(store, &has, &roots)?;
    let mut up = upload::Uploader::new(
        &remote.client,
        &remote.index,
        remote.config.content_put(),
        objects.len() as u64,
        progress,
    );
    let send: HashSet<ObjectId> = objects.chunks.iter().copied().collect();
    up.send(store, ObjKind::Chunk, &objects.chunks, &send)?;
    up.send(store, ObjKind::Node, &objects.nodes, &HashSet::new())?;
    up.checkpoints(&ckpts)?;
    let (objects_sent, bytes, packs) = (up.objects, up.bytes, up.packs);
    let mut bytes = bytes;
    let mut ops: Vec<MetaOp> = Vec::new();
    let mut report = Vec::new();
    for w in plan.writes {
        let (pushed, op, b) = finish(remote, w)?;
        bytes += b;
        report.push(pushed);
        ops.extend(op);
    }
    if !ops.is_empty() {
        store.commit(ops)?;
    }
    Ok(PushReport {
        remote: remote.config.name.clone(),
        refs: report,
        objects: objects_sent,
        bytes,
        packs,
        checkpoints: ckpts.len() as u64,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// What one named ref is.
#[derive(Debug, Clone)]
enum What {
    /// A checkpoint to a remote branch.
    Branch { checkpoint: String },
    /// A local session to a remote session.
    Session { local: String },
}

/// One ref to push.
#[derive(Debug, Clone)]
struct Item {
    src: String,
    dst: String,
    what: What,
}

/// Resolve the request's refs (see [`PushRequest::refs`]).
fn resolve(
    store: &dyn ObjectStore,
    env: &dyn Serving,
    remote: &Remote,
    req: &PushRequest,
) -> Result<Vec<Item>> {
    if req.refs.is_empty() {
        let name = match &req.session {
            Some(s) => s.clone(),
            None => env.mounted(None)?.session.name().to_string(),
        };
        let rec = crate::session::load_record(store, &name)?
            .ok_or_else(|| Error::NotFound(format!("no session named {name}")))?;
        let dst = match upstream(&rec) {
            Some((r, s)) if r == remote.config.name => s,
            _ => name.clone(),
        };
        return Ok(vec![Item {
            src: name.clone(),
            dst,
            what: What::Session { local: name },
        }]);
    }
    let mut out = Vec::new();
    for spec in &req.refs {
        let (src, dst) = match spec.split_once(':') {
            Some((s, d)) if !s.is_empty() && !d.is_empty() => (s, Some(d)),
            Some(_) => {
                return Err(Error::Invalid(format!(
                    "bad push ref {spec:?}: want SRC:DST"
                )));
            }
            None => (spec.as_str(), None),
        };
        // A branch as the pushing session writes it (its own, a store-wide one,
        // SESSION/BRANCH: `refs::names`).
        let found = crate::refs::names::find(store, req.session.as_deref(), src, &|_| Ok(true))?;
        let item = if let Some((_, r)) = found {
            Item {
                src: src.into(),
                dst: dst.unwrap_or(src).into(),
                what: What::Branch {
                    checkpoint: r.checkpoint.to_hex(),
                },
            }
        } else if crate::session::load_record(store, src)?.is_some() {
            let dst = dst.unwrap_or(src);
            crate::session::validate_session_name(dst)?;
            Item {
                src: src.into(),
                dst: dst.into(),
                what: What::Session { local: src.into() },
            }
        } else if let Some(dst) = dst {
            let head = env
                .mounted(req.session.as_deref())
                .ok()
                .and_then(|t| t.session.record().head);
            let c = crate::refs::resolve(store, head, src)?;
            Item {
                src: src.into(),
                dst: dst.into(),
                what: What::Branch {
                    checkpoint: c.id.to_hex(),
                },
            }
        } else {
            return Err(Error::NotFound(format!(
                "no local branch or session named {src} (push a checkpoint or expression as SRC:DST)"
            )));
        };
        if matches!(item.what, What::Branch { .. }) {
            crate::refs::validate_ref_name(&item.dst)?;
        }
        out.push(item);
    }
    Ok(out)
}

/// A ref write planned by [`prepare`], done after the uploads.
struct Write {
    item: Item,
    kind: TrackKind,
    base: Option<refs::RemoteRef>,
    /// The new value (`None`: up to date, only the tracking ref is written).
    value: Option<Value>,
    /// A segment to upload first: (hash, bytes).
    segment: Option<(String, Vec<u8>)>,
    new: Option<String>,
    forced: bool,
    /// `--force`: a lost compare-and-swap is retried on the ETag read again.
    force: bool,
}

/// What the whole push sends, gathered ref by ref.
#[derive(Default)]
struct Plan {
    required: Vec<String>,
    optional: Vec<String>,
    roots: Vec<String>,
    writes: Vec<Write>,
}

/// Read `it`'s remote ref, apply the fast-forward rules, and add what it needs
/// to `plan`.
fn prepare(
    store: &dyn ObjectStore,
    env: &dyn Serving,
    remote: &Remote,
    force: bool,
    it: Item,
    plan: &mut Plan,
) -> Result<()> {
    let rname = &remote.config.name;
    match &it.what {
        What::Branch { checkpoint } => {
            let kind = TrackKind::Branch;
            let base = refs::read(&remote.client, kind, &it.dst)?;
            let old = base.as_ref().and_then(|b| b.checkpoint(kind));
            let (up_to_date, ff) = match &old {
                None => (false, true),
                Some(o) if o == checkpoint => (true, true),
                Some(o) => (
                    false,
                    refs::is_ancestor(store, &remote.client, o, checkpoint)?,
                ),
            };
            if !ff && !force {
                return Err(refs::rejected(
                    rname,
                    &it.src,
                    &it.dst,
                    "is not an ancestor of what you push",
                ));
            }
            plan.required.push(checkpoint.clone());
            let value = (!up_to_date).then(|| {
                serde_json::json!({"version": 1, "kind": "branch", "checkpoint": checkpoint,
                    "time": crate::clock::unix_secs()})
            });
            let new = Some(checkpoint.clone());
            plan.writes.push(Write {
                item: it,
                kind,
                base,
                value,
                segment: None,
                new,
                forced: !ff,
                force,
            });
        }
        What::Session { local } => {
            let kind = TrackKind::Session;
            let base = refs::read(&remote.client, kind, &it.dst)?;
            let rec = session::load(store, env, local, (rname, &it.dst))?;
            // Ours: the remote ref is still what this session took in last (pushed
            // from here or pulled into it) — not merely what a pull last saw.
            let track = tracking::get(store, rname, kind, &it.dst)?;
            let took = track.as_ref().and_then(|t| t.integrated_etag());
            let (ours, equal) = match &base {
                None => (true, false),
                Some(b) => (
                    b.etag.is_some() && b.etag.as_deref() == took,
                    session::same_state(&b.json, &rec),
                ),
            };
            // Or the session merged the remote's HEAD in (`treefork merge`): a
            // fast-forward of its checkpoints, though not of its log.
            let merged_in = match (&base, rec.head) {
                (Some(b), Some(h)) if !ours && !equal => {
                    let remote_head = b.json.get("record").and_then(|r| r.get("head"));
                    match remote_head.and_then(serde_json::Value::as_str) {
                        Some(rh) => refs::is_ancestor(store, &remote.client, rh, &h.to_hex())?,
                        None => false,
                    }
                }
                _ => false,
            };
            if !ours && !equal && !merged_in && !force {
                return Err(refs::rejected(
                    rname,
                    &it.src,
                    &it.dst,
                    "holds work this session has not taken in (pushed from elsewhere since \
                     this store last pushed it or pulled it into the session)",
                ));
            }
            // Build on the remote's log when it is ours (or the same state).
            let (since, mut logs) = match &base {
                Some(b) if ours || equal => {
                    (session::Seqs::of(&b.json)?, session::logs_of(&b.json)?)
                }
                _ => (session::Seqs::default(), vec![]),
            };
            let log = session::new_log(store, local, since)?;
            plan.optional.extend(log.checkpoints.iter().cloned());
            plan.roots.extend(log.roots.iter().cloned());
            plan.required.extend(rec.head.map(|h| h.to_hex()));
            plan.roots.extend([rec.root.to_hex(), rec.base.to_hex()]);
            let up_to_date = base.is_some() && equal && !log.changed;
            let new = rec.head.map(|h| h.to_hex());
            let forced = base.is_some() && !ours && !equal && !merged_in;
            let (value, segment) = if up_to_date {
                (None, None)
            } else {
                let seqs = log.seqs;
                let (hash, bytes) = crate::remote::segment::encode(&session::segment(&it.dst, log));
                logs.push(hash.clone());
                let v = session::ref_value(store, &it.dst, &rec, logs, seqs)?;
                (Some(v), Some((hash, bytes)))
            };
            plan.writes.push(Write {
                item: it,
                kind,
                base,
                value,
                segment,
                new,
                forced,
                force,
            });
        }
    }
    Ok(())
}

/// Upload `w`'s segment, move its ref; the report line, the tracking ref op and
/// the bytes sent.
fn finish(remote: &Remote, w: Write) -> Result<(RefPushed, Option<MetaOp>, u64)> {
    let rname = &remote.config.name;
    let old = w.base.as_ref().and_then(|b| b.checkpoint(w.kind));
    let mut bytes = 0;
    let line = |status: &str| RefPushed {
        src: w.item.src.clone(),
        dst: w.item.dst.clone(),
        kind: w.kind.as_str().to_string(),
        old: old.clone(),
        new: w.new.clone(),
        status: status.to_string(),
    };
    let Some(value) = w.value else {
        let b = w
            .base
            .clone()
            .expect("up to date means the remote ref exists");
        let op = refs::tracking_op(rname, w.kind, &w.item.dst, b.etag, b.json);
        return Ok((line("up-to-date"), Some(op), 0));
    };
    if let Some((hash, seg)) = w.segment {
        bytes += seg.len() as u64;
        remote.client.put(
            &crate::remote::layout::log_key(&hash),
            seg,
            remote.config.content_put(),
        )?;
    }
    let body = serde_json::to_vec(&value).expect("ref value serializes");
    bytes += body.len() as u64;
    let conditional = remote.config.conditional_writes;
    let mut base = w.base.clone();
    let mut tries = 0;
    let etag = loop {
        let r = refs::cas(
            &remote.client,
            w.kind,
            &w.item.dst,
            &w.item.src,
            body.clone(),
            base.as_ref(),
            conditional,
        );
        match r {
            Err(Error::NonFastForward(_)) if w.force && tries < FORCE_RETRIES => {
                tries += 1;
                base = refs::read(&remote.client, w.kind, &w.item.dst)?;
            }
            r => break r?,
        }
    };
    let status = match (&w.base, w.forced) {
        (None, _) => "created",
        (Some(_), true) => "forced",
        (Some(_), false) => "updated",
    };
    let op = refs::tracking_op(rname, w.kind, &w.item.dst, etag, value);
    Ok((line(status), Some(op), bytes))
}

/// The checkpoints the remote lists (hex).
fn listed_checkpoints(remote: &Remote) -> Result<HashSet<String>> {
    Ok(remote
        .client
        .list(crate::remote::layout::CHECKPOINTS_DIR)?
        .into_iter()
        .filter_map(|m| crate::remote::layout::parse_checkpoint_key(&m.key))
        .map(|id| crate::remote::layout::hex32(&id))
        .collect())
}

#[cfg(test)]
mod tests;
