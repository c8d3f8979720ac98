//! Recording a landed promote: the result on the session's info record (state
//! `promoted`, the commit among the session's own, the baseline moved when the
//! promote built on it) and the `promote` operation, in one read-guarded batch.

use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::lifecycle::{self, Promoted, SessionInfo, State};
use crate::meta::{self, MetaOp};
use crate::ops::Target;

/// Store the result on the session's info record (state `promoted`, guarded by
/// its old bytes) together with the operation; retried when the record changed
/// meanwhile (the promote itself already happened).
pub(super) fn record_result(
    t: &Target,
    op: crate::oplog::NewOp,
    promoted: Promoted,
    new_baseline: Option<(String, NodeId)>,
) -> Result<crate::oplog::Operation> {
    let s = &t.session;
    let store = s.store();
    let key = meta::info_key(s.name());
    for _ in 0..8 {
        let old = store.meta_get(&key)?;
        let mut info = match &old {
            Some(b) => SessionInfo::decode(s.name(), b)?,
            None => SessionInfo::legacy(s.name(), crate::tree::Timespec::now().sec),
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
            if let Some((commit, root)) = &new_baseline {
                o.baseline = Some(commit.clone());
                o.baseline_root = root.to_hex();
            }
        }
        let extra = vec![MetaOp::Expect(key.clone(), old), info.op()];
        match crate::oplog::append(&**store, s.name(), op.clone(), extra) {
            Err(Error::Conflict(_)) => continue,
            r => return r,
        }
    }
    Err(Error::Busy(format!(
        "session {}: its info record kept changing while recording the promote; the promote itself is done",
        s.name()
    )))
}
