//! Retention of `auto/...` refs (saved before checkout, restore, undo, adopt; a
//! session's own, `SESSION:auto/...`, or store-wide ones from older stores):
//! applied at `gc` (the daemon's, before marking). Per session (the session of the
//! checkpoint a ref names), a ref is kept while it is younger than the session's
//! `auto_ref_retention_days` setting **or** among its newest
//! `auto_ref_retention_count`; older ones beyond that count are deleted.
//!
//! Nothing is lost that the operation log keeps: each such save is also named by
//! the operation record of the op that made it (gc roots include every
//! operation's views), so dropping the ref only drops a name.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::meta::MetaOp;
use crate::refs;
use crate::store::ObjectStore;

/// Default: keep auto refs 7 days... or the newest 100 of a session (defined with
/// the session settings they default, in `refs::session_record`).
pub use crate::refs::session_record::{
    AUTO_REF_DEFAULT_COUNT as DEFAULT_COUNT, AUTO_REF_DEFAULT_DAYS as DEFAULT_DAYS,
};

/// The rule (the operation log's: young **or** among the newest N).
pub use crate::oplog::retention::Policy;

/// The default policy for auto refs.
pub fn default_policy() -> Policy {
    Policy {
        days: DEFAULT_DAYS,
        count: DEFAULT_COUNT,
    }
}

/// The ops deleting the `auto/...` refs past retention at `now` (unix seconds);
/// `policy` gives each session's policy (by the session its checkpoint names).
pub fn prune_ops(
    store: &dyn ObjectStore,
    now: i64,
    policy: &dyn Fn(&str) -> Policy,
) -> Result<Vec<MetaOp>> {
    // session -> [(created, name)]
    let mut by_session: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
    for (name, r) in refs::list_refs(store)? {
        if !refs::names::short(&name).starts_with("auto/") {
            continue;
        }
        let session = refs::load(store, &r.checkpoint)
            .ok()
            .map(|c| c.session)
            .unwrap_or_default();
        by_session
            .entry(session)
            .or_default()
            .push((r.created, name));
    }
    let mut ops = Vec::new();
    for (session, mut list) in by_session {
        list.sort();
        let times: Vec<i128> = list
            .iter()
            .map(|(created, _)| i128::from(*created) * 1_000_000_000)
            .collect();
        let now_ns = i128::from(now) * 1_000_000_000;
        for i in crate::oplog::retention::expired_positions(&times, policy(&session), now_ns) {
            ops.push(refs::delete_ref_op(&list[i].1));
        }
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    #[test]
    fn keeps_young_or_newest() {
        let s = MemStore::default();
        let mut ops = Vec::new();
        // Five refs to an unknown checkpoint (session ""), ages 0..5 days.
        for d in 0..5i64 {
            let r = refs::RefRecord {
                checkpoint: crate::id::CheckpointId([0; 32]),
                created: 1_000_000 - d * 86_400,
            };
            ops.push(refs::ref_op(&format!("auto/before-checkout-{d}"), &r));
        }
        let keep = refs::RefRecord {
            checkpoint: crate::id::CheckpointId([0; 32]),
            created: 0,
        };
        ops.push(refs::ref_op("main", &keep));
        s.commit(ops).unwrap();
        let p = |_: &str| Policy { days: 2, count: 1 };
        let del = prune_ops(&s, 1_000_000, &p).unwrap();
        // Kept: the newest (day 0) and those younger than 2 days (day 1); day 2 is
        // exactly at the cutoff (kept); days 3 and 4 go. `main` is never touched.
        assert_eq!(del.len(), 2, "{del:?}");
        s.commit(del).unwrap();
        let names: Vec<String> = refs::list_refs(&s)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            [
                "auto/before-checkout-0",
                "auto/before-checkout-1",
                "auto/before-checkout-2",
                "main"
            ]
        );
        let all = |_: &str| Policy { days: 0, count: 0 };
        assert_eq!(prune_ops(&s, 1_000_001, &all).unwrap().len(), 3);
    }
}
