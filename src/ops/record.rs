//! Recording operations: who asked ([`Call`]) and the views an op's record is
//! made of ([`view_of`], [`touch`]). The record is appended only by the
//! operation transaction (`super::txn`), in the op's own batch.
//!
//! A view's workspace is the root of the live tree, taken by a flush inside the
//! op's batch (after `syncfs`, so what programs wrote is in it; under
//! `save_and_graft` when the workspace changes), so no write falls between the
//! recorded state and the change.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::Result;
use crate::id::NodeId;
use crate::oplog::{Actor, NewOp, View};
use crate::session::SessionRecord;

/// The view of `rec` with the workspace at `root`.
pub(crate) fn view_of(rec: &SessionRecord, root: NodeId) -> View {
    View {
        head: rec.head,
        branch: rec.branch.clone(),
        workspace: root,
        branches: BTreeMap::new(),
    }
}

/// Record the current value of `branch` in `view` (as touched by the op). A ref
/// that does not read fails the op (recording it as absent would make an undo
/// delete it).
pub(crate) fn touch(
    view: &mut View,
    store: &dyn crate::store::ObjectStore,
    branch: &str,
) -> Result<()> {
    let v = crate::refs::get_ref(store, branch)?.map(|r| r.checkpoint);
    view.branches.insert(branch.to_string(), v);
    Ok(())
}

/// Who asked for an op, and how: what its operation record is made from.
pub(crate) struct Call<'a> {
    /// Who asked.
    pub actor: &'a Actor,
    /// Explanation given with the request.
    pub explanation: Option<String>,
    /// The request (protocol form).
    pub request: Value,
}

impl Call<'_> {
    /// The operation record of kind `kind` for `before` → `after`.
    pub fn op(&self, kind: &str, before: View, after: View) -> NewOp {
        let mut op = NewOp::new(self.actor, kind, self.request.clone(), before, after);
        op.explanation = self.explanation.clone();
        op
    }
}
