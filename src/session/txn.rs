//! A session's metadata batch for one operation ([`Txn`]): everything an op
//! changes of the session (flushes of the live tree, the pending-changes save,
//! HEAD/branch/base/root, ref moves, touched paths) collected under the session's
//! flush lock and committed as ONE atomic metadata batch, or not at all.
//!
//! Invariants:
//! - The flush lock is held from [`Session::txn`] until the `Txn` is dropped, so
//!   no other flush (the daemon's periodic one, an fsync) commits a record between
//!   the op's flush, its graft and its commit.
//! - Flushes inside a `Txn` encode and publish the live table but commit nothing
//!   ([`Session::prepare_locked`]); tree nodes and chunks they write are
//!   content-addressed and harmless while unreferenced.
//! - The in-memory session record changes only after the batch is durable. A
//!   `Txn` dropped without a successful commit gives up its flushes (the next flush
//!   writes the tree again, with its touched paths).
//! - The live-table graft ([`Txn::graft`]) is in memory; the caller undoes it
//!   ([`Txn::graft`] back to the root before) when the commit fails.
//! - A `Txn` that changes nothing but the record may *join* another session's
//!   batch ([`Txn::joining_ops`], then [`Txn::joined`]; a branch rename's live
//!   followers): its flush lock is held until after that batch commits and the
//!   in-memory record follows, so no commit of the session in between writes the
//!   record as it was. Such a `Txn` is taken with [`Session::try_txn`], which
//!   never waits (a batch holding other locks must not wait for this one's).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{MutexGuard, TryLockError};

use super::snapshot::{Inval, StateChange};
use super::{Session, SessionRecord};
use crate::diff;
use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::meta::MetaOp;
use crate::refs::{self, Checkpoint};
use crate::tree::Timespec;

/// One operation's metadata batch on a session (see the module docs).
pub struct Txn<'a> {
    s: &'a Session,
    _flush: MutexGuard<'a, ()>,
    /// The record when the batch began.
    before: SessionRecord,
    /// The record the batch commits.
    rec: SessionRecord,
    /// Paths changed by the flushes of this batch.
    touched: BTreeSet<Vec<u8>>,
    /// Whether a flush of this batch published a root not yet committed.
    flushed: bool,
    /// Ops added so far (checkpoints, refs, grants).
    ops: Vec<MetaOp>,
    /// The attached branch moves the batch's checkpoints made: branch → (value
    /// before the batch, value after it).
    moved: BranchMoves,
    /// The checkpoints HEAD moves to in the batch, and the unix seconds of the
    /// last (the session's metrics count them; its count of changes since its
    /// last checkpoint restarts when the batch commits).
    checkpointed: (u64, Option<i64>),
    done: bool,
}

/// Branch moves by name: (value before, value after); `None`: absent.
pub type BranchMoves = BTreeMap<String, (Option<CheckpointId>, Option<CheckpointId>)>;

impl Session {
    /// Begin one operation's metadata batch (takes the flush lock; see [`Txn`]).
    pub fn txn(&self) -> Txn<'_> {
        let g = super::relock(self.flush_lock.lock());
        Txn::new(self, g)
    }

    /// [`txn`](Self::txn) if the flush lock is free now; `None` while another
    /// flush or batch of this session holds it. Never waits: for a batch that
    /// already holds locks of its own (see the module docs).
    pub fn try_txn(&self) -> Option<Txn<'_>> {
        let g = match self.flush_lock.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => return None,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        Some(Txn::new(self, g))
    }
}

impl<'a> Txn<'a> {
    fn new(s: &'a Session, g: MutexGuard<'a, ()>) -> Txn<'a> {
        let before = s.record();
        Txn {
            s,
            _flush: g,
            rec: before.clone(),
            before,
            touched: BTreeSet::new(),
            flushed: false,
            ops: Vec::new(),
            moved: BTreeMap::new(),
            checkpointed: (0, None),
            done: false,
        }
    }
}

impl Txn<'_> {
    /// The session record when the batch began.
    pub fn before(&self) -> &SessionRecord {
        &self.before
    }

    /// The session record as the batch leaves it so far.
    pub fn record(&self) -> &SessionRecord {
        &self.rec
    }

    /// The attached branch moves this batch's checkpoints made (an operation
    /// record must carry them, so undo and redo move the branch with HEAD).
    pub fn branch_moves(&self) -> &BranchMoves {
        &self.moved
    }

    /// How many checkpoints HEAD moved to in this batch, and the unix seconds of
    /// the last.
    pub fn checkpoints(&self) -> (u64, Option<i64>) {
        self.checkpointed
    }

    /// The ops the batch holds so far (checkpoints, ref moves, grants).
    pub fn pending(&self) -> &[MetaOp] {
        &self.ops
    }

    /// The base root the batch leaves the session with.
    fn base(&self) -> NodeId {
        self.rec.base
    }

    /// Encode the live tree (nothing committed) and return its root. Right after a
    /// whole-tree graft, with nothing written since, the live tree is the grafted
    /// target in content and the committed record names it: the answer is the
    /// target, and encoding the renumbered inodes waits for a flush that has a
    /// write to save.
    pub fn flush(&mut self) -> Result<NodeId> {
        if let Some(target) = self.s.grafted_root(self.rec.root) {
            return Ok(target);
        }
        match self.s.prepare_locked(false)? {
            Some(p) => {
                self.flushed = true;
                self.touched.extend(p.touched);
                self.rec.root = p.rec.root;
                self.rec.bytes = p.rec.bytes;
                self.rec.inodes = p.rec.inodes;
                self.rec.updated = p.rec.updated;
                Ok(p.root)
            }
            None => Ok(self.s.lock().root_id.expect("a flushed session has a root")),
        }
    }

    /// Whether the working state differs from the base (flushes first).
    pub fn has_changes(&mut self) -> Result<bool> {
        let base = self.base();
        {
            let st = self.s.lock();
            if st.graft_mark == Some((st.generation, base)) {
                return Ok(false);
            }
        }
        let root = self.flush()?;
        diff::differ(&**self.s.store(), base, root)
    }

    /// A checkpoint of `root` whose parent is the batch's HEAD, with the usage the
    /// last flush counted.
    fn new_checkpoint(&self, root: NodeId, message: &str, trigger: &str) -> Result<Checkpoint> {
        self.new_checkpoint_with(root, message, trigger, &[], serde_json::Map::new())
    }

    /// [`new_checkpoint`](Self::new_checkpoint) with more parents after HEAD and a
    /// `meta` map.
    fn new_checkpoint_with(
        &self,
        root: NodeId,
        message: &str,
        trigger: &str,
        more_parents: &[CheckpointId],
        meta: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Checkpoint> {
        refs::validate_trigger(trigger)?;
        refs::validate_meta(&meta)?;
        let store = self.s.store();
        let mut c = refs::NewCheckpoint {
            session: self.s.name(),
            root,
            parents: self
                .rec
                .head
                .into_iter()
                .chain(more_parents.iter().copied())
                .collect(),
            message,
            trigger,
            files_changed: diff::diff_count(&**store, self.rec.base, root)?,
            meta,
        }
        .build();
        c.usage = Some(refs::Usage {
            bytes: self.rec.bytes,
            inodes: self.rec.inodes,
        });
        Ok(c)
    }

    /// Save the live state as a checkpoint *beside* HEAD (its parent is HEAD),
    /// named by the ref `name` (an `auto/...` ref, granted to the session), without
    /// moving HEAD, the attached branch or the base: the safety net taken before an
    /// op replaces the workspace (checkout, restore, undo, adopt, rewind). A later
    /// `restore REF` therefore restores REF as it was, and a branch never takes in
    /// what is being thrown away.
    pub fn save_side(&mut self, message: &str, trigger: &str, name: &str) -> Result<Checkpoint> {
        let root = self.flush()?;
        let c = self.new_checkpoint(root, message, trigger)?;
        let created = Timespec::now().sec;
        self.ops.extend([
            c.op(),
            refs::ref_op(
                name,
                &refs::RefRecord {
                    checkpoint: c.id,
                    created,
                },
            ),
            crate::visibility::grant_op(self.s.name(), name, created, "created"),
        ]);
        Ok(c)
    }

    /// [`Session::checkpoint`] in this batch: the live state as a checkpoint that
    /// HEAD (and the branch it is attached to, guarded by its old value) moves to.
    pub fn checkpoint(&mut self, message: &str, trigger: &str) -> Result<Checkpoint> {
        self.checkpoint_with(message, trigger, &[], serde_json::Map::new())
    }

    /// [`checkpoint`](Self::checkpoint) with more parents after HEAD (a merge's
    /// other side) and a `meta` map.
    pub fn checkpoint_with(
        &mut self,
        message: &str,
        trigger: &str,
        more_parents: &[CheckpointId],
        meta: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Checkpoint> {
        let root = self.flush()?;
        let c = self.new_checkpoint_with(root, message, trigger, more_parents, meta)?;
        let before = self.rec.clone();
        self.rec.head = Some(c.id);
        self.rec.base = root;
        let moves =
            super::snapshot::advance_attached(&**self.s.store(), &mut self.rec, &before, &c)?;
        if let (false, Some(b)) = (moves.is_empty(), &self.rec.branch) {
            // The branch was at HEAD (`advance_attached` moves it only then).
            let was = self.moved.get(b).map_or(before.head, |m| m.0);
            self.moved.insert(b.clone(), (was, Some(c.id)));
        }
        self.ops.push(c.op());
        self.ops.extend(moves);
        self.checkpointed = (
            self.checkpointed.0 + 1,
            Some((c.time_ns / 1_000_000_000) as i64),
        );
        Ok(c)
    }

    /// [`Session::graft`] under this batch's flush lock.
    pub fn graft(
        &mut self,
        target: NodeId,
        paths: Option<&[Vec<u8>]>,
        expect: Option<u64>,
    ) -> (Vec<Inval>, Result<()>) {
        self.s.graft_held(target, paths, expect)
    }

    /// A tree built beside the live one inside this batch (see
    /// [`Session::build_beside`]; the flush lock is this batch's).
    pub fn build_beside(
        &mut self,
        from: NodeId,
        build: &mut dyn FnMut(&Session) -> Result<()>,
    ) -> Result<NodeId> {
        self.s.build_beside_held(from, build)
    }

    /// Set HEAD, its branch, the base and (after a whole-tree graft) the durable
    /// root in this batch; the session was told of a branch moved under it
    /// (`branch_moved` cleared) and a merge stopped on conflicts ends.
    pub fn set_state(&mut self, change: StateChange) {
        self.rec.head = change.head;
        self.rec.branch = change.branch;
        self.rec.branch_moved = None;
        // A change of HEAD by the session's own request ends a merge stopped on
        // conflicts (its workspace is gone too).
        self.rec.merging = None;
        self.rec.base = change.base;
        if let Some(root) = change.root {
            self.set_root(root);
        }
        self.rec.updated = Timespec::now().sec;
    }

    /// After a whole-tree graft of `root`: the batch's record names `root` as the
    /// durable root (the live table equals it in content; the next flush writes it).
    pub fn set_root(&mut self, root: NodeId) {
        let st = self.s.lock();
        self.rec.root = root;
        self.rec.bytes = st.total_bytes;
        self.rec.inodes = st.total_inodes;
    }

    /// Set other fields of the record the batch commits.
    pub fn edit(&mut self, f: &mut dyn FnMut(&mut SessionRecord)) {
        f(&mut self.rec);
    }

    /// Add ops to the batch.
    pub fn push(&mut self, ops: impl IntoIterator<Item = MetaOp>) {
        self.ops.extend(ops);
    }

    /// The ops that write this batch's record in *another* session's batch (a
    /// branch rename's live followers): the record as edited, guarded
    /// ([`MetaOp::Expect`]) by the stored record as it is now, read under this
    /// batch's flush lock. Only a batch that changed nothing but the record
    /// ([`edit`](Self::edit)) can join another (`invalid` otherwise: its flushes,
    /// checkpoints and touched paths are this session's to commit). Once that
    /// batch is committed, [`joined`](Self::joined); if it is not, drop `self`.
    pub fn joining_ops(&self) -> Result<Vec<MetaOp>> {
        if self.done || self.flushed || !self.ops.is_empty() || !self.touched.is_empty() {
            return Err(Error::Invalid(format!(
                "session {}: only a batch that changes nothing but the record joins another",
                self.s.name()
            )));
        }
        let key = crate::meta::session_key(self.s.name());
        let stored = self.s.store().meta_get(&key)?;
        Ok(vec![
            MetaOp::Expect(key, stored),
            super::record_op(&self.rec),
        ])
    }

    /// The batch that took [`joining_ops`](Self::joining_ops) is committed: the
    /// in-memory record follows (the flush lock still held), and this batch is done.
    pub fn joined(&mut self) {
        self.done = true;
        *super::relock(self.s.record.lock()) = self.rec.clone();
    }

    /// Commit the batch with `extra` (the op's own ops and preconditions) in one
    /// atomic store commit. On success the in-memory record follows and the batch
    /// is done (a later call does nothing but fail). On failure nothing was
    /// written and the batch may be tried again with other `extra`.
    pub fn try_commit(&mut self, extra: Vec<MetaOp>) -> Result<SessionRecord> {
        if self.done {
            return Err(Error::Invalid("transaction already committed".into()));
        }
        let mut ops = self.ops.clone();
        ops.extend(extra);
        ops.push(super::record_op(&self.rec));
        ops.extend(crate::lifecycle::touched::add_ops(
            self.s.name(),
            self.touched.iter().map(Vec::as_slice),
        ));
        self.s.store().commit(ops)?;
        self.s.touched_durable(&self.touched);
        self.done = true;
        *super::relock(self.s.record.lock()) = self.rec.clone();
        let mut st = self.s.lock();
        st.sweep_after_flush();
        if self.checkpointed.0 > 0 {
            st.mutations = 0;
        }
        drop(st);
        Ok(self.rec.clone())
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if !self.done && self.flushed {
            self.s.abandon_prepared(std::mem::take(&mut self.touched));
        }
    }
}
