//! Remote tracking refs: what this store last saw of a remote's branches and
//! sessions (`q/<remote>\0<b|s>\0<name>`, see `crate::meta::tracking_key`).
//!
//! Owns: the record ([`Tracking`], JSON v1) and its reads and writes. Push and
//! pull (`crate::remote`) write them after a successful exchange; ref resolution
//! of `REMOTE/NAME` (`refs::spec`) reads them; `remote rm` drops them all
//! ([`delete_all_ops`]). They live in `refs`, below the remote tier, because
//! resolving a ref name must not import the remote tier.
//!
//! Invariant: `value` is the remote ref's JSON exactly as read or written, and
//! `etag` the ETag it had then (the base of the next compare-and-swap).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
pub use crate::meta::TrackKind;
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;

/// Version of the tracking record.
pub const TRACKING_VERSION: u32 = 1;

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
}

impl Tracking {
    /// A record of `kind` (time: now).
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
            etag,
            time: crate::clock::unix_secs(),
            value,
        }
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
