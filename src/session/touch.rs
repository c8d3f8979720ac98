//! Touched-file collection: the paths a mounted session's FUSE requests write,
//! create, rename (both names) or delete, gathered in memory as they happen and
//! written with the session's next flush (`crate::lifecycle::touched` keys, in the
//! flush's own commit).
//!
//! Owns: the pending set (paths already known, and inodes written whose path is
//! resolved at the flush), and a cache of directory paths.
//!
//! Invariants:
//! - A request notes what it touches *before* it changes the table, and a flush
//!   takes the pending set only after its new root is published: every change a
//!   flush makes durable has its path in the same commit (a noted request that then
//!   fails only adds a path that did not change; harmless for promote).
//! - The hot path (`write`, `setattr`, xattrs) costs one uncontended mutex and a
//!   hash insert ([`Session::touch_ino`]); a name change resolves its parent's path
//!   under the table lock through the cache (cleared by any directory rename or
//!   removal).
//! - A directory rename records every path below it under both names (the subtree
//!   is walked at the rename, loading directories as needed), so `touched::list`
//!   callers never need to expand directories.
//! - Paths under `.git/` are never kept (`touched::counts`); a path longer than
//!   `touched::PATH_MAX` is kept as its bounded ancestor (`touched::bounded`).
//! - `stored` holds only paths a commit of this session made durable in its set
//!   (`t/` keys). The set only grows while the session is mounted (it is deleted
//!   only with the session, `lifecycle::delete_ops`, never while mounted), so a
//!   path found there is not put again: an unlink, or a rename's old name, costs
//!   the flush no metadata write. Bounded by [`STORED_MAX_BYTES`] (cleared
//!   beyond: then paths are just put again).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

use super::inode::{Data, State};
use super::{Session, relock};
use crate::lifecycle::touched::{bounded, counts};
use crate::store::ObjectStore;
use crate::tree::Kind;

/// Directory paths kept in the cache at most (it is cleared beyond).
const DIR_CACHE_MAX: usize = 65_536;
/// Bytes of directory paths kept in the cache at most (it is cleared beyond): a
/// chain of deep directories must not make it quadratic.
const DIR_CACHE_MAX_BYTES: usize = 16 << 20;
/// Bytes of paths kept in `stored` at most (it is cleared beyond).
const STORED_MAX_BYTES: usize = 8 << 20;

/// Touched paths not yet written.
#[derive(Default)]
pub struct Pending {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    paths: BTreeSet<Vec<u8>>,
    inos: HashSet<u64>,
    dirs: DirCache,
    /// Paths durable in the session's touched set (see the module invariants).
    stored: HashSet<Vec<u8>>,
    /// Bytes of the paths in `stored`.
    stored_bytes: usize,
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        return name.to_vec();
    }
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    p.extend_from_slice(dir);
    p.push(b'/');
    p.extend_from_slice(name);
    p
}

/// The name of `ino` in directory `parent` (scanning its entries).
fn name_in(st: &mut State, store: &dyn ObjectStore, parent: u64, ino: u64) -> Option<Vec<u8>> {
    st.load_dir(store, parent).ok()?;
    match &st.inodes.get(&parent)?.data {
        Data::Dir(d) => d
            .entries
            .as_ref()?
            .iter()
            .find(|(_, v)| **v == ino)
            .map(|(k, _)| k.clone()),
        _ => None,
    }
}

/// Directory paths by inode, bounded in count and bytes.
#[derive(Default)]
struct DirCache {
    map: HashMap<u64, Vec<u8>>,
    bytes: usize,
}

impl DirCache {
    fn clear(&mut self) {
        self.map.clear();
        self.bytes = 0;
    }

    fn insert(&mut self, ino: u64, p: &[u8]) {
        if self.map.len() >= DIR_CACHE_MAX || self.bytes + p.len() > DIR_CACHE_MAX_BYTES {
            self.clear();
        }
        self.bytes += p.len();
        if let Some(old) = self.map.insert(ino, p.to_vec()) {
            self.bytes -= old.len();
        }
    }
}

/// The workspace path of directory `ino` (empty for the root), cached. Walks up
/// to the root or a cached ancestor without recursing (an agent sets the depth).
fn dir_path(
    st: &mut State,
    store: &dyn ObjectStore,
    cache: &mut DirCache,
    ino: u64,
) -> Option<Vec<u8>> {
    let mut names = Vec::new();
    let mut at = ino;
    let mut p = loop {
        if at == 1 {
            break Vec::new();
        }
        if let Some(p) = cache.map.get(&at) {
            break p.clone();
        }
        let parent = st.inodes.get(&at)?.parent;
        if parent == 0 {
            return None;
        }
        names.push(name_in(st, store, parent, at)?);
        at = parent;
    };
    for name in names.iter().rev() {
        p = join(&p, name);
    }
    if ino != 1 {
        cache.insert(ino, &p);
    }
    Some(p)
}

/// Every path below directory `ino` (relative to it), loading directories.
fn subtree(st: &mut State, store: &dyn ObjectStore, ino: u64, out: &mut Vec<Vec<u8>>) {
    let mut stack = vec![(ino, Vec::new())];
    while let Some((dir, prefix)) = stack.pop() {
        if st.load_dir(store, dir).is_err() {
            continue;
        }
        let kids: Vec<(Vec<u8>, u64)> = match &st.inodes.get(&dir).map(|i| &i.data) {
            Some(Data::Dir(d)) => d
                .entries
                .as_ref()
                .map(|e| e.iter().map(|(k, v)| (k.clone(), *v)).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        for (name, child) in kids {
            let p = join(&prefix, &name);
            if st.inodes.get(&child).is_some_and(|i| i.kind == Kind::Dir) {
                stack.push((child, p.clone()));
            }
            out.push(p);
        }
    }
}

impl Session {
    /// Note that `ino`'s content or attributes are about to change (its path is
    /// resolved at the next flush).
    pub fn touch_ino(&self, ino: u64) {
        relock(self.touch.inner.lock()).inos.insert(ino);
    }

    /// Note that `name` in directory `parent` is about to be created or removed.
    pub fn touch_name(&self, parent: u64, name: &[u8]) {
        let mut st = self.lock();
        let store = self.store().clone();
        let mut g = relock(self.touch.inner.lock());
        let Some(dir) = dir_path(&mut st, &*store, &mut g.dirs, parent) else {
            return;
        };
        let p = join(&dir, name);
        if counts(&p) {
            g.paths.insert(bounded(&p).to_vec());
        }
        if st
            .child(&*store, parent, name)
            .ok()
            .flatten()
            .and_then(|i| st.inodes.get(&i))
            .is_some_and(|i| i.kind == Kind::Dir)
        {
            // rmdir (or a failed mkdir over a directory): cached paths may go stale.
            g.dirs.clear();
        }
    }

    /// Note a rename: both names, and for a directory every path below it under
    /// both names (for an exchange, below either).
    pub fn touch_rename(&self, parent: u64, name: &[u8], newparent: u64, newname: &[u8]) {
        let mut st = self.lock();
        let store = self.store().clone();
        let mut g = relock(self.touch.inner.lock());
        let (Some(a), Some(b)) = (
            dir_path(&mut st, &*store, &mut g.dirs, parent),
            dir_path(&mut st, &*store, &mut g.dirs, newparent),
        ) else {
            return;
        };
        let (a, b) = (join(&a, name), join(&b, newname));
        let mut below = Vec::new();
        let mut any_dir = false;
        for (dir, nm) in [(parent, name), (newparent, newname)] {
            if let Some(ino) = st.child(&*store, dir, nm).ok().flatten()
                && st.inodes.get(&ino).is_some_and(|i| i.kind == Kind::Dir)
            {
                any_dir = true;
                subtree(&mut st, &*store, ino, &mut below);
            }
        }
        if any_dir {
            g.dirs.clear();
        }
        for top in [&a, &b] {
            for rel in &below {
                let p = join(top, rel);
                if counts(&p) {
                    g.paths.insert(bounded(&p).to_vec());
                }
            }
            if counts(top) {
                g.paths.insert(bounded(top).to_vec());
            }
        }
    }

    /// Take the pending paths (resolving noted inodes through the table), for the
    /// flush committing the state that holds their changes. Called under the table
    /// lock (`st`).
    pub(crate) fn take_touched(&self, st: &mut State) -> BTreeSet<Vec<u8>> {
        let store = self.store().clone();
        let mut g = relock(self.touch.inner.lock());
        let inos = std::mem::take(&mut g.inos);
        let mut paths = std::mem::take(&mut g.paths);
        if !g.stored.is_empty() {
            paths.retain(|p| !g.stored.contains(p));
        }
        // Group by parent: one scan of each directory's entries.
        let mut by_parent: HashMap<u64, HashSet<u64>> = HashMap::new();
        for ino in inos {
            match st.inodes.get(&ino) {
                Some(i) if i.hardlink => {
                    // Every name of a hard-linked file in a loaded directory: the
                    // link index has its directories (`super::link_index`).
                    for d in st.link_dirs_of(ino) {
                        by_parent.entry(d).or_default().insert(ino);
                    }
                }
                Some(i) if i.parent != 0 => {
                    by_parent.entry(i.parent).or_default().insert(ino);
                }
                _ => {}
            }
        }
        for (parent, kids) in by_parent {
            let Some(dir) = dir_path(st, &*store, &mut g.dirs, parent) else {
                continue;
            };
            if st.load_dir(&*store, parent).is_err() {
                continue;
            }
            if let Some(Data::Dir(d)) = st.inodes.get(&parent).map(|i| &i.data)
                && let Some(e) = &d.entries
            {
                for (name, v) in e.iter() {
                    if kids.contains(v) {
                        let p = join(&dir, name);
                        let p = bounded(&p);
                        if counts(p) && !g.stored.contains(p) {
                            paths.insert(p.to_vec());
                        }
                    }
                }
            }
        }
        paths
    }

    /// `paths` (taken by [`Self::take_touched`]) are durable now: a commit adding
    /// them to the session's touched set returned. Later flushes do not put them
    /// again.
    pub(crate) fn touched_durable(&self, paths: &BTreeSet<Vec<u8>>) {
        let mut g = relock(self.touch.inner.lock());
        for p in paths {
            if g.stored_bytes + p.len() > STORED_MAX_BYTES {
                g.stored.clear();
                g.stored_bytes = 0;
            }
            if !g.stored.contains(p) {
                g.stored_bytes += p.len();
                g.stored.insert(p.clone());
            }
        }
    }

    /// Give back paths a failed flush took.
    pub(crate) fn untake_touched(&self, paths: BTreeSet<Vec<u8>>) {
        relock(self.touch.inner.lock()).paths.extend(paths);
    }

    /// Note an access (a FUSE request or an op): one relaxed increment.
    #[inline]
    pub fn note_access(&self) {
        self.accesses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Accesses so far (compared between two looks: changed means accessed).
    pub fn accesses(&self) -> u64 {
        self.accesses.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether touched paths wait for a flush (tests, idle flushes).
    pub fn touched_pending(&self) -> bool {
        let g = relock(self.touch.inner.lock());
        !g.paths.is_empty() || !g.inos.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use crate::session::posix::NewNode;
    use crate::session::{Session, create_record, empty_root};
    use crate::store::{MemStore, ObjectStore};

    /// A path a returned commit made durable is not taken again (an unlink of a
    /// file created before the last flush puts nothing); other paths still are,
    /// and the stored set ends up the same.
    #[test]
    fn durable_paths_are_not_put_again() {
        let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
        let root = empty_root(&*store, 0, 0).unwrap();
        let rec = create_record(&*store, "t", root, 0, 1).unwrap();
        let s = Session::open(store, rec).unwrap();
        s.touch_name(1, b"a");
        s.create_node(1, b"a", NewNode::File, 0o644, 0, 0).unwrap();
        s.flush().unwrap();
        s.touch_name(1, b"a");
        s.remove(1, b"a", false).unwrap();
        s.touch_name(1, b"b");
        s.create_node(1, b"b", NewNode::File, 0o644, 0, 0).unwrap();
        let taken = s.take_touched(&mut s.lock());
        assert_eq!(taken, BTreeSet::from([b"b".to_vec()]));
        s.untake_touched(taken);
        s.flush().unwrap();
        assert_eq!(
            crate::lifecycle::touched::list(&**s.store(), "t").unwrap(),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
    }
}
