//! Bounded reads of a session's operation log: range scans in pages, newest first
//! or oldest first, that stop as soon as the caller has what it needs.
//!
//! Owns: the page size ([`PAGE`]), the per-request scan budget ([`SCAN_LIMIT`]) and
//! the walks ([`back`], [`forward`], [`steps`]).
//!
//! Invariants:
//! - A walk holds at most one page of raw records ([`PAGE`]) and decodes a record
//!   only when the caller is still asking: reading the newest N records costs
//!   O(N), whatever the length of the log. An agent can append records cheaply
//!   (notes, execs), so nothing an agent can ask for reads the whole log at once.
//! - A walk given a budget decodes at most that many records and says when it ran
//!   out ([`Walked::Exhausted`]): the caller reports a partial answer, never a
//!   silently wrong one.

use super::{
    Operation, decode_kv,
    stack::{Stacks, Step},
};
use crate::error::Result;
use crate::meta::KeyRange;
use crate::store::ObjectStore;

/// Records read from the metadata store per range scan.
pub const PAGE: usize = 64;

/// Most records one request decodes while looking for what it shows (a filter of
/// `timeline` or `history`, the N-th checkout of `@{-N}`): the default retention
/// count (`retention::DEFAULT_COUNT`), so a log within retention is searched whole.
pub const SCAN_LIMIT: usize = super::retention::DEFAULT_COUNT as usize;

/// Most entries one answer lists (`op log`, `timeline`, `history`); a larger
/// `limit` is cut to it.
pub const MAX_SHOWN: usize = 1000;

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walked {
    /// The visitor asked to stop.
    Stopped,
    /// Every record in the walk's direction was visited.
    End,
    /// The budget ran out with records left.
    Exhausted,
}

/// Whether the visitor wants the next record.
pub type Visit<'a> = &'a mut dyn FnMut(Operation) -> Result<bool>;

/// Visit the operations of `session` numbered below `below` (all when `None`),
/// newest first, decoding at most `budget` of them.
pub fn back(
    store: &dyn ObjectStore,
    session: &str,
    below: Option<u64>,
    budget: usize,
    visit: Visit<'_>,
) -> Result<Walked> {
    let range = |below: Option<u64>| match below {
        Some(e) => KeyRange::ops_before(session, e),
        None => KeyRange::ops(session),
    };
    let mut below = below;
    let mut left = budget;
    loop {
        if left == 0 {
            let more = store.meta_range_rev(&range(below), 1)?;
            return Ok(if more.is_empty() {
                Walked::End
            } else {
                Walked::Exhausted
            });
        }
        let want = PAGE.min(left);
        let page = store.meta_range_rev(&range(below), want)?;
        for (k, v) in &page {
            left -= 1;
            let op = decode_kv(k, v)?;
            below = Some(op.seq);
            if !visit(op)? {
                return Ok(Walked::Stopped);
            }
        }
        if page.len() < want {
            return Ok(Walked::End);
        }
    }
}

/// Visit the operations of `session` numbered `from` and up, oldest first,
/// decoding at most `budget` of them.
pub fn forward(
    store: &dyn ObjectStore,
    session: &str,
    from: u64,
    budget: usize,
    visit: Visit<'_>,
) -> Result<Walked> {
    let mut next = from;
    let mut left = budget;
    loop {
        if left == 0 {
            let more = store.meta_range(&KeyRange::ops_from(session, next), 1)?;
            return Ok(if more.is_empty() {
                Walked::End
            } else {
                Walked::Exhausted
            });
        }
        let want = PAGE.min(left);
        let page = store.meta_range(&KeyRange::ops_from(session, next), want)?;
        for (k, v) in &page {
            left -= 1;
            let op = decode_kv(k, v)?;
            next = op.seq.saturating_add(1);
            if !visit(op)? {
                return Ok(Walked::Stopped);
            }
        }
        if page.len() < want {
            return Ok(Walked::End);
        }
    }
}

/// The newest operation of `session` that `pred` accepts, among the newest
/// `budget` records.
pub fn find_back(
    store: &dyn ObjectStore,
    session: &str,
    budget: usize,
    pred: &dyn Fn(&Operation) -> bool,
) -> Result<Option<Operation>> {
    let mut found = None;
    back(store, session, None, budget, &mut |op| {
        if pred(&op) {
            found = Some(op);
            return Ok(false);
        }
        Ok(true)
    })?;
    Ok(found)
}

/// The undo/redo stacks as of one record, kept between requests so a request
/// replays only the records appended since ([`stacks`]).
#[derive(Debug, Clone, Default)]
pub struct StackCache {
    /// The newest record replayed: its number and a digest of its stored bytes
    /// (a log deleted and written again under the same name does not match).
    upto: Option<(u64, [u8; 32])>,
    stacks: Stacks,
}

/// The undo/redo stacks of `session`'s retained log and its newest record, read
/// through `cache`: the records after the cached one are replayed onto it, and
/// numbers older than the oldest retained record are dropped from the stacks
/// (records only append, retention trims the old end, and a trimmed record only
/// ever moved numbers older than itself: what is left equals a replay of the
/// retained log). A cache that does not match the log is replayed afresh.
pub fn stacks(
    store: &dyn ObjectStore,
    session: &str,
    cache: &mut StackCache,
) -> Result<(Stacks, Option<Operation>)> {
    let newest = store.meta_range_rev(&KeyRange::ops(session), 1)?;
    let Some((k, v)) = newest.first() else {
        *cache = StackCache::default();
        return Ok((Stacks::default(), None));
    };
    let last = decode_kv(k, v)?;
    let still = match cache.upto {
        Some((seq, digest)) => store
            .meta_get(&crate::meta::op_key(session, seq))?
            .is_some_and(|raw| *blake3::hash(&raw).as_bytes() == digest),
        None => false,
    };
    if !still {
        *cache = StackCache::default();
    }
    let from = cache.upto.map_or(0, |(seq, _)| seq + 1);
    let mut steps = Vec::new();
    // Up to the newest record read above (one appended since waits for the next
    // request), so the cache names a record whose bytes are at hand.
    forward(store, session, from, usize::MAX, &mut |op| {
        if op.seq > last.seq {
            return Ok(false);
        }
        steps.push(Step::from(&op));
        Ok(true)
    })?;
    let upto = Some((last.seq, *blake3::hash(v).as_bytes()));
    let oldest = match store.meta_range(&KeyRange::ops(session), 1)?.first() {
        Some((k, v)) => decode_kv(k, v)?.seq,
        None => 0,
    };
    let mut stacks = std::mem::take(&mut cache.stacks).extend(steps);
    stacks.done.retain(|&s| s >= oldest);
    stacks.undone.retain(|&s| s >= oldest);
    *cache = StackCache {
        upto,
        stacks: stacks.clone(),
    };
    Ok((stacks, Some(last)))
}

/// What the undo/redo replay needs of every record of `session` (oldest first),
/// and the newest record: one page of whole records in memory at a time.
pub fn steps(store: &dyn ObjectStore, session: &str) -> Result<(Vec<Step>, Option<Operation>)> {
    let mut steps = Vec::new();
    let mut last = None;
    forward(store, session, 0, usize::MAX, &mut |op| {
        steps.push(Step::from(&op));
        last = Some(op);
        Ok(true)
    })?;
    Ok((steps, last))
}
