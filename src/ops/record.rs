//! Recording operations: the views before and after an op, and the append to the
//! session's operation log (`crate::oplog`).
//!
//! A view's workspace is the root of the live tree: taking it flushes (after
//! `syncfs`, so what programs wrote is in it). Ops that change the workspace take
//! the before view under their own save (`save_and_graft`), so no write falls
//! between the recorded state and the change.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Target, syncfs};
use crate::error::Result;
use crate::id::NodeId;
use crate::oplog::{self, Actor, NewOp, Operation, View};
use crate::session::SessionRecord;

/// The view of `rec` with the workspace at `root`.
pub(crate) fn view_of(rec: &SessionRecord, root: NodeId) -> View {
    View {
        head: rec.head.clone(),
        branch: rec.branch.clone(),
        workspace: root.to_hex(),
        branches: BTreeMap::new(),
    }
}

/// The view of a live session now (syncfs + flush).
pub(crate) fn view_now(t: &Target) -> Result<View> {
    syncfs(&t.mountpoint)?;
    let root = t.session.flush()?;
    Ok(view_of(&t.session.record(), root))
}

/// Record the current value of `branch` in `view` (as touched by the op).
pub(crate) fn touch(view: &mut View, store: &dyn crate::store::ObjectStore, branch: &str) {
    let v = crate::refs::get_ref(store, branch)
        .ok()
        .flatten()
        .map(|r| r.checkpoint);
    view.branches.insert(branch.to_string(), v);
}

/// What an op fills in before recording.
pub(crate) struct Rec<'a> {
    /// Who asked.
    pub actor: &'a Actor,
    /// Operation kind.
    pub kind: &'a str,
    /// The request (protocol form).
    pub request: Value,
    /// Explanation given with it.
    pub explanation: Option<String>,
}

impl Rec<'_> {
    /// The operation record for `before` → `after`.
    pub fn op(self, before: View, after: View) -> NewOp {
        let mut op = NewOp::new(self.actor, self.kind, self.request, before, after);
        op.explanation = self.explanation;
        op
    }
}

/// Append `op` to the log of `t`'s session. A failure to record is logged and
/// returned: the state change itself already happened and stays.
pub(crate) fn append(t: &Target, op: NewOp) -> Result<Operation> {
    let s = &t.session;
    oplog::append(&**s.store(), s.name(), op, Vec::new())
        .inspect_err(|e| ::log::error!("session {}: recording an operation failed: {e}", s.name()))
}
