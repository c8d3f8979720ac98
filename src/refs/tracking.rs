//! Remote tracking refs: what this store last saw of a remote's branches and
//! sessions (`q/<remote>\0<b|s>\0<name>`, see `crate::meta::tracking_key`).
//!
//! Owns: the record ([`Tracking`], JSON v1) and its reads and writes. Push and
//! pull (`crate::remote`) write them after a successful exchange; ref resolution
//! of `REMOTE/NAME` (`refs::spec`) reads them; `remote rm` drops them all
//! ([`delete_all_ops`]). They live in `refs`, below the remote tier, because
//! resolving a ref name must not import the remote tier.
//!
//! Invariants: `value` is the remote ref's JSON exactly as read or written, and
//! `etag` the ETag it had then. `integrated` is the remote ref as the local
//! counterpart last took it in (written by this store's push, or moved into the
//! local session by a pull): a push builds on the remote ref only while it still
//! carries that ETag, and a pull fast-forwards a session only from that state. A
//! pull that only looks (the local session diverged, or is mounted) moves `value`
//! and `etag`, never `integrated` — else a push after it would overwrite what it
//! never took in (issue 23, defect 2).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
pub use crate::meta::TrackKind;
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;

/// Version of the tracking record (2: `integrated`; a version-1 record has none,
/// so it integrates nothing until a pull or push writes it again).
pub const TRACKING_VERSION: u32 = 2;

/// A remote ref as the local counterpart took it in (see the module invariants).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Integrated {
    /// Its ETag.
    pub etag: Option<String>,
    /// Its JSON.
    pub value: Value,
}

/// A tracking ref.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tracking {
    /// Record version ([`TRACKING_VERSION`]).
    pub version: u32,
    /// `"branch"` or `"session"`.
    pub kind: String,
    /// The checkpoint it names (a branch's checkpoint, a session's HEAD), hex.
    pub checkpoint: Option<String>,
    /// The remote ref's ETag when last seen.
    pub etag: Option<String>,
    /// When it was last seen (unix seconds).
    pub time: i64,
    /// The remote ref's JSON as last seen.
    pub value: Value,
    /// The remote ref as the local counterpart last took it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrated: Option<Integrated>,
}

impl Tracking {
    /// A record of `kind` (time: now) for a remote ref the local counterpart
    /// now includes: pushed from here, or pulled into it.
    pub fn new(
        kind: TrackKind,
        checkpoint: Option<String>,
        etag: Option<String>,
        value: Value,
    ) -> Tracking {
        Tracking {
            version: TRACKING_VERSION,
            kind: kind.as_str().to_string(),
            checkpoint,
            integrated: Some(Integrated {
                etag: etag.clone(),
                value: value.clone(),
            }),
            etag,
            time: crate::clock::unix_secs(),
            value,
        }
    }

    /// This record after a look that took nothing in: the remote ref seen now,
    /// what was integrated before kept.
    pub fn seen(self, previous: Option<&Tracking>) -> Tracking {
        Tracking {
            integrated: previous.and_then(|p| p.integrated.clone()),
            ..self
        }
    }

    /// The ETag the local counterpart includes, if any.
    pub fn integrated_etag(&self) -> Option<&str> {
        self.integrated.as_ref().and_then(|i| i.etag.as_deref())
    }

    /// The op writing it as `remote`'s ref `name`.
    pub fn op(&self, remote: &str, kind: TrackKind, name: &str) -> MetaOp {
        MetaOp::Put(
            meta::tracking_key(remote, kind, name),
            serde_json::to_vec(self).expect("tracking ref serializes"),
        )
    }

    fn decode(what: &str, v: &[u8]) -> Result<Tracking> {
        serde_json::from_slice(v).map_err(|e| Error::Corrupt {
            what: format!("tracking ref {what}"),
            reason: e.to_string(),
        })
    }
}

/// The tracking ref of `remote`'s ref `name` of `kind`, if any.
pub fn get(
    store: &dyn ObjectStore,
    remote: &str,
    kind: TrackKind,
    name: &str,
) -> Result<Option<Tracking>> {
    match store.meta_get(&meta::tracking_key(remote, kind, name))? {
        None => Ok(None),
        Some(v) => Tracking::decode(&format!("{remote}/{name}"), &v).map(Some),
    }
}

/// Every tracking ref of `remote` (of `kind` when given): (kind, name, record),
/// in key order.
pub fn list(
    store: &dyn ObjectStore,
    remote: &str,
    kind: Option<TrackKind>,
) -> Result<Vec<(TrackKind, String, Tracking)>> {
    let range = KeyRange::tracking(remote, kind);
    let mut out = Vec::new();
    for (k, v) in store.meta_range(&range, usize::MAX)? {
        let Some((_, kind, name)) = meta::tracking_parts(&k) else {
            continue;
        };
        out.push((kind, name.to_string(), Tracking::decode(name, &v)?));
    }
    Ok(out)
}

/// Ops deleting every tracking ref of `remote`.
pub fn delete_all_ops(store: &dyn ObjectStore, remote: &str) -> Result<Vec<MetaOp>> {
    store.meta_delete_range_ops(&KeyRange::tracking(remote, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    #[test]
    fn tracking_refs_round_trip_per_remote() {
        let s = MemStore::default();
        let t = Tracking::new(
            TrackKind::Branch,
            Some("ab".into()),
            Some("\"e1\"".into()),
            serde_json::json!({"kind": "branch"}),
        );
        let u = Tracking::new(TrackKind::Session, None, None, Value::Null);
        s.commit(vec![
            t.op("origin", TrackKind::Branch, "team/main"),
            u.op("origin", TrackKind::Session, "s1"),
            t.op("origin2", TrackKind::Branch, "main"),
        ])
        .unwrap();
        assert_eq!(
            get(&s, "origin", TrackKind::Branch, "team/main").unwrap(),
            Some(t.clone())
        );
        assert_eq!(
            get(&s, "origin", TrackKind::Session, "team/main").unwrap(),
            None
        );
        let all = list(&s, "origin", None).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(
            list(&s, "origin", Some(TrackKind::Session)).unwrap()[0].1,
            "s1"
        );
        s.commit(delete_all_ops(&s, "origin").unwrap()).unwrap();
        assert!(list(&s, "origin", None).unwrap().is_empty());
        assert_eq!(list(&s, "origin2", None).unwrap().len(), 1);
    }
}
