//! The retention pass `gc` runs before marking, the same whether the daemon or the
//! CLI (store offline) runs it: operation records past each session's retention
//! (`oplog::retention`), sessions discarded longer than the discard retention, and
//! `auto/...` refs past theirs ([`super::autorefs`]).
//!
//! Removing a session is the caller's (`remove`): the daemon must own the name
//! first (its mount table), offline nobody else can; [`remove_session`] is what
//! both then do to the store.

use serde::Serialize;

use super::{autorefs, manage};
use crate::error::Result;
use crate::meta::{MetaOp, OP_PREFIX};
use crate::oplog;
use crate::store::ObjectStore;

/// What a retention pass removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pruned {
    /// Operation records.
    pub operations: usize,
    /// Discarded sessions.
    pub sessions: usize,
    /// `auto/...` refs.
    pub auto_refs: usize,
}

/// Run the pass at `now` (unix s); `discard_secs` is how long a discarded session
/// is kept; `remove` removes one session (see the module docs).
pub fn run(
    store: &dyn ObjectStore,
    discard_secs: u64,
    now: i64,
    remove: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<Pruned> {
    let mut p = Pruned::default();
    for r in crate::refs::session_record::list_records(store)? {
        let policy = oplog::retention::Policy {
            days: r.config.op_retention_days,
            count: r.config.op_retention_count,
        };
        let ops = oplog::retention::prune_ops(store, &r.name, policy)?;
        p.operations += ops
            .iter()
            .filter(|o| matches!(o, MetaOp::Delete(k) if k.starts_with(OP_PREFIX)))
            .count();
        store.commit(ops)?;
    }
    for name in manage::discarded_before(store, discard_secs, now)? {
        match remove(&name) {
            Ok(()) => p.sessions += 1,
            Err(e) => log::warn!("gc: discarded session {name} stays: {e}"),
        }
    }
    let ops = autorefs::prune_ops(store, now, &|session| {
        crate::refs::session_record::load_record(store, session)
            .ok()
            .flatten()
            .map_or(autorefs::default_policy(), |r| oplog::retention::Policy {
                days: r.config.auto_ref_retention_days,
                count: r.config.auto_ref_retention_count,
            })
    })?;
    p.auto_refs = ops.len();
    store.commit(ops)?;
    if p != Pruned::default() {
        log::info!(
            "gc: retention dropped {} operation record(s), {} discarded session(s), {} auto/ ref(s)",
            p.operations,
            p.sessions,
            p.auto_refs
        );
    }
    Ok(p)
}

/// Delete session `name`: its record, operation log, info record, touched set
/// and conversation log (`session rm`).
pub fn remove_session(store: &dyn ObjectStore, name: &str) -> Result<()> {
    crate::refs::session_record::remove_record(store, name)?;
    let mut ops = oplog::delete_all_ops(store, name)?;
    ops.extend(super::delete_ops(store, name)?);
    store.commit(ops)
}
