//! The graft engine: makes the live table (or some paths of it) equal a stored
//! tree; [`Session::graft`](super::Session::graft) takes the locks and calls it.
//!
//! Rules, applied path by path from the root (or from each restored path): an
//! entry whose live record equals the target record is left alone (same inode, same
//! cached pages); a directory present in both keeps its inode number and is grafted
//! in turn (a heap stack of tasks: no recursion per level); anything else is
//! replaced: the old entry is unlinked (open handles keep reading what they had;
//! a replaced directory's whole live subtree is unlinked and counted out of the
//! session's usage) and the target entry is inserted under fresh inode numbers, so
//! the kernel never sees an inode number change meaning.
//!
//! Hard links: every target entry naming link-table record `X` becomes a reference
//! to *one* live inode — the live link inode `X` itself when its record equals the
//! target's (then references already in place are left alone), else one fresh link
//! inode made at the first reference. A hard link is never split into copies and
//! never merged with another file. Link counts follow the references: an added
//! reference counts at once, a removed one at the end of the graft (also after an
//! error), so a link inode that is moved from one name to another is never dropped
//! halfway.
//!
//! Every change to the table pushes its kernel invalidations at once ([`Inval`],
//! re-exported by `snapshot`, whose root swaps send them), so an error midway
//! leaves nothing changed and uninvalidated.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::inode::{Data, Inode, State};
use crate::diff::Tree;
use crate::error::{Result, posix};
use crate::store::ObjectStore;
use crate::tree::{Content, Entry, Kind, Record, Timespec};

/// A kernel cache invalidation to send after a graft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inval {
    /// Forget the dentry `name` in directory `parent`.
    Entry(u64, Vec<u8>),
    /// Forget the attributes (and pages) of an inode.
    Inode(u64),
}

/// Graft `t` into `st`: the whole tree (`paths` None) or each of `paths`.
/// `skip`: equal directory ids on both sides stand for equal subtrees.
pub(super) fn graft(
    st: &mut State,
    store: &dyn ObjectStore,
    t: &Tree,
    skip: bool,
    paths: Option<&[Vec<u8>]>,
    inval: &mut Vec<Inval>,
) -> Result<()> {
    let mut g = Graft {
        st,
        store,
        t,
        skip,
        inval,
        linked: HashMap::new(),
        unref: HashMap::new(),
        net: HashMap::new(),
        fresh_links: HashSet::new(),
    };
    let r = match paths {
        None => g.run(Task::Dir(1, t.root.root.clone())),
        Some(paths) => paths.iter().try_for_each(|p| g.path(p)),
    };
    g.settle_links();
    r
}

fn live_record(i: &Inode, ino: u64) -> Option<Record> {
    Some(i.record(ino, i.clean_content()?))
}

fn target_dir(store: &dyn ObjectStore, r: &Record) -> Result<std::sync::Arc<crate::tree::DirNode>> {
    crate::dirs::load_dir(
        store,
        match r.content {
            Content::Node(id) => Some(id),
            _ => None,
        },
    )
}

/// A target entry: its record, and whether it is a reference to the link-table
/// record `r.ino` (a hard link) rather than a record of its own.
#[derive(Clone)]
struct Want {
    r: Record,
    link: bool,
}

/// One step of a graft (see module docs); [`Graft::run`] works a stack of them, so
/// a tree of any depth grafts in constant thread stack.
enum Task {
    /// Make live directory `.0` (kept inode) look like target record `.1`.
    Dir(u64, Record),
    /// After a `Dir`'s entries: take the target directory's attributes.
    Finish(u64, Record),
    /// Make entry `name` of live directory `parent` equal the target (None: absent).
    Entry(u64, Vec<u8>, Option<Want>),
    /// Insert the target entry as `name` in `parent` under fresh inode numbers (or
    /// as a reference to the live inode of its hard link).
    Fresh(u64, Vec<u8>, Want),
}

/// A graft in progress.
struct Graft<'a> {
    st: &'a mut State,
    store: &'a dyn ObjectStore,
    t: &'a Tree,
    skip: bool,
    inval: &'a mut Vec<Inval>,
    /// Target link ino → the live inode its references name.
    linked: HashMap<u64, u64>,
    /// Live link inode → references removed (their counts drop at the end).
    unref: HashMap<u64, u32>,
    /// Live link inode → references added minus removed.
    net: HashMap<u64, i64>,
    /// Link inodes this graft made.
    fresh_links: HashSet<u64>,
}

impl Graft<'_> {
    fn want(&self, e: &Entry) -> Option<Want> {
        let link = matches!(e, Entry::HardLink { .. });
        self.t.resolve(e).map(|r| Want { r, link })
    }

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
                    // Every entry was made equal to the target's: the directory
                    // equals the target node in content.
                    if let (Data::Dir(d), Content::Node(id)) =
                        (&mut self.st.get_mut(dir)?.data, &r.content)
                    {
                        d.like = Some(*id);
                    }
                    self.inval.push(Inval::Inode(dir));
                }
                Task::Entry(parent, name, target) => {
                    self.entry(parent, &name, target, &mut stack)?
                }
                Task::Fresh(parent, name, w) => self.fresh(parent, &name, w, &mut stack)?,
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
            return Err(crate::error::Error::Invalid(format!(
                "path {:?} must stay inside the workspace (no '..')",
                String::from_utf8_lossy(path)
            )));
        }
        if comps.is_empty() {
            return self.run(Task::Dir(1, self.t.root.root.clone()));
        }
        let mut live_dir = 1u64;
        let mut target: Option<Record> = Some(self.t.root.root.clone());
        for (n, comp) in comps.iter().enumerate() {
            let tdir = match &target {
                Some(r) if r.kind == Kind::Dir => Some(target_dir(self.store, r)?),
                _ => None,
            };
            let tchild = tdir
                .as_ref()
                .and_then(|d| d.entries.iter().find(|(name, _)| name == comp))
                .and_then(|(_, e)| self.want(e));
            let st = &mut *self.st;
            let mut live = st.child(self.store, live_dir, comp)?;
            let last = n + 1 == comps.len();
            // A missing parent of the restored path is recreated empty (with the
            // target's attributes): restoring `a/b/c` must not bring back `a/x`.
            if !last
                && live.is_none()
                && let Some(w) = tchild.as_ref().filter(|w| w.r.kind == Kind::Dir)
            {
                live = Some(insert_empty_dir(st, live_dir, comp, &w.r)?);
                self.inval.push(Inval::Entry(live_dir, comp.to_vec()));
                self.inval.push(Inval::Inode(live_dir));
            }
            let both_dirs = matches!((&tchild, live), (Some(w), Some(l)) if w.r.kind == Kind::Dir && st.get(l)?.kind == Kind::Dir);
            if last || !both_dirs {
                return self.run(Task::Entry(live_dir, comp.to_vec(), tchild));
            }
            live_dir = live.unwrap();
            target = tchild.map(|w| w.r);
        }
        Ok(())
    }

    fn entry(
        &mut self,
        parent: u64,
        name: &[u8],
        target: Option<Want>,
        stack: &mut Vec<Task>,
    ) -> Result<()> {
        let live = self.st.child(self.store, parent, name)?;
        match (live, target) {
            (None, None) => {}
            (Some(l), None) => self.unlink(parent, name, l)?,
            (None, Some(w)) => stack.push(Task::Fresh(parent, name.to_vec(), w)),
            (Some(l), Some(w)) => {
                let i = self.st.get(l)?;
                let (kind, hardlink) = (i.kind, i.hardlink);
                if hardlink || w.link {
                    // A reference to a link inode stays only where it already names
                    // the live inode of the target's link.
                    if hardlink && w.link && self.reuses(l, &w.r) {
                        return Ok(());
                    }
                } else if live_record(i, l).as_ref() == Some(&w.r)
                    && (self.skip || kind != Kind::Dir)
                {
                    return Ok(());
                } else if kind == Kind::Dir && w.r.kind == Kind::Dir {
                    stack.push(Task::Dir(l, w.r));
                    return Ok(());
                }
                self.unlink(parent, name, l)?;
                stack.push(Task::Fresh(parent, name.to_vec(), w));
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
            Data::Dir(d) => d.equals(),
            _ => None,
        };
        let (mut names, tdir): Names = match (live_id, &r.content) {
            // The live directory equals node `l` (exactly, or in content): only
            // entries outside the shards both sides share can differ, and of those
            // only entries that differ from the target's.
            (Some(l), Content::Node(tid)) if self.skip => {
                let (live, target) = crate::dirs::load_differing(store, l, *tid)?;
                differing(&live.entries, &target.entries)
            }
            // The live directory is not encoded (e.g. right after a checkout) but
            // some of its shards still equal stored leaves: skip those the target
            // shares.
            (None, Content::Node(tid)) if self.skip => match shared_leaves(st, store, dir, *tid)? {
                Some(x) => x,
                None => (
                    st.entries_mut(dir)?.keys().cloned().collect(),
                    target_dir(store, &r)?.entries.iter().cloned().collect(),
                ),
            },
            _ => (
                st.entries_mut(dir)?.keys().cloned().collect(),
                target_dir(store, &r)?.entries.iter().cloned().collect(),
            ),
        };
        names.extend(tdir.keys().cloned());
        stack.push(Task::Finish(dir, r));
        // Reversed: entries are grafted in name order.
        for name in names.into_iter().rev() {
            let tchild = tdir.get(&name).and_then(|e| self.want(e));
            stack.push(Task::Entry(dir, name, tchild));
        }
        Ok(())
    }

    /// Insert target entry `w` as `name` in `parent`: a hard link as a reference to
    /// its live link inode, anything else under a fresh inode number (a directory's
    /// entries are queued).
    fn fresh(&mut self, parent: u64, name: &[u8], w: Want, stack: &mut Vec<Task>) -> Result<()> {
        if w.link {
            if self.st.child(self.store, parent, name)?.is_some() {
                return posix(libc::EEXIST);
            }
            let ino = self.link_inode(&w.r)?;
            self.st.insert_entry(parent, name.to_vec(), ino)?;
            self.st.get_mut(ino)?.attr.nlink += 1;
            *self.net.entry(ino).or_default() += 1;
            self.st.mark_dir_changed(parent);
            self.st.mark_dirty(ino);
            self.inval.push(Inval::Inode(ino));
            self.changed(parent, name);
            return Ok(());
        }
        let ino = insert_fresh(self.st, self.store, parent, name, &w.r)?;
        self.changed(parent, name);
        if w.r.kind == Kind::Dir {
            let dir = target_dir(self.store, &w.r)?;
            for (cname, e) in dir.entries.iter().rev() {
                if let Some(cw) = self.want(e) {
                    stack.push(Task::Fresh(ino, cname.clone(), cw));
                }
            }
        }
        Ok(())
    }

    /// Whether the live link inode numbered like target link record `r` equals it.
    /// Its link count is still the one from before the graft: counts only rise
    /// once [`link_inode`](Self::link_inode) has chosen an inode, and removed
    /// references count at the end.
    fn live_link_equals(&self, r: &Record) -> bool {
        let ino = r.ino;
        if !self.st.links.contains(&ino) {
            return false;
        }
        match self.st.inodes.get(&ino) {
            Some(i) => i.hardlink && live_record(i, ino).as_ref() == Some(r),
            None => self.st.link_records.get(&ino) == Some(r),
        }
    }

    /// Whether the live reference to link inode `l` may stay as the target's
    /// reference to link record `r`.
    fn reuses(&mut self, l: u64, r: &Record) -> bool {
        match self.linked.get(&r.ino) {
            Some(&x) => x == l,
            None if l == r.ino && self.live_link_equals(r) => {
                self.linked.insert(r.ino, l);
                true
            }
            None => false,
        }
    }

    /// The live inode the target's references to link record `r` name: the live
    /// link inode when it equals `r`, else a new link inode (no references yet).
    fn link_inode(&mut self, r: &Record) -> Result<u64> {
        if let Some(&x) = self.linked.get(&r.ino) {
            return Ok(x);
        }
        let ino = if self.live_link_equals(r) {
            if !self.st.inodes.contains_key(&r.ino) {
                let rec = self.st.link_records.remove(&r.ino).expect("link record");
                self.st
                    .inodes
                    .insert(r.ino, Inode::from_record(&rec, 0, true));
            }
            r.ino
        } else {
            let st = &mut *self.st;
            let ino = st.alloc_ino();
            let mut inode = Inode::from_record(r, 0, true);
            inode.attr.nlink = 0;
            inode.dirty = true;
            if r.kind == Kind::File {
                st.total_bytes += r.attr.size as i64;
            }
            st.total_inodes += 1;
            st.link_bytes += inode.record_bound();
            st.inodes.insert(ino, inode);
            st.links.insert(ino);
            st.links_dirty = true;
            self.fresh_links.insert(ino);
            ino
        };
        self.linked.insert(r.ino, ino);
        Ok(ino)
    }

    /// Remove entry `name` (live inode `ino`) from `parent`: a link reference is
    /// counted out at the end; a directory takes its whole live subtree with it.
    fn unlink(&mut self, parent: u64, name: &[u8], ino: u64) -> Result<()> {
        let st = &mut *self.st;
        st.remove_entry(parent, name)?;
        let (kind, hardlink) = {
            let i = st.get(ino)?;
            (i.kind, i.hardlink)
        };
        if kind == Kind::Dir {
            st.get_mut(parent)?.attr.nlink -= 1;
        }
        st.mark_dir_changed(parent);
        self.changed(parent, name);
        if hardlink {
            self.unref_link(ino);
            return Ok(());
        }
        if kind != Kind::Dir {
            super::posix::drop_link(self.st, ino, Timespec::now());
            self.replaced(ino);
            return Ok(());
        }
        self.drop_tree(ino)
    }

    /// `ino` left the tree: if the kernel may still reach it (it is live), record
    /// it as replaced (see `State::replaced`).
    fn replaced(&mut self, ino: u64) {
        if self.st.inodes.get(&ino).is_some_and(|i| i.attr.nlink == 0) {
            self.st.replaced.insert(ino);
        }
    }

    fn unref_link(&mut self, ino: u64) {
        *self.unref.entry(ino).or_default() += 1;
        *self.net.entry(ino).or_default() -= 1;
    }

    /// Unlink everything in the removed directory `top` and `top` itself: live
    /// inodes get link count 0 (open handles keep them), stored-only entries are
    /// counted out of the usage, link references are counted out at the end.
    fn drop_tree(&mut self, top: u64) -> Result<()> {
        enum Item {
            Live(u64),
            Stored(Record),
        }
        let now = Timespec::now();
        let mut stack = vec![Item::Live(top)];
        while let Some(item) = stack.pop() {
            let dir = match item {
                Item::Live(ino) => {
                    let (children, dir) = match &self.st.get(ino)?.data {
                        Data::Dir(d) => match &d.entries {
                            Some(e) => (e.values().copied().collect(), None),
                            None => (Vec::new(), d.stored),
                        },
                        _ => (Vec::new(), None),
                    };
                    for child in children {
                        match self.st.inodes.get(&child) {
                            Some(c) if c.hardlink => self.unref_link(child),
                            Some(_) => stack.push(Item::Live(child)),
                            None => {}
                        }
                    }
                    super::posix::drop_link(self.st, ino, now);
                    self.replaced(ino);
                    dir
                }
                Item::Stored(r) => {
                    self.st.total_inodes -= 1;
                    if r.kind == Kind::File {
                        self.st.total_bytes -= r.attr.size as i64;
                    }
                    match (r.kind, r.content) {
                        (Kind::Dir, Content::Node(id)) => Some(id),
                        _ => None,
                    }
                }
            };
            // An unloaded directory: its entries are read from the store.
            let Some(id) = dir else { continue };
            for (_, e) in &crate::dirs::load_dir(self.store, Some(id))?.entries {
                match e {
                    Entry::HardLink { ino, .. } => self.unref_link(*ino),
                    Entry::Inline(r) => match self.st.inodes.get(&r.ino) {
                        Some(c) if !c.hardlink => stack.push(Item::Live(r.ino)),
                        _ => stack.push(Item::Stored(r.clone())),
                    },
                }
            }
        }
        Ok(())
    }

    /// Apply the link counts of removed references (see module docs); a link inode
    /// left without references is unlinked.
    fn settle_links(&mut self) {
        let now = Timespec::now();
        let touched: BTreeSet<u64> = self.net.keys().copied().collect();
        for ino in touched {
            let removed = self.unref.get(&ino).copied().unwrap_or(0);
            let net = self.net[&ino];
            if !self.st.inodes.contains_key(&ino) {
                // Referenced only from unloaded directories: materialize it.
                let Some(rec) = self.st.link_records.remove(&ino) else {
                    continue;
                };
                self.st
                    .inodes
                    .insert(ino, Inode::from_record(&rec, 0, true));
            }
            let i = self.st.inodes.get_mut(&ino).expect("link inode");
            i.attr.nlink = i.attr.nlink.saturating_sub(removed);
            if net != 0 && !self.fresh_links.contains(&ino) {
                i.attr.ctime = now;
            }
            let (nlink, bytes) = (i.attr.nlink, (i.kind == Kind::File).then_some(i.attr.size));
            let bound = i.record_bound();
            if nlink > 0 {
                self.st.mark_dirty(ino);
            } else {
                // The last reference is gone: as `drop_link` does.
                i.parent = 0;
                self.st.total_bytes -= bytes.unwrap_or(0) as i64;
                self.st.total_inodes -= 1;
                self.st.link_bytes = self.st.link_bytes.saturating_sub(bound);
                self.st.links.remove(&ino);
                self.st.links_dirty = true;
                self.st.changed = true;
                self.st.replaced.insert(ino);
                self.st.maybe_reap(ino);
            }
            self.inval.push(Inval::Inode(ino));
        }
    }
}

type Names = (BTreeSet<Vec<u8>>, BTreeMap<Vec<u8>, Entry>);

/// Of two entry lists sorted by name (a directory the live one equals, and the
/// target), the names that differ and the target's entries for them: an entry
/// equal on both sides is left alone.
fn differing(live: &[(Vec<u8>, Entry)], target: &[(Vec<u8>, Entry)]) -> Names {
    use std::cmp::Ordering;
    let (mut names, mut want) = (BTreeSet::new(), BTreeMap::new());
    let (mut i, mut j) = (0, 0);
    loop {
        let ord = match (live.get(i), target.get(j)) {
            (Some((a, _)), Some((b, _))) => a.cmp(b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => break,
        };
        match ord {
            Ordering::Less => {
                names.insert(live[i].0.clone());
                i += 1;
            }
            Ordering::Greater => {
                want.insert(target[j].0.clone(), target[j].1.clone());
                j += 1;
            }
            Ordering::Equal => {
                if live[i].1 != target[j].1 {
                    names.insert(live[i].0.clone());
                    want.insert(target[j].0.clone(), target[j].1.clone());
                }
                i += 1;
                j += 1;
            }
        }
    }
    (names, want)
}

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
    let tset: HashSet<_> = tids.iter().copied().collect();
    let mut matched = HashSet::new();
    let mut same: HashSet<&[u8]> = HashSet::new();
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
    inode.data = Data::Dir(super::inode::Dir::empty());
    inode.attr.nlink = 2;
    st.inodes.insert(ino, inode);
    st.insert_entry(parent, name.to_vec(), ino)?;
    st.get_mut(parent)?.attr.nlink += 1;
    st.total_inodes += 1;
    st.mark_dir_changed(parent);
    st.mark_dir_changed(ino);
    Ok(ino)
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
        inode.data = Data::Dir(super::inode::Dir::empty());
        inode.attr.nlink = 2;
    }
    if r.kind == Kind::File {
        st.total_bytes += r.attr.size as i64;
    }
    st.total_inodes += 1;
    st.inodes.insert(ino, inode);
    st.insert_entry(parent, name.to_vec(), ino)?;
    if is_dir {
        st.get_mut(parent)?.attr.nlink += 1;
    }
    st.mark_dir_changed(parent);
    st.mark_dirty(ino);
    Ok(ino)
}
