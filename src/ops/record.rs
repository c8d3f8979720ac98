//! Recording operations: the views before and after an op, and the append to the
//! session's operation log (`crate::oplog`).
//!
//! A view's workspace is the root of the live tree: taking it flushes (after
//! `syncfs`, so what programs wrote is in it). Ops that change state take the
//! before view in their own batch (`super::txn`; under `save_and_graft` when the
//! workspace changes), so no write falls between the recorded state and the
//! change, and the record is committed with the change.

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
        head: rec.head,
        branch: rec.branch.clone(),
        workspace: root,
        branches: BTreeMap::new(),
    }
}

/// The view of a live session now (syncfs + flush), with the value of the
/// branch HEAD is attached to: an op recorded from two of these (before and
/// after a checkpoint that moved the branch) carries the branch move, so undo
/// moves the branch back with HEAD.
pub(crate) fn view_now(t: &Target) -> Result<View> {
    syncfs(&t.mount)?;
    let root = t.session.flush()?;
    let rec = t.session.record();
    let mut v = view_of(&rec, root);
    if let Some(b) = &rec.branch {
        touch(&mut v, &**t.session.store(), b)?;
    }
    Ok(v)
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

/// An operation record's header, for ops that record on their own (experiment).
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

/// Append `op` to the log of `t`'s session, on its own: for ops whose record is
/// the whole change (exec and experiment ends, whose state was committed when
/// they began). Ops that change state commit their record with it (`super::txn`).
/// A failure is logged and returned.
pub(crate) fn append(t: &Target, op: NewOp) -> Result<Operation> {
    let s = &t.session;
    oplog::append(&**s.store(), s.name(), op, Vec::new())
        .inspect_err(|e| ::log::error!("session {}: recording an operation failed: {e}", s.name()))
}
