//! Which messages of the `messages` stream are visible: the session's hidden
//! ranges (`v/<session>`), which `rewind` extends and `undo` of a rewind sets back.
//!
//! A range `[a, b]` hides messages `a..=b`. Ranges are kept sorted and merged. A
//! rewind to message `m` when the stream ends at `n` hides `[m+1, n]`: messages
//! appended later (seq > n) are visible again, so the conversation goes on from
//! `m`. The operation recording a rewind (or an undo of one) keeps the ranges
//! before and after in its meta (`"conversation": {"before": .., "after": ..}`),
//! which is how `undo`, `redo` and `op restore` bring them back.

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::store::ObjectStore;

/// Hidden ranges, sorted, disjoint, inclusive.
pub type Hidden = Vec<[u64; 2]>;

/// The hidden ranges of `session` (none when it never rewound).
pub fn hidden(store: &dyn ObjectStore, session: &str) -> Result<Hidden> {
    match store.meta_get(&meta::conversation_key(session))? {
        None => Ok(Vec::new()),
        Some(v) => {
            let j: Value = serde_json::from_slice(&v)
                .map_err(|e| Error::corrupt(format!("conversation {session}"), e.to_string()))?;
            parse(&j["hidden"])
                .ok_or_else(|| Error::corrupt(format!("conversation {session}"), "bad ranges"))
        }
    }
}

/// Ranges from their JSON form (`[[a, b], ...]`).
pub fn parse(v: &Value) -> Option<Hidden> {
    v.as_array()?
        .iter()
        .map(|r| {
            let a = r.get(0)?.as_u64()?;
            let b = r.get(1)?.as_u64()?;
            (a <= b).then_some([a, b])
        })
        .collect()
}

/// The op storing `h` as `session`'s hidden ranges.
pub fn put_op(session: &str, h: &Hidden) -> MetaOp {
    let key = meta::conversation_key(session);
    if h.is_empty() {
        return MetaOp::Delete(key);
    }
    MetaOp::Put(
        key,
        serde_json::to_vec(&json!({"version": 1, "hidden": h})).expect("serializes"),
    )
}

/// Whether `seq` is hidden.
pub fn is_hidden(h: &Hidden, seq: u64) -> bool {
    h.iter().any(|[a, b]| (*a..=*b).contains(&seq))
}

/// `h` with `[a, b]` hidden too (sorted, merged).
pub fn with_range(h: &Hidden, a: u64, b: u64) -> Hidden {
    let mut all = h.clone();
    all.push([a, b]);
    all.sort();
    let mut out: Hidden = Vec::new();
    for [a, b] in all {
        match out.last_mut() {
            Some(last) if a <= last[1].saturating_add(1) => last[1] = last[1].max(b),
            _ => out.push([a, b]),
        }
    }
    out
}

/// The `conversation` entry of an operation's meta.
pub fn op_meta(before: &Hidden, after: &Hidden) -> Value {
    json!({"before": before, "after": after})
}

/// The ranges an operation's meta records on side `side` (`before`/`after`), if
/// the operation changed the conversation.
pub fn of_op(meta: &serde_json::Map<String, Value>, side: &str) -> Option<Hidden> {
    parse(meta.get("conversation")?.get(side)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_hide() {
        let h = with_range(&vec![], 5, 7);
        let h = with_range(&h, 8, 9);
        assert_eq!(h, vec![[5, 9]]);
        let h = with_range(&h, 2, 3);
        assert_eq!(h, vec![[2, 3], [5, 9]]);
        assert!(is_hidden(&h, 6) && !is_hidden(&h, 4) && !is_hidden(&h, 10));
        assert_eq!(parse(&json!(h)), Some(h.clone()));
        assert_eq!(parse(&json!([[3, 2]])), None);
        let m = serde_json::from_value(json!({"conversation": op_meta(&vec![], &h)})).unwrap();
        assert_eq!(of_op(&m, "after"), Some(h));
        assert_eq!(of_op(&m, "before"), Some(vec![]));
    }
}
