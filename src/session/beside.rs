//! Trees built beside the live table: a private session opened on a stored root,
//! changed through the ordinary POSIX operations, and encoded to a new root that
//! nothing commits ([`Session::build_beside`]). Merges build their result this way
//! (`crate::merge`), then graft it into the live workspace like a checkout.
//!
//! Invariants: the private session is never mounted and never commits a record;
//! everything it puts into the store happens under the live session's flush lock
//! (so gc's barrier, which takes that lock, waits for it), and its root is pinned
//! in the live session's open pin scope before the lock is released (so gc marks it
//! until the operation that grafts it has committed).

use std::sync::Arc;

use super::Session;
use crate::error::Result;
use crate::id::NodeId;

impl Session {
    /// Open a private session at `from`, let `build` change it, and encode it: the
    /// new root, pinned in this session's pin scope (see the module docs). Writes
    /// nothing durable besides the tree's objects.
    pub fn build_beside(
        &self,
        from: NodeId,
        build: &mut dyn FnMut(&Session) -> Result<()>,
    ) -> Result<NodeId> {
        let _g = super::relock(self.flush_lock.lock());
        self.build_beside_held(from, build)
    }

    /// [`build_beside`](Self::build_beside) with the flush lock already held (by
    /// a [`super::Txn`]).
    pub(super) fn build_beside_held(
        &self,
        from: NodeId,
        build: &mut dyn FnMut(&Session) -> Result<()>,
    ) -> Result<NodeId> {
        let mut rec = self.record();
        rec.root = from;
        let scratch = Session::open(Arc::clone(self.store()), rec)?;
        build(&scratch)?;
        let root = match scratch.prepare_locked(true)? {
            Some(p) => p.root,
            None => from,
        };
        self.lock().note_root(root);
        Ok(root)
    }
}
