//! Checkpoints and tree swaps of a live session.
//!
//! Owns: taking a checkpoint (flush + checkpoint record + HEAD move, one atomic
//! commit), and *grafting* another tree into the live table (checkout and restore).
//!
//! Graft rules, applied path by path from the root (or from each restored path):
//! an entry whose live record equals the target record is left alone (same inode,
//! same cached pages); a directory present in both keeps its inode number and is
//! grafted in turn (a heap stack of tasks: no recursion per level); anything else is replaced: the old inode is unlinked (open
//! handles keep reading what they had) and the target entry is inserted under fresh
//! inode numbers, so the kernel never sees an inode number change meaning. Cost is
//! proportional to what differs; equal subtrees are skipped by id. The kernel
//! entries and inodes to invalidate are returned for the caller to send after every
//! lock is released — also when the graft fails midway (what changed is returned
//! with the error).

use std::collections::{BTreeMap, BTreeSet};

use super::inode::{Data, Inode, State};
use super::{Session, SessionRecord, now_ms};
use crate::diff::{self, Tree};
use crate::error::{Error, Result, posix};
use crate::id::{CheckpointId, NodeId};
use crate::refs::{self, Checkpoint};
use crate::store::ObjectStore;
use crate::tree::{Content, Kind, Record, Timespec};

/// A kernel cache invalidation to send after a graft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inval {
    /// Forget the dentry `name` in directory `parent`.
    Entry(u64, Vec<u8>),
    /// Forget the attributes (and pages) of an inode.
    Inode(u64),
}

impl Session {
    /// The root of the session's base: its HEAD checkpoint's root, or the root it
    /// was created from.
    pub fn base_root(&self) -> Result<NodeId> {
        let rec = self.record();
        NodeId::from_hex(&rec.base)
            .ok_or_else(|| Error::corrupt(format!("session record {}", rec.name), "bad base id"))
    }

    /// Take a checkpoint of the current state (call after the kernel's writeback was
    /// flushed). Returns the checkpoint and the new session record.
    pub fn checkpoint(
        &self,
        message: &str,
        trigger: &str,
        branch: Option<&str>,
    ) -> Result<Checkpoint> {
        self.checkpoint_with_meta(message, trigger, branch, serde_json::Map::new())
    }

    /// [`checkpoint`](Self::checkpoint) with a `meta` map (stored in the record and
    /// covered by its id). Checks the trigger's syntax and the map
    /// ([`refs::validate_meta`]); whether a client may use the trigger is the
    /// caller's check ([`refs::validate_requested_trigger`]).
    pub fn checkpoint_with_meta(
        &self,
        message: &str,
        trigger: &str,
        branch: Option<&str>,
        meta: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Checkpoint> {
        refs::validate_trigger(trigger)?;
        refs::validate_meta(&meta)?;
        let store = self.store().clone();
        let name = self.name().to_string();
        let mut made: Option<Checkpoint> = None;
        let mut extra =
            |rec: &mut SessionRecord, root: NodeId| -> Result<Vec<crate::meta::MetaOp>> {
                let parent = rec.head.as_deref().and_then(CheckpointId::from_hex);
                let from = NodeId::from_hex(&rec.base).unwrap_or(root);
                let changed = diff::diff_count(&*store, from, root)?;
                let c = refs::NewCheckpoint {
                    session: &name,
                    root,
                    parents: parent.into_iter().collect(),
                    message,
                    trigger,
                    files_changed: changed,
                    meta: meta.clone(),
                }
                .build();
                rec.head = Some(c.id.clone());
                rec.base = root.to_hex();
                let mut ops = vec![c.op()];
                if let Some(b) = branch {
                    ops.push(refs::ref_op(
                        b,
                        &refs::RefRecord {
                            checkpoint: c.id.clone(),
                            created: Timespec::now().sec,
                        },
                    ));
                }
                made = Some(c);
                Ok(ops)
            };
        self.flush_with(Some(&mut extra))?;
        let mut st = self.lock();
        st.mutations = 0;
        drop(st);
        Ok(made.expect("checkpoint built"))
    }

    /// After a whole-tree [`graft`](Self::graft) of `root`: make the session's HEAD
    /// `head` and its base and durable root `root`, in one small commit. The live
    /// table is not re-encoded here: it equals `root` in content (grafted paths only
    /// got fresh inode numbers), and the next flush writes it.
    pub fn commit_checkout(&self, head: &str, root: NodeId) -> Result<SessionRecord> {
        let _g = super::relock(self.flush_lock.lock());
        let (bytes, inodes) = {
            let st = self.lock();
            (st.total_bytes, st.total_inodes)
        };
        let mut rec = self.record();
        rec.head = Some(head.to_string());
        rec.base = root.to_hex();
        rec.root = root.to_hex();
        rec.updated = Timespec::now().sec;
        rec.bytes = bytes;
        rec.inodes = inodes;
        self.store().commit(vec![super::record_op(&rec)])?;
        *super::relock(self.record.lock()) = rec.clone();
        Ok(rec)
    }

    /// Whether the working state differs from the base (flushes first).
    pub fn has_changes(&self) -> Result<bool> {
        let base = self.base_root()?;
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
        let _g = super::relock(self.flush_lock.lock());
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
        let mut g = Graft {
            st: &mut st,
            store: &*store,
            t: &t,
            skip,
            inval,
        };
        let r = match paths {
            None => g.run(Task::Dir(1, t.root.root.clone())),
            Some(paths) => paths.iter().try_for_each(|p| g.path(p)),
        };
        // Whatever was grafted before an error is part of the live tree now.
        st.changed = true;
        st.last_mutation_ms = now_ms();
        st.graft_mark = match (&r, paths) {
            (Ok(()), None) => Some((st.generation, target)),
            _ => None,
        };
        r
    }
}

fn live_record(i: &Inode, ino: u64) -> Option<Record> {
    Some(i.record(ino, i.clean_content()?))
}

fn target_dir(store: &dyn ObjectStore, r: &Record) -> Result<crate::tree::DirNode> {
    crate::dirs::load_dir(
        store,
        match r.content {
            Content::Node(id) => Some(id),
            _ => None,
        },
    )
}

/// One step of a graft (see module docs); [`Graft::run`] works a stack of them, so
/// a tree of any depth grafts in constant thread stack.
enum Task {
    /// Make live directory `.0` (kept inode) look like target record `.1`.
    Dir(u64, Record),
    /// After a `Dir`'s entries: take the target directory's attributes.
    Finish(u64, Record),
    /// Make entry `name` of live directory `parent` equal the target (None: absent).
    Entry(u64, Vec<u8>, Option<Record>),
    /// Insert target record `r` as `name` in `parent` under fresh inode numbers.
    Fresh(u64, Vec<u8>, Record),
}

/// A graft in progress. Every change to the table pushes its invalidations at
/// once, so an error midway leaves nothing changed and uninvalidated.
struct Graft<'a> {
    st: &'a mut State,
    store: &'a dyn ObjectStore,
    t: &'a Tree,
    skip: bool,
    inval: &'a mut Vec<Inval>,
}

impl Graft<'_> {
    fn run(&mut self, first: Task) -> Result<()> {
        let mut stack = vec![first];
        while let Some(task) = stack.pop() {
            crate::failpoint::graft_step(self.inval.len())?;
            match task {
                Task::Dir(dir, r) => self.dir(dir, r, &mut stack)?,
                Task::Finish(dir, r) => {
                    let i = self.st.get_mut(dir)?;
                    let nlink = i.attr.nlink;
                    i.attr = r.attr;
                    i.attr.nlink = nlink;
                    i.xattrs = r.xattrs.iter().cloned().collect();
                    self.st.mark_dir_changed(dir);
                    self.inval.push(Inval::Inode(dir));
                }
                Task::Entry(parent, name, target) => {
                    self.entry(parent, &name, target, &mut stack)?
                }
                Task::Fresh(parent, name, r) => self.fresh(parent, &name, &r, &mut stack)?,
            }
        }
        Ok(())
    }

    /// The entry `name` of `parent` changed (inserted, removed or replaced).
    fn changed(&mut self, parent: u64, name: &[u8]) {
        self.inval.push(Inval::Entry(parent, name.to_vec()));
        self.inval.push(Inval::Inode(parent));
    }

    /// Graft one path (`a/b/c`): descend while both sides are directories, graft
    /// the first entry that differs in kind or presence, or the final component.
    fn path(&mut self, path: &[u8]) -> Result<()> {
        let comps: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        if comps.iter().any(|c| *c == b"..") {
            return Err(Error::Invalid(format!(
                "path {:?} must stay inside the workspace (no '..')",
                String::from_utf8_lossy(path)
            )));
        }
        if comps.is_empty() {
            return self.run(Task::Dir(1, self.t.root.root.clone()));
        }
        let (st, store, t) = (&mut *self.st, self.store, self.t);
        let mut live_dir = 1u64;
        let mut target: Option<Record> = Some(t.root.root.clone());
        for (n, comp) in comps.iter().enumerate() {
            let tdir = match &target {
                Some(r) if r.kind == Kind::Dir => Some(target_dir(store, r)?),
                _ => None,
            };
            let tchild = tdir
                .as_ref()
                .and_then(|d| d.entries.iter().find(|(name, _)| name == comp))
                .and_then(|(_, e)| t.resolve(e));
            let mut live = st.child(store, live_dir, comp)?;
            let last = n + 1 == comps.len();
            // A missing parent of the restored path is recreated empty (with the
            // target's attributes): restoring `a/b/c` must not bring back `a/x`.
            if !last
                && live.is_none()
                && let Some(r) = tchild.as_ref().filter(|r| r.kind == Kind::Dir)
            {
                live = Some(insert_empty_dir(st, live_dir, comp, r)?);
                self.inval.push(Inval::Entry(live_dir, comp.to_vec()));
                self.inval.push(Inval::Inode(live_dir));
            }
            let both_dirs = matches!((&tchild, live), (Some(r), Some(l)) if r.kind == Kind::Dir && st.get(l)?.kind == Kind::Dir);
            if last || !both_dirs {
                return self.run(Task::Entry(live_dir, comp.to_vec(), tchild));
            }
            live_dir = live.unwrap();
            target = tchild;
        }
        Ok(())
    }

    fn entry(
        &mut self,
        parent: u64,
        name: &[u8],
        target: Option<Record>,
        stack: &mut Vec<Task>,
    ) -> Result<()> {
        let live = self.st.child(self.store, parent, name)?;
        match (live, target) {
            (None, None) => {}
            (Some(l), None) => {
                remove_entry(self.st, parent, name, l)?;
                self.changed(parent, name);
            }
            (None, Some(r)) => stack.push(Task::Fresh(parent, name.to_vec(), r)),
            (Some(l), Some(r)) => {
                let i = self.st.get(l)?;
                let equal = !i.hardlink && live_record(i, l).as_ref() == Some(&r);
                if equal && (self.skip || i.kind != Kind::Dir) {
                    return Ok(());
                }
                if i.kind == Kind::Dir && r.kind == Kind::Dir {
                    stack.push(Task::Dir(l, r));
                } else {
                    remove_entry(self.st, parent, name, l)?;
                    self.changed(parent, name);
                    stack.push(Task::Fresh(parent, name.to_vec(), r));
                }
            }
        }
        Ok(())
    }

    /// Make live directory `dir` (kept inode) look like target record `r`: queue
    /// its entries, then its attributes.
    fn dir(&mut self, dir: u64, r: Record, stack: &mut Vec<Task>) -> Result<()> {
        let (st, store) = (&mut *self.st, self.store);
        st.load_dir(store, dir)?;
        let live_id = match &st.get(dir)?.data {
            Data::Dir(d) => d.stored,
            _ => None,
        };
        let (mut names, tdir): Names = match (live_id, &r.content) {
            // The live directory is exactly node `l`: only entries outside the
            // shards both sides share can differ.
            (Some(l), Content::Node(tid)) if self.skip => {
                let (live, target) = crate::dirs::load_differing(store, l, *tid)?;
                (
                    live.entries.into_iter().map(|(n, _)| n).collect(),
                    target.entries.into_iter().collect(),
                )
            }
            // The live directory is not encoded (e.g. right after a checkout) but
            // some of its shards still equal stored leaves: skip those the target
            // shares.
            (None, Content::Node(tid)) if self.skip => match shared_leaves(st, store, dir, *tid)? {
                Some(x) => x,
                None => (
                    st.entries_mut(dir)?.keys().cloned().collect(),
                    target_dir(store, &r)?.entries.into_iter().collect(),
                ),
            },
            _ => (
                st.entries_mut(dir)?.keys().cloned().collect(),
                target_dir(store, &r)?.entries.into_iter().collect(),
            ),
        };
        names.extend(tdir.keys().cloned());
        stack.push(Task::Finish(dir, r));
        // Reversed: entries are grafted in name order.
        for name in names.into_iter().rev() {
            let tchild = tdir.get(&name).and_then(|e| self.t.resolve(e));
            stack.push(Task::Entry(dir, name, tchild));
        }
        Ok(())
    }

    /// Insert target record `r` under a fresh inode number; a directory's entries
    /// are queued (hard links inside are materialized as separate files).
    fn fresh(&mut self, parent: u64, name: &[u8], r: &Record, stack: &mut Vec<Task>) -> Result<()> {
        let ino = insert_fresh(self.st, self.store, parent, name, r)?;
        self.changed(parent, name);
        if r.kind == Kind::Dir {
            let entries = target_dir(self.store, r)?.entries;
            for (cname, e) in entries.into_iter().rev() {
                if let Some(cr) = self.t.resolve(&e) {
                    stack.push(Task::Fresh(ino, cname, cr));
                }
            }
        }
        Ok(())
    }
}

type Names = (BTreeSet<Vec<u8>>, BTreeMap<Vec<u8>, crate::tree::Entry>);

/// For a live sharded directory without a content id and a sharded target `tid`:
/// the live names and target entries outside the leaves both sides share (a live
/// shard equals a stored leaf when it is clean and its membership digest is cached;
/// see `flush::clean_leaves`). `None` when the target is not sharded.
fn shared_leaves(
    st: &State,
    store: &dyn ObjectStore,
    dir: u64,
    tid: crate::id::NodeId,
) -> Result<Option<Names>> {
    let (tids, sharded) = crate::dirs::shard_ids(store, tid)?;
    if !sharded {
        return Ok(None);
    }
    let tset: std::collections::HashSet<_> = tids.iter().copied().collect();
    let mut matched = std::collections::HashSet::new();
    let mut same: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    let live = super::flush::clean_leaves(st, dir)?;
    for (id, names) in &live {
        if tset.contains(id) {
            matched.insert(*id);
            same.extend(names.iter().map(|n| n.as_slice()));
        }
    }
    let Data::Dir(d) = &st.get(dir)?.data else {
        return posix(libc::ENOTDIR);
    };
    let names = d
        .entries
        .as_ref()
        .expect("dir loaded")
        .keys()
        .filter(|n| !same.contains(n.as_slice()))
        .cloned()
        .collect();
    let mut target = BTreeMap::new();
    for id in tids.into_iter().filter(|id| !matched.contains(id)) {
        target.extend(crate::dirs::load_leaf(store, id)?.entries);
    }
    Ok(Some((names, target)))
}

fn insert_empty_dir(st: &mut State, parent: u64, name: &[u8], r: &Record) -> Result<u64> {
    let ino = st.alloc_ino();
    let mut inode = Inode::from_record(r, parent, false);
    inode.data = Data::Dir(super::inode::Dir {
        stored: None,
        entries: Some(Default::default()),
        shards: Default::default(),
        base: None,
    });
    inode.attr.nlink = 2;
    st.inodes.insert(ino, inode);
    st.entries_mut(parent)?.insert(name.to_vec(), ino);
    st.get_mut(parent)?.attr.nlink += 1;
    st.total_inodes += 1;
    st.mark_dir_changed(parent);
    st.mark_dir_changed(ino);
    Ok(ino)
}

fn remove_entry(st: &mut State, parent: u64, name: &[u8], ino: u64) -> Result<()> {
    st.entries_mut(parent)?.remove(name);
    let now = Timespec::now();
    let is_dir = st.get(ino)?.kind == Kind::Dir;
    if is_dir {
        st.get_mut(parent)?.attr.nlink -= 1;
    }
    super::ops::drop_link(st, ino, now);
    st.mark_dir_changed(parent);
    Ok(())
}

/// Insert target record `r` as `name` in `parent` under a fresh inode number (a
/// directory starts empty and materialized: its children get fresh inodes too).
fn insert_fresh(
    st: &mut State,
    store: &dyn ObjectStore,
    parent: u64,
    name: &[u8],
    r: &Record,
) -> Result<u64> {
    if st.child(store, parent, name)?.is_some() {
        return posix(libc::EEXIST);
    }
    let ino = st.alloc_ino();
    let mut inode = Inode::from_record(r, parent, false);
    if r.kind != Kind::Dir {
        inode.attr.nlink = 1;
    }
    inode.dirty = true;
    let is_dir = r.kind == Kind::Dir;
    if is_dir {
        inode.data = Data::Dir(super::inode::Dir {
            stored: None,
            entries: Some(Default::default()),
            shards: Default::default(),
            base: None,
        });
        inode.attr.nlink = 2;
    }
    if r.kind == Kind::File {
        st.total_bytes += r.attr.size as i64;
    }
    st.total_inodes += 1;
    st.inodes.insert(ino, inode);
    st.entries_mut(parent)?.insert(name.to_vec(), ino);
    if is_dir {
        st.get_mut(parent)?.attr.nlink += 1;
    }
    st.mark_dir_changed(parent);
    st.mark_dirty(ino);
    Ok(ino)
}
