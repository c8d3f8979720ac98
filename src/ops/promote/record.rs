//! Recording a landed promote: the result on the session's info record (state
//! `promoted`, the commit among the session's own, the baseline moved when the
//! promote built on it) and the `promote` operation, in one read-guarded batch.

use crate::error::Result;
use crate::id::NodeId;
use crate::lifecycle::{self, Promoted, SessionInfo, State};
use crate::meta::{self, MetaOp};
use crate::oplog::{NewOp, Operation};
use crate::ops::Target;
use crate::ops::record::view_of;
use crate::ops::txn::{self, Log};
use crate::store::ObjectStore;

/// Store the result on the session's info record (state `promoted`, guarded by
/// its old bytes) together with the operation `op` (its views are set here: the
/// promoted tree `root` on both sides, HEAD as it is), in ONE batch of the session
/// (`crate::ops::txn`); built again when the info record changed meanwhile (the
/// promote itself already happened).
pub(super) fn record_result(
    t: &Target,
    op: NewOp,
    root: NodeId,
    promoted: Promoted,
    new_baseline: Option<(String, NodeId)>,
) -> Result<Operation> {
    let s = &t.session;
    let store = s.store().clone();
    let mut tx = s.txn();
    txn::Transaction::begin(t, "promote").commit(&mut tx, Log::Next, &mut |b, a| {
        let mut op = op.clone();
        op.before = view_of(b, root);
        op.after = view_of(a, root);
        Ok((op, info_ops(&*store, s.name(), &promoted, &new_baseline)?))
    })
}

/// The ops writing the session's info record with the promote's result.
fn info_ops(
    store: &dyn ObjectStore,
    session: &str,
    promoted: &Promoted,
    new_baseline: &Option<(String, NodeId)>,
) -> Result<Vec<MetaOp>> {
    let key = meta::info_key(session);
    let old = store.meta_get(&key)?;
    let mut info = match &old {
        Some(b) => SessionInfo::decode(session, b)?,
        None => SessionInfo::legacy(session, crate::tree::Timespec::now().sec),
    };
    info.state = State::Promoted;
    info.promoted = Some(promoted.clone());
    // A commit on the durable branch is the session's own: a later drift
    // check does not count the paths it changed (see `drift`).
    if let (Some(o), Some(sha), "commit") = (
        info.origin.as_mut(),
        &promoted.sha,
        promoted.strategy.as_str(),
    ) {
        o.promoted.push(sha.clone());
        let over = o.promoted.len().saturating_sub(lifecycle::MAX_PROMOTED);
        o.promoted.drain(..over);
        // Built on the baseline itself: the baseline moves to the commit.
        if let Some((commit, root)) = new_baseline {
            o.baseline = Some(commit.clone());
            o.baseline_root = root.to_hex();
        }
    }
    Ok(vec![MetaOp::Expect(key, old), info.op()])
}
