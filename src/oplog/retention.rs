//! How long operation records are kept: by default 30 days or the last 10,000
//! operations of a session, whichever keeps more (the session's settings
//! `op_retention_days` and `op_retention_count`). Pruning runs at `gc`, before
//! marking, so what a dropped record alone kept alive becomes reclaimable then.

use crate::error::Result;
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;

/// Default age limit, in days.
pub const DEFAULT_DAYS: u64 = 30;
/// Default count limit.
pub const DEFAULT_COUNT: u64 = 10_000;

/// A retention rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Keep records younger than this many days.
    pub days: u64,
    /// Keep the newest this many records.
    pub count: u64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            days: DEFAULT_DAYS,
            count: DEFAULT_COUNT,
        }
    }
}

/// Of records `(seq, time_ns)` given oldest first, those to drop at `now_ns`:
/// older than the age limit *and* outside the newest `count`.
pub fn expired(records: &[(u64, i128)], policy: Policy, now_ns: i128) -> Vec<u64> {
    let times: Vec<i128> = records.iter().map(|r| r.1).collect();
    expired_positions(&times, policy, now_ns)
        .into_iter()
        .map(|i| records[i].0)
        .collect()
}

/// The rule itself, on times (ns) given oldest first: the positions to drop.
/// Also the rule of `auto/...` refs (`lifecycle::autorefs`).
pub fn expired_positions(times_oldest_first: &[i128], policy: Policy, now_ns: i128) -> Vec<usize> {
    let keep_from = times_oldest_first
        .len()
        .saturating_sub(usize::try_from(policy.count).unwrap_or(usize::MAX));
    let horizon = now_ns - i128::from(policy.days) * 86_400 * 1_000_000_000;
    (0..keep_from)
        .filter(|&i| times_oldest_first[i] < horizon)
        .collect()
}

/// The ops deleting `session`'s expired records and their attachments.
pub fn prune_ops(store: &dyn ObjectStore, session: &str, policy: Policy) -> Result<Vec<MetaOp>> {
    let mut recs = Vec::new();
    for (k, v) in store.meta_range(&KeyRange::ops(session), usize::MAX)? {
        let Some((_, seq)) = meta::op_parts(&k) else {
            continue;
        };
        // An unreadable record is kept (fsck reports it), never silently dropped.
        if let Ok(op) = super::Operation::decode(&format!("{session}#{seq}"), &v) {
            recs.push((seq, op.time_ns));
        }
    }
    let now = crate::clock::unix_ns();
    let mut ops = Vec::new();
    for seq in expired(&recs, policy, now) {
        ops.push(MetaOp::Delete(meta::op_key(session, seq)));
        ops.extend(store.meta_delete_range_ops(&KeyRange::attachments(session, Some(seq)))?);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const DAY: i128 = 86_400 * 1_000_000_000;

    #[test]
    fn whichever_keeps_more() {
        let now = 100 * DAY;
        // Five records, two of them older than 30 days.
        let recs = [
            (1, DAY),
            (2, 2 * DAY),
            (3, 90 * DAY),
            (4, 95 * DAY),
            (5, now),
        ];
        let p = Policy { days: 30, count: 2 };
        assert_eq!(expired(&recs, p, now), vec![1, 2]);
        // A count covering everything keeps everything, however old.
        assert!(
            expired(
                &recs,
                Policy {
                    days: 30,
                    count: 10
                },
                now
            )
            .is_empty()
        );
        // An age covering everything keeps everything, whatever the count.
        assert!(
            expired(
                &recs,
                Policy {
                    days: 1000,
                    count: 0
                },
                now
            )
            .is_empty()
        );
    }

    proptest! {
        #[test]
        fn never_drops_the_newest_or_the_young(
            times in proptest::collection::vec(0i128..200, 0..50),
            days in 0u64..100, count in 0u64..60,
        ) {
            let mut times = times;
            times.sort();
            let recs: Vec<(u64, i128)> =
                times.iter().enumerate().map(|(i, t)| (i as u64 + 1, t * DAY)).collect();
            let now = 200 * DAY;
            let gone = expired(&recs, Policy { days, count }, now);
            let newest: Vec<u64> = recs.iter().rev().take(count as usize).map(|r| r.0).collect();
            for g in &gone {
                prop_assert!(!newest.contains(g));
                let t = recs[*g as usize - 1].1;
                prop_assert!(t < now - days as i128 * DAY);
            }
        }
    }
}
