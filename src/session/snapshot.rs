//! Checkpoints and tree swaps of a live session.
//!
//! Owns: moving the attached branch with a checkpoint ([`advance_attached`],
//! used by `super::Txn`'s checkpoints, the only way a checkpoint of the live
//! state is taken), and *grafting* another tree into the live table (checkout and restore,
//! inside an op's batch: `super::txn`):
//! the locks, the generation guard and the skip decision here, the rules (hard
//! links included) in `super::graft`. Cost is proportional to what differs (and
//! to what a replaced directory held); equal subtrees are skipped by id. The
//! kernel entries and inodes to invalidate are returned for the caller to send
//! after every lock is released — also when the graft fails midway (what changed
//! is returned with the error).

pub use super::graft::Inval;
use super::{Session, SessionRecord};
use crate::diff::{self, Tree};
use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::refs::{self, Checkpoint};

/// What [`super::Txn::set_state`] sets.
#[derive(Debug, Clone)]
pub struct StateChange {
    /// HEAD's checkpoint.
    pub head: Option<CheckpointId>,
    /// The branch HEAD is attached to.
    pub branch: Option<String>,
    /// The base root (HEAD's tree).
    pub base: NodeId,
    /// The new durable root after a whole-tree graft (`None`: unchanged).
    pub root: Option<NodeId>,
}

/// The ops moving the branch HEAD is attached to (in `rec`) from the old HEAD
/// (`before.head`) to `c`, guarded by its old value; detaches `rec` instead when the
/// branch no longer names the old HEAD (and records that in `rec.branch_moved`, so
/// the session is told).
pub(super) fn advance_attached(
    store: &dyn crate::store::ObjectStore,
    rec: &mut SessionRecord,
    before: &SessionRecord,
    c: &Checkpoint,
) -> Result<Vec<crate::meta::MetaOp>> {
    let Some(b) = rec.branch.clone() else {
        return Ok(Vec::new());
    };
    let key = crate::meta::ref_key(&b);
    let raw = store.meta_get(&key)?;
    let current = raw
        .as_deref()
        .map(|v| refs::RefRecord::decode(&b, v))
        .transpose()?;
    match current {
        Some(r) if Some(r.checkpoint) == before.head => Ok(vec![
            crate::meta::MetaOp::Expect(key, raw),
            refs::ref_op(
                &b,
                &refs::RefRecord {
                    checkpoint: c.id,
                    created: r.created,
                },
            ),
        ]),
        other => {
            log::warn!(
                "session {}: branch {b} {} HEAD; HEAD is detached now",
                rec.name,
                if other.is_some() {
                    "moved away from"
                } else {
                    "was deleted under"
                }
            );
            rec.branch = None;
            rec.branch_moved = Some(super::BranchMoved {
                branch: b,
                to: other.map(|r| r.checkpoint),
                head: before.head,
            });
            Ok(Vec::new())
        }
    }
}

impl Session {
    /// The root of the session's base: its HEAD checkpoint's root, or the root it
    /// was created from.
    pub fn base_root(&self) -> NodeId {
        self.record().base
    }

    /// Take a checkpoint of the current state (call after the kernel's writeback
    /// was flushed), naming it `branch` too when given: an UNRECORDED checkpoint,
    /// for the tests of the layers below `ops` (an op takes its checkpoints in its
    /// own batch, recorded: `ops::checkpoint::take`).
    #[cfg(test)]
    pub fn checkpoint(
        &self,
        message: &str,
        trigger: &str,
        branch: Option<&str>,
    ) -> Result<Checkpoint> {
        let mut tx = self.txn();
        let c = tx.checkpoint(message, trigger)?;
        if let Some(b) = branch {
            let created = crate::tree::Timespec::now().sec;
            let r = refs::RefRecord {
                checkpoint: c.id,
                created,
            };
            tx.push([
                refs::ref_op(b, &r),
                crate::visibility::grant_op(self.name(), b, created, "created"),
            ]);
        }
        tx.try_commit(Vec::new())?;
        Ok(c)
    }

    /// After a whole-tree [`graft`](Self::graft) of `root`: make the session's HEAD
    /// `head` and its base and durable root `root`, in one small commit. The live
    /// table is not re-encoded here: it equals `root` in content (grafted paths only
    /// got fresh inode numbers), and the next flush writes it.
    pub fn commit_checkout(&self, head: CheckpointId, root: NodeId) -> Result<SessionRecord> {
        // The attached branch is read under the flush lock (the batch's), so a
        // branch rename that made this session follow is never written back.
        let mut tx = self.txn();
        let (branch, merging) = (tx.record().branch.clone(), tx.record().merging.clone());
        tx.set_state(StateChange {
            head: Some(head),
            branch,
            base: root,
            root: Some(root),
        });
        tx.edit(&mut |r| r.merging = merging.clone());
        tx.try_commit(Vec::new())
    }

    /// Whether the working state differs from the base (flushes first).
    pub fn has_changes(&self) -> Result<bool> {
        let base = self.base_root();
        {
            // Right after a checkout nothing needs encoding to know the answer: the
            // live tree is the grafted target (= base) and nothing was written since.
            let st = self.lock();
            if st.graft_mark == Some((st.generation, base)) {
                return Ok(false);
            }
        }
        let root = self.flush()?;
        diff::differ(&**self.store(), base, root)
    }

    /// (mutations since the last checkpoint, unix ms of the last one).
    pub fn activity(&self) -> (u64, u64) {
        let st = self.lock();
        (st.mutations, st.last_mutation_ms)
    }

    /// The mutation generation (see [`State::generation`]).
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Replace the live tree (or the given paths of it) by the tree `target`.
    /// The caller flushes before (so every live inode is clean) and after. With
    /// `expect`, refuses (`Conflict`) if anything was written since that generation,
    /// so a write racing the caller's save is never dropped from the tree.
    ///
    /// Returns the kernel invalidations for what changed *and* the outcome: a graft
    /// that fails midway (a target node that does not read) has changed part of the
    /// tree, and the caller must send those invalidations whatever the result, or
    /// the kernel keeps node ids that no longer name anything.
    pub fn graft(
        &self,
        target: NodeId,
        paths: Option<&[Vec<u8>]>,
        expect: Option<u64>,
    ) -> (Vec<Inval>, Result<()>) {
        let _g = super::relock(self.flush_lock.lock());
        self.graft_held(target, paths, expect)
    }

    /// [`graft`](Self::graft) with the flush lock already held (by a [`super::Txn`]).
    pub(super) fn graft_held(
        &self,
        target: NodeId,
        paths: Option<&[Vec<u8>]>,
        expect: Option<u64>,
    ) -> (Vec<Inval>, Result<()>) {
        let mut inval = Vec::new();
        let r = self.graft_into(target, paths, expect, &mut inval);
        // One invalidation per inode is enough (a directory is listed once per
        // changed entry).
        let mut seen = std::collections::HashSet::new();
        inval.retain(|i| match i {
            Inval::Inode(ino) => seen.insert(*ino),
            Inval::Entry(..) => true,
        });
        (inval, r)
    }

    fn graft_into(
        &self,
        target: NodeId,
        paths: Option<&[Vec<u8>]>,
        expect: Option<u64>,
        inval: &mut Vec<Inval>,
    ) -> Result<()> {
        let store = self.store().clone();
        let t = Tree::load(&*store, target)?;
        let mut st = self.lock();
        if let Some(g) = expect
            && st.generation != g
        {
            return Err(Error::Conflict(
                "the workspace changed while it was being saved".into(),
            ));
        }
        st.next_ino = st.next_ino.max(t.root.next_ino);
        // Equal subtrees (and shared directory shards) may be skipped only if the
        // hard-link records they can refer to agree in both trees.
        // Without live hard links no live directory holds a link-table reference,
        // so an equal id on both sides cannot hide a differing link record.
        let skip = st.links.is_empty()
            || match st.root_id {
                Some(live) if !st.changed => Tree::load(&*store, live)?.links_agree(&t),
                _ => false,
            };
        let r = super::graft::graft(&mut st, &*store, &t, skip, paths, inval);
        // Whatever was grafted before an error is part of the live tree now.
        st.changed = true;
        st.last_mutation_ms = crate::clock::unix_ms();
        st.graft_mark = match (&r, paths) {
            (Ok(()), None) => Some((st.generation, target)),
            _ => None,
        };
        r
    }
}
