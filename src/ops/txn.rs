//! One transaction per operation: an op that changes a session's state and
//! records it commits ONE metadata batch — the session record (HEAD, branch, base,
//! root), the ref moves (branches, `auto/...` refs and the checkpoint of the saved
//! pending changes), the touched paths and the operation record — or fails with a
//! typed error and nothing durable changed. The batch is a [`crate::session::Txn`]
//! (built under the session's flush lock); [`Transaction::commit`] adds the record.
//!
//! Preconditions, checked by the store inside the batch commit (`MetaOp::Expect`):
//! - the op log's slot after the newest record the op read is empty, so the
//!   record is numbered after exactly the log the op saw; with
//!   [`Log::Unchanged`] (undo, redo, op restore) the newest record must still be
//!   the one the op read, or the op fails with `conflict` (otherwise a record
//!   appended meanwhile by someone else only renumbers this one);
//! - every ref the op moves, creates or deletes still holds the value the op read
//!   (each op adds its own `Expect`s; a moved branch fails the op with `conflict`);
//! - other sessions' records the op rewrites (a branch rename's followers,
//!   the live ones through their own `Txn` joined to the batch,
//!   `Txn::joining_ops`) are unchanged.
//!
//! The record's views are worked out from the batch, not only from what the op's
//! builder wrote in them: the branch moves of the batch's own checkpoints
//! (`Txn::branch_moves`, the attached branch following HEAD), and every branch
//! the batch's ops create, move or delete (a `MetaOp::Put` or `Delete` of a ref
//! key other than an `auto/...` ref), with its value before read at commit and
//! guarded by an `Expect` — so undo and redo, which move a branch only when the
//! record names it, see every branch the op moved. A builder's own entry for a
//! branch wins.
//!
//! The session's metrics the op counts ([`Transaction::counting`]; the checkpoints HEAD
//! moved to in the batch are always counted) and attachments keyed
//! by the record's number ([`Transaction::attaching`]) join the same batch: a crash leaves
//! all of them or none. A batch refused because the session's info record
//! changed meanwhile (another op's metrics; a guard the builder put on it) is
//! built again, like one refused for the log.
//!
//! Steps, where the `txn-kill-KIND:N` failpoint kills the daemon (see
//! `crate::failpoint`): [`BEGUN`], [`BUILT`] (tree swapped, batch built, just
//! before the commit), [`COMMITTED`]. Each op logs (debug) how many metadata
//! commits its thread made since it began, so tests assert "one commit".

use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::lifecycle::{Metrics, manage};
use crate::meta::{self, MetaOp};
use crate::oplog::{self, Actor, NewOp, Operation};
use crate::refs::{self, names};
use crate::session::{Session, SessionRecord, Txn};

use super::Target;
use super::record::view_of;

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

/// The checkpoint a stored ref value names.
fn ref_value(name: &str, raw: Option<&[u8]>) -> Result<Option<CheckpointId>> {
    raw.map(|v| refs::RefRecord::decode(name, v).map(|r| r.checkpoint))
        .transpose()
}

/// Put every branch the batch's ops (`ops`) create, move or delete in the
/// record's views (where the builder did not), its value before read now; the
/// returned `Expect`s make that value a precondition of the batch.
fn carry_ref_ops(
    store: &dyn crate::store::ObjectStore,
    nop: &mut NewOp,
    ops: &[MetaOp],
) -> Result<Vec<MetaOp>> {
    let mut expects = Vec::new();
    for op in ops {
        let (key, after) = match op {
            MetaOp::Put(k, v) => (k, Some(v.as_slice())),
            MetaOp::Delete(k) => (k, None),
            _ => continue,
        };
        let Some(name) = meta::ref_name(key) else {
            continue;
        };
        if names::short(name).starts_with("auto/") || nop.after.branches.contains_key(name) {
            continue;
        }
        let raw = store.meta_get(key)?;
        nop.before
            .branches
            .entry(name.to_string())
            .or_insert(ref_value(name, raw.as_deref())?);
        nop.after
            .branches
            .insert(name.to_string(), ref_value(name, after)?);
        expects.push(MetaOp::Expect(key.clone(), raw));
    }
    Ok(expects)
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

/// A change of the session's metrics an op counts.
type Count<'a> = Box<dyn Fn(&mut Metrics) + 'a>;
/// The ops an op stores under its record's number (attachments).
type Attach<'a> = Box<dyn Fn(u64) -> Vec<MetaOp> + 'a>;

/// One recording operation of a live session (see the module docs).
pub(crate) struct Transaction<'a> {
    s: &'a Session,
    kind: &'a str,
    /// Metadata commits of this thread when the op began.
    commits: u64,
    count: Option<Count<'a>>,
    attach: Option<Attach<'a>>,
}

/// Builds the op's record and its own ops from the session record before the
/// batch and the one the batch commits. Called again when a retry is needed.
pub(crate) type Build<'b> =
    &'b mut dyn FnMut(&SessionRecord, &SessionRecord) -> Result<(NewOp, Vec<MetaOp>)>;

impl<'a> Transaction<'a> {
    /// Begin an op of kind `kind` on `t`.
    pub fn begin(t: &'a Target, kind: &'a str) -> Transaction<'a> {
        Transaction::on(&t.session, kind)
    }

    /// Begin an op of kind `kind` on session `s` (the daemon's own ops: automatic
    /// and eviction checkpoints).
    pub fn on(s: &'a Session, kind: &'a str) -> Transaction<'a> {
        crate::failpoint::txn_step(kind, BEGUN);
        Transaction {
            s,
            kind,
            commits: meta::applied_here(),
            count: None,
            attach: None,
        }
    }

    /// Count `f` in the session's metrics, in the op's batch.
    pub fn counting(mut self, f: impl Fn(&mut Metrics) + 'a) -> Transaction<'a> {
        self.count = Some(Box::new(f));
        self
    }

    /// Store what `f` returns for the record's number in the op's batch.
    pub fn attaching(mut self, f: impl Fn(u64) -> Vec<MetaOp> + 'a) -> Transaction<'a> {
        self.attach = Some(Box::new(f));
        self
    }

    /// Commit `tx` with the op's record and ops (`build`), numbered after the
    /// log's newest record, in one batch. A batch refused because someone else
    /// appended a record (or changed the session's info) meanwhile is built again
    /// with the next number (unless `log` requires the log unchanged: then
    /// `conflict`); any other refusal fails the op with nothing changed.
    pub fn commit(&self, tx: &mut Txn<'_>, log: Log, build: Build<'_>) -> Result<Operation> {
        let s = self.s;
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
            let mut expects = carry_ref_ops(&**store, &mut nop, tx.pending())?;
            expects.extend(carry_ref_ops(&**store, &mut nop, &ops)?);
            ops.extend(expects);
            // The op's own counts, and the checkpoints of the batch.
            let (n, at) = tx.checkpoints();
            let counted = if self.count.is_some() || n > 0 {
                manage::bump_in(&**store, s.name(), &mut ops, &|m| {
                    if let Some(f) = &self.count {
                        f(m);
                    }
                    if n > 0 {
                        m.checkpoints += n;
                        m.last_checkpoint = at;
                    }
                })?
            } else {
                Vec::new()
            };
            ops.extend(counted);
            if let Some(f) = &self.attach {
                ops.extend(f(seq));
            }
            let rec = nop.build(s.name(), seq);
            ops.extend(rec.ops());
            crate::failpoint::op_record_delay();
            crate::failpoint::txn_step(self.kind, BUILT);
            // (What a refusal is checked against: the info record's guards.)
            let guards: Vec<MetaOp> = ops
                .iter()
                .filter(|op| matches!(op, MetaOp::Expect(..)))
                .cloned()
                .collect();
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
                    if store.meta_get(&meta::op_key(s.name(), seq))?.is_some()
                        || manage::info_changed(&**store, s.name(), &guards)? => {}
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

/// Record the end of something that changes no state by itself (an experiment's
/// comparison, a bisect's result), as one operation of `kind` with `meta`, its
/// batch also holding `extra`: the mount's writes are synced and flushed (not
/// checkpointed) first, and both views are the session's state now. `again`
/// checks, under the session's flush lock (so after any such record committed
/// before), that the result is not recorded already.
pub(crate) fn record_result(
    t: &Target,
    actor: &Actor,
    kind: &str,
    request: serde_json::Value,
    meta: serde_json::Map<String, serde_json::Value>,
    extra: Vec<MetaOp>,
    again: &dyn Fn() -> Result<()>,
) -> Result<Operation> {
    super::syncfs(&t.mount)?;
    let mut tx = t.session.txn();
    let root = tx.flush()?;
    Transaction::begin(t, kind).commit(&mut tx, Log::Next, &mut |b, a| {
        again()?;
        let (before, after) = (view_of(b, root), view_of(a, root));
        let mut op = NewOp::new(actor, kind, request.clone(), before, after);
        op.meta = meta.clone();
        Ok((op, extra.clone()))
    })
}
