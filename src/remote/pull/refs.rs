//! Pull's view of remote refs and checkpoint records: listing and reading refs
//! (with their ETags), and fetching the checkpoint records of their ancestry.
//!
//! Invariants: a ref is validated (`refval::decode`, its kind matching its
//! directory, its name by the local rules) before anything uses it; a fetched
//! checkpoint record is kept only if `Checkpoint::decode` accepts it, its id is
//! the one asked for and `id_matches` (the id is the hash of the record).

use std::collections::{HashSet, VecDeque};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::meta::{MetaOp, TrackKind};
use crate::refs::Checkpoint;
use crate::remote::client::Client;
use crate::remote::layout;
use crate::remote::refval::{self, RefValue};
use crate::store::ObjectStore;

/// A remote ref as read.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Branch or session.
    pub kind: TrackKind,
    /// Its name on the remote.
    pub name: String,
    /// Its ETag.
    pub etag: Option<String>,
    /// Its JSON, as read.
    pub json: Value,
    /// Its value.
    pub value: RefValue,
}

impl Fetched {
    /// The checkpoint it names (a branch's; a session's HEAD).
    pub fn checkpoint(&self) -> Option<String> {
        self.value.checkpoint().map(str::to_string)
    }

    /// The tree roots it names: a branch's checkpoint root is read from the
    /// record by the caller; a session's workspace root is here.
    pub fn workspace_root(&self) -> Option<String> {
        match &self.value {
            RefValue::Session(s) => s.root().map(str::to_string),
            RefValue::Branch(_) => None,
        }
    }
}

/// Read ref `name` of `kind`, if it exists.
pub fn read(client: &Client, kind: TrackKind, name: &str) -> Result<Option<Fetched>> {
    let k = layout::ref_key(kind, name);
    let Some(got) = client.get(&k, layout::Body::Ref)? else {
        return Ok(None);
    };
    let value = refval::decode(&got.bytes)?;
    if value.kind() != kind.as_str() {
        return Err(Error::corrupt(
            format!("remote ref {k}"),
            format!("not a {} ref", kind.as_str()),
        ));
    }
    let json: Value = serde_json::from_slice(&got.bytes)
        .map_err(|e| Error::corrupt(format!("remote ref {k}"), e.to_string()))?;
    Ok(Some(Fetched {
        kind,
        name: name.to_string(),
        etag: got.etag,
        json,
        value,
    }))
}

/// Read `name` as a branch, else as a session; `not_found` when neither exists.
pub fn read_any(client: &Client, name: &str) -> Result<Fetched> {
    for kind in [TrackKind::Branch, TrackKind::Session] {
        let valid = match kind {
            TrackKind::Branch => crate::refs::validate_ref_name(name).is_ok(),
            TrackKind::Session => crate::session::validate_session_name(name).is_ok(),
        };
        if valid && let Some(f) = read(client, kind, name)? {
            return Ok(f);
        }
    }
    Err(Error::NotFound(format!(
        "remote {} has no branch or session named {name:?}",
        client.name()
    )))
}

/// Every ref on the remote (branches, then sessions); an unreadable one is
/// logged and skipped.
pub fn list_all(client: &Client) -> Result<Vec<Fetched>> {
    let mut out = Vec::new();
    for kind in [TrackKind::Branch, TrackKind::Session] {
        let mut names: Vec<String> = client
            .list(layout::refs_dir(kind))?
            .into_iter()
            .filter_map(|m| layout::parse_ref_key(kind, &m.key))
            .collect();
        names.sort();
        for n in names {
            match read(client, kind, &n) {
                Ok(Some(f)) => out.push(f),
                Ok(None) => {}
                Err(e) => log::warn!("remote {}: ref {n} skipped: {e}", client.name()),
            }
        }
    }
    Ok(out)
}

/// Fetch the checkpoint records of `heads` and all their ancestors that the local
/// store lacks (verified). Returns the ops storing them (not committed).
pub fn fetch_checkpoints(
    store: &dyn ObjectStore,
    client: &Client,
    heads: impl IntoIterator<Item = String>,
) -> Result<Vec<MetaOp>> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut queue: VecDeque<String> = heads.into_iter().collect();
    let mut ops = Vec::new();
    while !queue.is_empty() {
        // One level at a time: the records missing at this level in one batch.
        let mut missing = Vec::new();
        for hex in queue.drain(..) {
            if !seen.insert(hex.clone()) {
                continue;
            }
            let Some(id) = CheckpointId::from_hex(&hex) else {
                return Err(Error::corrupt(
                    "remote ref",
                    format!("bad checkpoint {hex:?}"),
                ));
            };
            if store.meta_get(&crate::meta::checkpoint_key(&id))?.is_none() {
                missing.push(hex);
            }
        }
        let keys: Vec<String> = missing.iter().map(|h| layout::checkpoint_key(h)).collect();
        for (hex, got) in missing
            .iter()
            .zip(client.get_many(&keys, layout::Body::Checkpoint)?)
        {
            let Some(got) = got else {
                return Err(Error::Remote {
                    remote: client.name().to_string(),
                    detail: format!("checkpoint {hex} is named but not on the remote"),
                });
            };
            let c = Checkpoint::decode(hex, &got.bytes)?;
            if c.id.to_hex() != *hex || !c.id_matches() {
                return Err(Error::corrupt(
                    format!("remote checkpoint {hex}"),
                    "its id is not the hash of its record",
                ));
            }
            queue.extend(c.parents.iter().map(|p| p.to_hex()));
            ops.push(c.op());
        }
    }
    Ok(ops)
}

/// Whether checkpoint `old` is `new` or an ancestor of it (local records only;
/// fetch first): a checkpoint without a local record (or not an id) has no
/// parents here; a record that does not read or decode is the error.
pub fn is_ancestor(store: &dyn ObjectStore, old: &str, new: &str) -> Result<bool> {
    crate::refs::is_ancestor_by(old, new, &mut |h| {
        let Some(id) = CheckpointId::from_hex(h) else {
            return Ok(Vec::new());
        };
        Ok(crate::refs::load_present(store, &id)?
            .map(|c| c.parents.iter().map(|p| p.to_hex()).collect())
            .unwrap_or_default())
    })
}
