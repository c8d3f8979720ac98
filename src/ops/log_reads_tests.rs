//! What the op-log readers an agent can call cost (`timeline`, `history`,
//! `@{-N}`): records decoded, on a log of 20,000 records.

use crate::oplog::tests::{decoded_by, long_log};
use crate::oplog::walk::{SCAN_LIMIT, Walked};
use crate::store::MemStore;

fn store() -> MemStore {
    let store = MemStore::default();
    // A checkout every 1000 records (the newest is 20,000), notes between.
    long_log(&store, "s", 20_000, 1000);
    store
}

#[test]
fn timeline_reads_its_limit_not_the_log() {
    let store = store();
    let ((ops, walked), n) =
        decoded_by(|| super::timeline::select(&store, "s", None, None, Some(5)).unwrap());
    let seqs: Vec<u64> = ops.iter().map(|o| o.seq).collect();
    assert_eq!(seqs, vec![19_996, 19_997, 19_998, 19_999, 20_000]);
    assert_eq!((walked, n), (Walked::Stopped, 5));
    // A filter nothing matches searches at most SCAN_LIMIT records, and says so.
    let ((ops, walked), n) =
        decoded_by(|| super::timeline::select(&store, "s", None, Some("daemon"), Some(5)).unwrap());
    assert!(ops.is_empty());
    assert_eq!((walked, n), (Walked::Exhausted, SCAN_LIMIT as u64));
    // A limit past MAX_SHOWN is cut to it.
    let ((ops, _), n) =
        decoded_by(|| super::timeline::select(&store, "s", None, None, Some(usize::MAX)).unwrap());
    let max = crate::oplog::walk::MAX_SHOWN;
    assert_eq!((ops.len(), n), (max, max as u64));
}

#[test]
fn history_reads_its_limit_not_the_log() {
    let store = store();
    // No execs at all: the walk gives up after SCAN_LIMIT records.
    let ((execs, walked), n) =
        decoded_by(|| super::exec::history::newest(&store, "s", Some(5)).unwrap());
    assert!(execs.is_empty());
    assert_eq!((walked, n), (Walked::Exhausted, SCAN_LIMIT as u64));
}

#[test]
fn previous_checkout_walks_back_to_the_nth_only() {
    let store = store();
    // @{-3}: the third newest checkout is record 18,000; records 20,000 down to
    // 18,000 decoded (2,001), not the 20,000 of the log.
    let (head, n) = decoded_by(|| super::refctx::previous_checkout(&store, "s", 3).unwrap());
    assert_eq!(head.to_hex(), format!("{:064x}", 18_000));
    assert_eq!(n, 2_001);
    // N is bounded, and refused before anything is read.
    let (r, n) = decoded_by(|| super::refctx::previous_checkout(&store, "s", u64::MAX));
    assert!(matches!(r, Err(crate::Error::Invalid(_))), "{r:?}");
    assert_eq!(n, 0);
    // More checkouts than the scan budget holds: not found, saying why.
    let (r, n) = decoded_by(|| super::refctx::previous_checkout(&store, "s", 15));
    assert!(matches!(r, Err(crate::Error::NotFound(_))), "{r:?}");
    assert_eq!(n, SCAN_LIMIT as u64);
}
