//! One transaction per operation: an op that changes a session's state and
//! records it commits ONE metadata batch — the session record (HEAD, branch, base,
//! root), the ref moves (branches, `auto/...` refs and the checkpoint of the saved
//! pending changes), the touched paths and the operation record — or fails with a
//! typed error and nothing durable changed. The batch is a [`crate::session::Txn`]
//! (built under the session's flush lock); [`Op::commit`] adds the record.
//!
//! Preconditions, checked by the store inside the batch commit (`MetaOp::Expect`):
//! - the op log's slot after the newest record the op read is empty, so the
//!   record is numbered after exactly the log the op saw; with
//!   [`Log::Unchanged`] (undo, redo, op restore) the newest record must still be
//!   the one the op read, or the op fails with `conflict` (otherwise a record
//!   appended meanwhile by someone else only renumbers this one);
//! - every ref the op moves, creates or deletes still holds the value the op read
//!   (each op adds its own `Expect`s; a moved branch fails the op with `conflict`);
//! - other sessions' records the op rewrites (a branch rename) are unchanged.
//!
//! The record always carries the branch moves of the batch's own checkpoints
//! (`Txn::branch_moves`, the attached branch following HEAD), before and after,
//! whether or not the op's builder put them in its views: undo and redo move a
//! branch only when the record names it.
//!
//! Steps, where the `txn-kill-KIND:N` failpoint kills the daemon (see
//! `crate::failpoint`): [`BEGUN`], [`BUILT`] (tree swapped, batch built, just
//! before the commit), [`COMMITTED`]. Each op logs (debug) how many metadata
//! commits its thread made since it began, so tests assert "one commit".

use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::oplog::{self, NewOp, Operation};
use crate::session::{SessionRecord, Txn};

use super::Target;

/// Put the attached branch moves of the batch's checkpoints (`moves`) in the
/// record's views, where the op did not record that branch itself: without them
/// an undo would put HEAD back but leave the branch where the op moved it
/// (detaching HEAD, and refusing the next undo as if someone else had moved it).
fn carry_branch_moves(nop: &mut NewOp, moves: &crate::session::txn::BranchMoves) {
    for (b, (was, now)) in moves {
        nop.before.branches.entry(b.clone()).or_insert(*was);
        nop.after.branches.entry(b.clone()).or_insert(*now);
    }
}

/// Step: the op began (nothing changed yet).
pub const BEGUN: usize = 1;
/// Step: the tree is swapped and the batch built, not committed.
pub const BUILT: usize = 2;
/// Step: the batch is committed (the answer not sent yet).
pub const COMMITTED: usize = 3;

/// What the op requires of the log's newest record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Log {
    /// Any: the record goes after whatever is newest at commit.
    Next,
    /// The newest record must still be this one (`None`: the log is empty).
    Unchanged(Option<u64>),
}

/// One recording operation of a live session (see the module docs).
pub(crate) struct Op<'a> {
    t: &'a Target,
    kind: &'a str,
    /// Metadata commits of this thread when the op began.
    commits: u64,
}

/// Builds the op's record and its own ops from the session record before the
/// batch and the one the batch commits. Called again when a retry is needed.
pub(crate) type Build<'b> =
    &'b mut dyn FnMut(&SessionRecord, &SessionRecord) -> Result<(NewOp, Vec<MetaOp>)>;

impl<'a> Op<'a> {
    /// Begin an op of kind `kind` on `t`.
    pub fn begin(t: &'a Target, kind: &'a str) -> Op<'a> {
        crate::failpoint::txn_step(kind, BEGUN);
        Op {
            t,
            kind,
            commits: meta::applied_here(),
        }
    }

    /// Commit `tx` with the op's record and ops (`build`), numbered after the
    /// log's newest record, in one batch. A batch refused because someone else
    /// appended a record meanwhile is built again with the next number (unless
    /// `log` requires the log unchanged: then `conflict`); any other refusal
    /// fails the op with nothing changed.
    pub fn commit(&self, tx: &mut Txn<'_>, log: Log, build: Build<'_>) -> Result<Operation> {
        let s = &self.t.session;
        let store = s.store();
        for _ in 0..8 {
            let last = oplog::last(&**store, s.name())?.map(|o| o.seq);
            if let Log::Unchanged(want) = log
                && last != want
            {
                return Err(Error::Conflict(format!(
                    "session {}: its operation log moved while this {} ran (newest is now {}); nothing was changed, retry",
                    s.name(),
                    self.kind,
                    last.map_or("none".into(), |l| l.to_string())
                )));
            }
            let seq = last.map_or(1, |l| l + 1);
            let (mut nop, mut ops) = build(tx.before(), tx.record())?;
            carry_branch_moves(&mut nop, tx.branch_moves());
            let rec = nop.build(s.name(), seq);
            ops.extend(rec.ops());
            crate::failpoint::op_record_delay();
            crate::failpoint::txn_step(self.kind, BUILT);
            match tx.try_commit(ops) {
                Ok(_) => {
                    crate::failpoint::txn_step(self.kind, COMMITTED);
                    ::log::debug!(
                        "txn {}: op {seq} committed; {} metadata commit(s) since the op began",
                        self.kind,
                        meta::applied_here() - self.commits
                    );
                    return Ok(rec);
                }
                Err(Error::Conflict(_))
                    if store.meta_get(&meta::op_key(s.name(), seq))?.is_some() => {}
                Err(e) => {
                    ::log::info!("session {}: {} not committed: {e}", s.name(), self.kind);
                    return Err(e);
                }
            }
        }
        Err(Error::Busy(format!(
            "session {}: the operation log kept moving while recording {}; retry",
            s.name(),
            self.kind
        )))
    }
}
