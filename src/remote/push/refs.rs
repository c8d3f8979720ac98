//! Moving remote refs: reading them with their ETag, the fast-forward rules, the
//! compare-and-swap write and the tracking refs written after.
//!
//! Owns: [`RemoteRef`] (a remote ref as read), [`is_ancestor`] (the branch
//! fast-forward test, which fetches a checkpoint record from the remote when the
//! local store lacks it), [`cas`] (the conditional write, with the refusal
//! message), and the tracking-ref op.
//!
//! Invariants: a ref is only ever written conditionally on what was read
//! (`If-Match` on its ETag, or `If-None-Match: *` when it did not exist), unless
//! the remote was added as single-writer without conditional writes; a lost
//! compare-and-swap is [`Error::NonFastForward`], never an overwrite.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::meta::{MetaOp, TrackKind};
use crate::refs::Checkpoint;
use crate::refs::tracking::Tracking;
use crate::remote::client::{Client, Put, PutIf};
use crate::remote::layout;
use crate::store::ObjectStore;

/// A remote ref as read.
#[derive(Debug, Clone)]
pub struct RemoteRef {
    /// Its ETag (the base of the next compare-and-swap).
    pub etag: Option<String>,
    /// Its JSON.
    pub json: Value,
}

impl RemoteRef {
    /// The checkpoint it names: a branch's, a session's HEAD.
    pub fn checkpoint(&self, kind: TrackKind) -> Option<String> {
        let p = match kind {
            TrackKind::Branch => "/checkpoint",
            TrackKind::Session => "/record/head",
        };
        self.json
            .pointer(p)
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

/// Read remote ref `name` of `kind` (validated as a ref value of that kind).
pub fn read(client: &Client, kind: TrackKind, name: &str) -> Result<Option<RemoteRef>> {
    let k = layout::ref_key(kind, name);
    let Some(got) = client.get(&k, layout::Body::Ref)? else {
        return Ok(None);
    };
    crate::remote::refval::decode(&got.bytes)?;
    let json: Value = serde_json::from_slice(&got.bytes)
        .map_err(|e| Error::corrupt(format!("remote ref {k}"), e.to_string()))?;
    if json.get("kind").and_then(Value::as_str) != Some(kind.as_str()) {
        return Err(Error::corrupt(
            format!("remote ref {k}"),
            format!("not a {} ref", kind.as_str()),
        ));
    }
    Ok(Some(RemoteRef {
        etag: got.etag,
        json,
    }))
}

/// A checkpoint record, from the local store or else from the remote (verified).
fn load_checkpoint(
    store: &dyn ObjectStore,
    client: &Client,
    hex: &str,
) -> Result<Option<Checkpoint>> {
    let Some(id) = CheckpointId::from_hex(hex) else {
        return Ok(None);
    };
    if let Some(b) = store.meta_get(&crate::meta::checkpoint_key(&id))? {
        return Checkpoint::decode(hex, &b).map(Some);
    }
    let Some(got) = client.get(&layout::checkpoint_key(hex), layout::Body::Checkpoint)? else {
        return Ok(None);
    };
    let c = Checkpoint::decode(hex, &got.bytes)?;
    if c.id.to_hex() != hex || !c.id_matches() {
        return Err(Error::corrupt(
            format!("remote checkpoint {hex}"),
            "its id is not the hash of its record",
        ));
    }
    Ok(Some(c))
}

/// Whether checkpoint `old` is `new` or one of its ancestors (a breadth-first
/// walk of `new`'s parents; records the local store lacks come from the remote).
pub fn is_ancestor(store: &dyn ObjectStore, client: &Client, old: &str, new: &str) -> Result<bool> {
    crate::refs::is_ancestor_by(old, new, &mut |h| {
        Ok(load_checkpoint(store, client, h)?
            .map_or_else(Vec::new, |c| c.parents.iter().map(|p| p.to_hex()).collect()))
    })
}

/// The refusal of a push of `src` to `remote`'s `dst`.
pub fn rejected(remote: &str, src: &str, dst: &str, why: &str) -> Error {
    Error::NonFastForward(format!(
        "push of {src} rejected: remote ref {remote}/{dst} {why}; `treefork pull {remote}`, then `treefork merge {remote}/{dst}` in the session, then push again (or push --force to replace it)"
    ))
}

/// Write `bytes` at ref `name` of `kind` if it is still what was read (`base`;
/// `None`: it did not exist). `conditional: false` (a single-writer remote
/// without conditional writes) writes unconditionally. Returns the new ETag
/// (`None` when the server gave none and a HEAD found none). A lost race is
/// [`Error::NonFastForward`] naming `src`.
pub fn cas(
    client: &Client,
    kind: TrackKind,
    name: &str,
    src: &str,
    bytes: Vec<u8>,
    base: Option<&RemoteRef>,
    conditional: bool,
) -> Result<Option<String>> {
    let k = layout::ref_key(kind, name);
    let cond = match (
        conditional,
        base.is_some(),
        base.and_then(|b| b.etag.as_deref()),
    ) {
        (false, _, _) => PutIf::Always,
        (true, false, _) => PutIf::Absent,
        (true, true, Some(e)) => PutIf::Matches(e.to_string()),
        (true, true, None) => {
            return Err(Error::Remote {
                remote: client.name().to_string(),
                detail: format!("{k} has no ETag: cannot update it safely"),
            });
        }
    };
    match client.put(&k, bytes, cond)? {
        Put::Written(Some(e)) => Ok(Some(e)),
        Put::Written(None) => Ok(client.head(&k)?.and_then(|m| m.etag)),
        Put::Exists | Put::Moved => Err(rejected(
            client.name(),
            src,
            name,
            "moved while this push ran (another push won)",
        )),
    }
}

/// The op writing the tracking ref of `remote`'s `name` of `kind`, as written
/// or found (`json`, with its `etag`).
pub fn tracking_op(
    remote: &str,
    kind: TrackKind,
    name: &str,
    etag: Option<String>,
    json: Value,
) -> MetaOp {
    let r = RemoteRef { etag, json };
    let t = Tracking::new(kind, r.checkpoint(kind), r.etag.clone(), r.json);
    t.op(remote, kind, name)
}
