//! Reachability: what the store's roots reach, for garbage collection and fsck.
//!
//! Owns: the set of *live checkpoints* and the walk from tree roots to every node and
//! chunk they reference.
//!
//! Roots of the store (see docs/design.md, "Garbage collection"):
//! - every session record: its working root, its base root and its head checkpoint,
//!   and its origin's baseline tree (the info record's `origin.baseline_root`)
//!   (and what a merge stopped on conflicts names: `SessionRecord::merging`);
//! - every branch (ref), including the `auto/...` refs of auto-saves;
//! - every checkpoint and workspace root a retained operation record names
//!   (`crate::oplog`; retention prunes records at `gc`);
//! - every checkpoint and workspace root a conversation message names
//!   (`crate::messages`);
//! - every checkpoint taken in a session that still exists;
//! - the parent chain of every live checkpoint;
//! - for mounted sessions, the ids their live inode tables hold (see
//!   `Session::live_ids`), which a gc adds on top.
//!
//! So a checkpoint becomes unreachable only when its session was removed
//! (`session rm`) and no branch, no other session, no retained operation record
//! and no live checkpoint's parent chain names it; `branch -d`, `session rm` and
//! the expiry of operation records (retention, applied at `gc`) are the only ways
//! to make space reclaimable.
//!
//! The walk is iterative (no recursion limit on deep trees), visits each node once
//! (dedup makes the graph a DAG), and never aborts: an unreadable node is recorded
//! as a [`Problem`] with the path it was reached by and the walk goes on.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::error::Result;
use crate::id::{CheckpointId, NodeId, ObjectId};
use crate::refs::session_record::SessionRecord;
use crate::refs::{self, Checkpoint};
use crate::store::{Kind as ObjKind, MetaStore, ObjectStore};

/// Something wrong found while walking.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq, Eq)]
pub struct Problem {
    /// What holds the damaged path: `session NAME`, `checkpoint ID`, `branch NAME`.
    pub owner: String,
    /// Path inside the tree (`/` = the root), when the problem is inside a tree.
    pub path: String,
    /// The object id (hex), when one is involved.
    pub object: Option<String>,
    /// What is wrong.
    pub error: String,
}

impl Problem {
    /// A problem with a record (no tree path): `owner` says which, `object` the id
    /// involved when there is one.
    pub fn record(
        owner: impl Into<String>,
        object: Option<&[u8]>,
        error: impl Into<String>,
    ) -> Problem {
        Problem {
            owner: owner.into(),
            path: String::new(),
            object: object.map(crate::id::hex),
            error: error.into(),
        }
    }
}

/// The store's durable roots.
#[derive(Debug, Default)]
pub struct Roots {
    /// Session records.
    pub sessions: Vec<SessionRecord>,
    /// Branches: (name, checkpoint).
    pub branches: Vec<(String, CheckpointId)>,
    /// Every checkpoint record, by id.
    pub checkpoints: HashMap<CheckpointId, Checkpoint>,
    /// Checkpoints that are live (see module docs).
    pub live: HashSet<CheckpointId>,
    /// What retained operation records and messages name: (owner, checkpoint).
    pub op_checkpoints: Vec<(String, CheckpointId)>,
    /// Workspace roots named by operation records and messages: (owner, root).
    pub op_roots: Vec<(String, NodeId)>,
    /// Records that could not be read or that name something missing.
    pub problems: Vec<Problem>,
}

/// Read every session, branch and checkpoint record and compute the live checkpoints.
pub fn roots(meta: &dyn MetaStore) -> Result<Roots> {
    let mut r = Roots::default();
    r.read_sessions(meta)?;
    r.read_baselines(meta)?;
    r.read_branches(meta)?;
    // Referrers before referents: a record naming a checkpoint is read before the
    // checkpoints are, so one committed in between (with its referrer, in the same
    // batch) is never missing from the scan.
    r.read_ops(meta)?;
    r.read_messages(meta)?;
    r.read_checkpoints(meta)?;
    r.mark_live();
    Ok(r)
}

impl Roots {
    /// Every session record; an unreadable one is a problem.
    fn read_sessions(&mut self, meta: &dyn MetaStore) -> Result<()> {
        for (k, v) in meta.scan(crate::meta::SESSION_PREFIX)? {
            let name = crate::meta::session_name(&k)
                .unwrap_or("(not UTF-8)")
                .to_string();
            match SessionRecord::decode(&name, &v) {
                Ok(s) => self.sessions.push(s),
                Err(e) => self.problems.push(Problem::record(
                    format!("session {name}"),
                    None,
                    format!("unreadable session record: {e}"),
                )),
            }
        }
        Ok(())
    }

    /// Every branch (ref) record; an unreadable one is a problem.
    fn read_branches(&mut self, meta: &dyn MetaStore) -> Result<()> {
        for (k, v) in meta.scan(crate::meta::REF_PREFIX)? {
            let name = crate::meta::ref_name(&k)
                .unwrap_or("(not UTF-8)")
                .to_string();
            match refs::RefRecord::decode(&name, &v) {
                Ok(rr) => self.branches.push((name, rr.checkpoint)),
                Err(e) => self.problems.push(Problem::record(
                    format!("branch {}", crate::refs::names::display(&name, None)),
                    None,
                    format!("unreadable ref record: {e}"),
                )),
            }
        }
        Ok(())
    }

    /// Every checkpoint record; a malformed key or unreadable record is a problem.
    fn read_checkpoints(&mut self, meta: &dyn MetaStore) -> Result<()> {
        for (k, v) in meta.scan(crate::meta::CHECKPOINT_PREFIX)? {
            let Some(id) = crate::meta::checkpoint_id(&k) else {
                self.problems.push(Problem::record(
                    format!("checkpoint key {}", crate::id::hex(&k)),
                    None,
                    "malformed checkpoint key",
                ));
                continue;
            };
            match Checkpoint::decode(&id.to_hex(), &v) {
                Ok(c) => {
                    self.checkpoints.insert(id, c);
                }
                Err(e) => self.problems.push(Problem::record(
                    format!("checkpoint {}", id.to_hex()),
                    None,
                    format!("unreadable checkpoint record: {e}"),
                )),
            }
        }
        Ok(())
    }

    /// The baseline tree of each session's origin (its info record's
    /// `origin.baseline_root`: the import, or where a rebase or promote moved it),
    /// which promote and rebase read. Read as JSON (`lifecycle` owns the record
    /// and sits above this module); a record without one names nothing.
    fn read_baselines(&mut self, meta: &dyn MetaStore) -> Result<()> {
        for s in &self.sessions {
            let Some(v) = meta.get(&crate::meta::info_key(&s.name))? else {
                continue;
            };
            let info: serde_json::Value = serde_json::from_slice(&v).unwrap_or_default();
            let root = info["origin"]["baseline_root"]
                .as_str()
                .and_then(NodeId::from_hex);
            if let Some(id) = root {
                self.op_roots
                    .push((format!("session {} baseline", s.name), id));
            }
        }
        Ok(())
    }

    /// Every operation record (of sessions that exist: `session rm` deletes a
    /// session's log with it); an unreadable one is a problem.
    fn read_ops(&mut self, meta: &dyn MetaStore) -> Result<()> {
        for (k, v) in meta.scan(crate::meta::OP_PREFIX)? {
            let owner = match crate::meta::op_parts(&k) {
                Some((s, n)) => format!("operation {s}#{n}"),
                None => format!("operation key {}", crate::id::hex(&k)),
            };
            match crate::oplog::Operation::decode(&owner, &v) {
                Ok(op) => {
                    for c in op.checkpoints() {
                        self.op_checkpoints.push((owner.clone(), c));
                    }
                    for view in [&op.before, &op.after] {
                        self.op_roots.push((owner.clone(), view.workspace));
                    }
                }
                Err(e) => self.problems.push(Problem::record(
                    owner,
                    None,
                    format!("unreadable operation record: {e}"),
                )),
            }
        }
        Ok(())
    }

    /// Every conversation message: the checkpoint and workspace root it names
    /// are kept like an operation record's (a rewind restores them); an
    /// unreadable one is a problem. Read a page at a time (a store holds up to
    /// `message_bytes` per session).
    fn read_messages(&mut self, meta: &dyn MetaStore) -> Result<()> {
        let mut range = crate::meta::KeyRange::prefix(crate::meta::MESSAGE_PREFIX);
        loop {
            let page = meta.range(&range, crate::messages::share::CHUNK)?;
            let n = page.len();
            if let Some((k, _)) = page.last() {
                range.start = k.clone();
                range.start.push(0);
            }
            self.read_message_page(page);
            if n < crate::messages::share::CHUNK {
                return Ok(());
            }
        }
    }

    fn read_message_page(&mut self, page: Vec<(Vec<u8>, Vec<u8>)>) {
        for (k, v) in page {
            let owner = match crate::meta::message_parts(&k) {
                Some((s, t, n)) => format!("message {s}#{}{n}", t as char),
                None => format!("message key {}", crate::id::hex(&k)),
            };
            match crate::messages::Message::decode(&owner, &v) {
                Ok(m) => {
                    if let Some(c) = m.checkpoint {
                        self.op_checkpoints.push((owner.clone(), c));
                    }
                    self.op_roots.push((owner, m.workspace));
                }
                Err(e) => self.problems.push(Problem::record(
                    owner,
                    None,
                    format!("unreadable message record: {e}"),
                )),
            }
        }
    }

    /// Live checkpoints: the seeds (checkpoints of existing sessions, session heads,
    /// branches), then their parent chains. A name of a missing checkpoint is a
    /// problem.
    fn mark_live(&mut self) {
        let names: HashSet<&str> = self.sessions.iter().map(|s| s.name.as_str()).collect();
        let mut stack: Vec<(CheckpointId, String)> = Vec::new();
        for (id, c) in &self.checkpoints {
            if names.contains(c.session.as_str()) {
                stack.push((*id, format!("session {}", c.session)));
            }
        }
        for s in &self.sessions {
            let merging = s.merging.iter().flat_map(|m| {
                [m.before, m.theirs_id]
                    .into_iter()
                    .flatten()
                    .chain(m.parents.iter().copied())
            });
            for h in s.head.into_iter().chain(merging) {
                stack.push((h, format!("session {}", s.name)));
            }
        }
        for (name, c) in &self.branches {
            stack.push((
                *c,
                format!("branch {}", crate::refs::names::display(name, None)),
            ));
        }
        for (owner, c) in &self.op_checkpoints {
            stack.push((*c, owner.clone()));
        }
        while let Some((id, owner)) = stack.pop() {
            if self.live.contains(&id) {
                continue;
            }
            let Some(c) = self.checkpoints.get(&id) else {
                self.problems.push(Problem::record(
                    owner,
                    Some(&id.0),
                    "names a checkpoint that does not exist",
                ));
                continue;
            };
            self.live.insert(id);
            for p in &c.parents {
                stack.push((*p, format!("checkpoint {} (parent)", id.to_hex())));
            }
        }
    }
}

impl Roots {
    /// Every tree root to walk, with the owner to name in problems.
    pub fn tree_roots(&self) -> Vec<(String, NodeId)> {
        let mut out = Vec::new();
        for s in &self.sessions {
            let merging = s
                .merging
                .iter()
                .flat_map(|m| std::iter::once(m.before_root).chain(m.onto.as_ref().map(|o| o.1)));
            for id in [s.root, s.base].into_iter().chain(merging) {
                out.push((format!("session {}", s.name), id));
            }
        }
        out.extend(self.op_roots.iter().cloned());
        let mut live: Vec<_> = self.live.iter().copied().collect();
        live.sort();
        for id in live {
            out.push((
                format!("checkpoint {}", id.to_hex()),
                self.checkpoints[&id].root,
            ));
        }
        out
    }
}

mod walk;

pub use walk::{Boundary, ChunkCheck, HeldElsewhere, Reader, Walk};

/// Convenience used by tests: every object reached from the store's durable roots.
pub fn reachable(store: &dyn ObjectStore) -> Result<(Roots, HashSet<ObjectId>)> {
    let mut r = roots(store.meta())?;
    let read = |k: ObjKind, id: &ObjectId| store.get(k, id);
    let mut w = Walk::new(&read, ChunkCheck::Mark);
    for (owner, id) in r.tree_roots() {
        w.root(&owner, id);
    }
    let all: HashSet<ObjectId> = w.reached().copied().collect();
    r.problems.extend(w.problems);
    Ok((r, all))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::MemStore;
    use crate::tree::{Attr, DirNode, Timespec};
    use crate::tree::{Content, Entry, FileNode, Kind, Record, RootNode};

    fn record(kind: Kind, ino: u64, content: Content) -> Record {
        Record {
            kind,
            ino,
            attr: Attr {
                perm: 0o755,
                nlink: 2,
                mtime: Timespec { sec: 1, nsec: 0 },
                ..Attr::default()
            },
            xattrs: vec![],
            content,
        }
    }

    /// A root whose tree is a chain of `depth` directories `d/d/d/...`, with a small
    /// file at the bottom. Built bottom-up (no recursion). Returns the root and the
    /// bottom file's node id.
    pub(crate) fn deep_chain(store: &dyn ObjectStore, depth: u64) -> (NodeId, ObjectId) {
        let file = FileNode::Inline(b"at the bottom".to_vec());
        let fid = store.put(ObjKind::Node, &file.encode()).unwrap();
        let mut entry = (
            b"f".to_vec(),
            record(Kind::File, depth + 2, Content::Node(fid.node())),
        );
        for i in 0..depth {
            let dir = DirNode {
                entries: vec![(entry.0, Entry::Inline(entry.1))],
            };
            let id = store.put(ObjKind::Node, &dir.encode()).unwrap();
            entry = (
                b"d".to_vec(),
                record(Kind::Dir, depth + 1 - i, Content::Node(id.node())),
            );
        }
        let root = RootNode {
            root: entry.1,
            links: vec![],
            next_ino: depth + 3,
        };
        (
            store.put(ObjKind::Node, &root.encode()).unwrap().node(),
            fid,
        )
    }

    /// Run `f` on a thread with a small stack: a walk that recursed once per
    /// directory level would overflow it (and abort the test binary).
    pub(crate) fn on_small_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn_scoped(s, f)
                .unwrap()
                .join()
                .unwrap()
        })
    }

    #[test]
    fn walks_of_a_10000_deep_tree_do_not_recurse() {
        let store = MemStore::default();
        let (root, bottom) = deep_chain(&store, 10_000);
        for mode in [ChunkCheck::Mark, ChunkCheck::Verify] {
            let w = on_small_stack(|| {
                let read = |k: ObjKind, id: &ObjectId| store.get(k, id);
                let mut w = Walk::new(&read, mode);
                w.root("test", root);
                w.any_node("live", root);
                (w.nodes.len(), w.nodes.contains(&bottom), w.problems)
            });
            // root + 10,000 directories + the file node.
            assert_eq!(w, (10_002, true, vec![]));
        }
    }

    /// A metadata store that commits `inject` just before answering its `at`-th
    /// scan: a checkpoint and the operation naming it, as one batch, racing a gc's
    /// reading of the roots.
    struct RacingMeta<'a> {
        inner: &'a crate::store::MemMeta,
        scans: std::sync::atomic::AtomicUsize,
        at: usize,
        inject: std::sync::Mutex<Option<Vec<crate::meta::MetaOp>>>,
    }

    impl MetaStore for RacingMeta<'_> {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.inner.get(key)
        }
        fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            let n = self.scans.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n == self.at
                && let Some(ops) = self.inject.lock().unwrap().take()
            {
                self.inner.apply(ops)?;
            }
            self.inner.scan(prefix)
        }
        fn range(
            &self,
            r: &crate::meta::KeyRange,
            limit: usize,
        ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            self.inner.range(r, limit)
        }
        fn range_rev(
            &self,
            r: &crate::meta::KeyRange,
            limit: usize,
        ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            self.inner.range_rev(r, limit)
        }
        fn apply(&self, ops: Vec<crate::meta::MetaOp>) -> Result<()> {
            self.inner.apply(ops)
        }
    }

    #[test]
    fn roots_read_referrers_before_referents() {
        use crate::oplog::{Actor, NewOp, View};
        let store = MemStore::default();
        let (root, _) = deep_chain(&store, 1);
        let rec = crate::refs::session_record::new_record("s", root, 0, 1).unwrap();
        let c = Checkpoint::new("s", root, None, "m", "manual", 0);
        let view = |h: Option<CheckpointId>| View {
            head: h,
            branch: None,
            workspace: root,
            branches: Default::default(),
        };
        let op = NewOp::new(
            &Actor::daemon(),
            "checkpoint",
            serde_json::json!({}),
            view(None),
            view(Some(c.id)),
        )
        .build("s", 1);
        // At every moment of the reading, a commit of a checkpoint with the record
        // naming it leaves no problem behind.
        for at in 0..6 {
            let inner = crate::store::MemMeta::default();
            inner
                .apply(vec![crate::refs::session_record::record_op(&rec)])
                .unwrap();
            let mut batch = vec![c.op()];
            batch.extend(op.ops());
            let m = RacingMeta {
                inner: &inner,
                scans: Default::default(),
                at,
                inject: std::sync::Mutex::new(Some(batch)),
            };
            let r = roots(&m).unwrap();
            assert!(r.problems.is_empty(), "scan {at}: {:?}", r.problems);
        }
    }
}
