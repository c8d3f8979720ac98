//! The live inode table of a mounted session.
//!
//! Owns: [`Inode`] (one live inode: attributes, xattrs, content state, tree links,
//! kernel reference counts) and [`State`] (the table plus allocation counters).
//!
//! Invariants:
//! - a directory's `entries` (once loaded) map names to inos present in `inodes`;
//! - `parent` is the containing directory for single-linked inodes, 0 for the root,
//!   hard-linked inodes (their record lives in the link table) and orphans;
//! - if an inode is `dirty` and reachable through `parent`, every ancestor is dirty
//!   and has `stored == None` (so a flush walks only dirty paths);
//! - a content id (`Dir::stored`, `FileData::stored`) is `Some` only when it names
//!   exactly the current content; so does each cached block-map leaf
//!   (`FileData::leaves`) for the blocks of its span;
//! - a directory's `entries` are `None` (unloaded) only with a `stored` id, and then
//!   no live inode has it as `parent`;
//! - `State::link_bytes` is the sum of [`Inode::record_bound`] (or
//!   [`record_bound_of`] for unloaded records) over the link table `links`;
//! - an inode leaves the table only when unlinked and forgotten (`nlink == 0 &&
//!   lookups == 0`), or when evicted with its directory's entries
//!   ([`super::evict`]: forgotten, clean, its record exactly as stored); an inode
//!   number is never reused, and an evicted inode comes back with its stored one;
//! - while `FileData::dirty_leaves` is `Some`, every leaf span holding blocks is in
//!   `leaves` or in `dirty_leaves` (outside a flush's encode step, which holds the
//!   leaves it writes until it publishes or abandons them).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::id::{ChunkId, NodeId};
use crate::tree::{Attr, BLOCK_SIZE, Content, Kind, LEAF_BLOCKS, Record, Timespec, leaf_of};

/// One block of a live file.
#[derive(Clone, Debug)]
pub enum Block {
    /// Sealed into the store.
    Stored(ChunkId),
    /// In memory (written since the last seal, or loaded from an inline node).
    /// May be shorter than the block; missing bytes read as zeros.
    Mem(Arc<Vec<u8>>),
}

/// Content state of a live regular file.
#[derive(Debug, Default)]
pub struct FileData {
    /// File node naming exactly the current content; `None` once modified (or empty).
    pub stored: Option<NodeId>,
    /// Blocks by index; `None` until loaded from `stored`.
    pub blocks: Option<BTreeMap<u64, Block>>,
    /// The last stored node of this file before it was modified: a hint for the
    /// store to keep the new version as a delta of the old ([`crate::store::ObjectStore::put_based`]).
    /// Never needed for correctness.
    pub base: Option<NodeId>,
    /// Block-map leaves ([`crate::tree::BlockLeaf`]) that name exactly the current
    /// blocks of their span, by leaf number: a flush reuses them by id.
    pub leaves: BTreeMap<u64, NodeId>,
    /// Leaves changed since `leaves` was brought up to date. `Some` only while every
    /// leaf holding blocks is in `leaves` or here (so a flush encodes just these);
    /// `None`: untracked, a flush derives the leaves from `blocks`.
    pub dirty_leaves: Option<BTreeSet<u64>>,
    /// Accessed since the last flush looked (see [`State::maps`]).
    pub used: bool,
}

impl FileData {
    /// A file whose content is `stored` (not loaded), or empty.
    pub fn new(stored: Option<NodeId>) -> FileData {
        FileData {
            stored,
            blocks: stored.is_none().then(BTreeMap::new),
            ..FileData::default()
        }
    }

    /// The content changed: `stored` no longer names it (and becomes the delta base).
    pub fn unstore(&mut self) {
        if let Some(s) = self.stored.take() {
            self.base = Some(s);
        }
    }

    /// Blocks `first..=last` are about to change: their leaves are no longer clean.
    /// Every change to `blocks` goes through here (or [`Self::cut`]).
    pub fn touch(&mut self, first: u64, last: u64) {
        for k in leaf_of(first)..=leaf_of(last) {
            self.leaves.remove(&k);
            if let Some(d) = &mut self.dirty_leaves {
                d.insert(k);
            }
        }
    }

    /// Drop every block from index `from` on (truncate); returns how many.
    pub fn cut(&mut self, from: u64) -> usize {
        let Some(blocks) = self.blocks.as_mut() else {
            return 0;
        };
        let gone = blocks.split_off(&from);
        let mut touched: BTreeSet<u64> = gone.keys().map(|&i| leaf_of(i)).collect();
        touched.extend(self.leaves.range(leaf_of(from)..).map(|(k, _)| *k));
        touched.insert(leaf_of(from));
        for k in touched {
            self.touch(k * LEAF_BLOCKS, k * LEAF_BLOCKS);
        }
        gone.len()
    }

    /// Drop the loaded block map of a clean file (it reloads from `stored`).
    /// Returns whether it did: only when `stored` names the content.
    pub fn unload(&mut self) -> bool {
        let clean = self.stored.is_some() && self.blocks.is_some();
        if clean {
            self.blocks = None;
            self.leaves.clear();
            self.dirty_leaves = None;
        }
        clean
    }
}

/// A loaded directory's entries (name → ino) and, once the directory has been
/// listed, its readdir cookies.
///
/// Cookies make listings stateless (no OPENDIR/RELEASEDIR; the kernel resumes a
/// listing with the cookie of the last entry it got): each name gets a sequence
/// number when it enters the directory, a listing walks names in sequence order,
/// and a cookie is "everything after this number". So an entry that stays put is
/// returned exactly once however the directory changes meanwhile; a name inserted
/// (or replaced) during a listing gets a larger number and may or may not be
/// returned, as POSIX allows. Reads go through `Deref` to the map; every change goes
/// through [`insert`](Self::insert) / [`remove`](Self::remove), which keep the
/// cookies in step.
#[derive(Debug, Default)]
pub struct Entries {
    map: BTreeMap<Vec<u8>, u64>,
    cookies: Option<Cookies>,
}

#[derive(Debug, Default)]
struct Cookies {
    by_seq: BTreeMap<u64, Vec<u8>>,
    seq_of: HashMap<Vec<u8>, u64>,
    next: u64,
    /// Numbered in name order and unchanged since: a directory reloaded from a
    /// node with the same names numbers them the same way.
    pristine: bool,
}

impl Cookies {
    fn add(&mut self, name: Vec<u8>) {
        let s = self.next;
        self.next += 1;
        self.by_seq.insert(s, name.clone());
        self.seq_of.insert(name, s);
    }
    fn drop_name(&mut self, name: &[u8]) {
        if let Some(s) = self.seq_of.remove(name) {
            self.by_seq.remove(&s);
        }
    }
}

impl std::ops::Deref for Entries {
    type Target = BTreeMap<Vec<u8>, u64>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl From<BTreeMap<Vec<u8>, u64>> for Entries {
    fn from(map: BTreeMap<Vec<u8>, u64>) -> Entries {
        Entries { map, cookies: None }
    }
}

impl Entries {
    /// Add or replace `name`. A replaced name whose ino changes gets a new cookie.
    pub fn insert(&mut self, name: Vec<u8>, ino: u64) -> Option<u64> {
        let old = self.map.insert(name.clone(), ino);
        if old != Some(ino)
            && let Some(c) = &mut self.cookies
        {
            c.pristine = false;
            c.drop_name(&name);
            c.add(name);
        }
        old
    }

    /// Remove `name`.
    pub fn remove(&mut self, name: &[u8]) -> Option<u64> {
        let old = self.map.remove(name);
        if old.is_some()
            && let Some(c) = &mut self.cookies
        {
            c.pristine = false;
            c.drop_name(name);
        }
        old
    }

    /// Whether dropping these entries and loading the same names again gives every
    /// name the cookie it has now (no listing yet, or none since a change): then a
    /// listing in progress survives an unload ([`crate::session::evict`]).
    pub fn cookies_stable(&self) -> bool {
        self.cookies.as_ref().is_none_or(|c| c.pristine)
    }

    /// Up to `max` entries whose cookie is greater than `after`, in cookie order:
    /// (cookie, name, ino). Cookies start at `base` (callers reserve smaller
    /// numbers for `.` and `..`).
    pub fn page(&mut self, after: u64, base: u64, max: usize) -> Vec<(u64, Vec<u8>, u64)> {
        let map = &self.map;
        let c = self.cookies.get_or_insert_with(|| {
            let mut c = Cookies::default();
            for name in map.keys() {
                c.add(name.clone());
            }
            c.pristine = true;
            c
        });
        let from = after
            .saturating_sub(base)
            .saturating_add(u64::from(after >= base));
        c.by_seq
            .range(from..)
            .take(max)
            .map(|(s, name)| (s + base, name.clone(), map[name]))
            .collect()
    }
}

/// Content state of a live directory.
#[derive(Debug, Default)]
pub struct Dir {
    /// Dir node naming exactly the current entries and their records.
    pub stored: Option<NodeId>,
    /// Entries by name; `None` until loaded from `stored`.
    pub entries: Option<Entries>,
    /// Leaves of the last encode or load of a sharded directory, by membership
    /// digest ([`crate::tree::ShardDigest`]): a flush reuses a leaf whose digest is
    /// unchanged and whose inline children are all clean.
    pub shards: HashMap<[u8; 32], NodeId>,
    /// The last stored node before the entries changed (a delta-base hint, as
    /// [`FileData::base`]).
    pub base: Option<NodeId>,
    /// A stored node the directory equals in content, inode numbers aside: set
    /// when a graft has made it equal to that node and nothing changed it since
    /// (cleared with `stored`). A later graft compares it shard by shard with its
    /// target, as it does `stored`; it is never encoded.
    pub like: Option<NodeId>,
}

impl Dir {
    /// A new directory: no entries, loaded, not stored.
    pub fn empty() -> Dir {
        Dir {
            stored: None,
            entries: Some(Entries::default()),
            shards: HashMap::new(),
            base: None,
            like: None,
        }
    }

    /// The entries changed: `stored` no longer names them (and becomes the delta
    /// base), nor `like`.
    pub fn unstore(&mut self) {
        self.like = None;
        if let Some(s) = self.stored.take() {
            self.base = Some(s);
        }
    }

    /// The node the directory equals: exactly (`stored`) or in content (`like`).
    pub fn equals(&self) -> Option<NodeId> {
        self.stored.or(self.like)
    }
}

/// Content of a live inode.
#[derive(Debug)]
pub enum Data {
    /// Directory.
    Dir(Dir),
    /// Regular file.
    File(FileData),
    /// Symlink target.
    Symlink(Vec<u8>),
    /// Device, fifo or socket.
    Special,
}

/// A live inode.
#[derive(Debug)]
pub struct Inode {
    /// Kind.
    pub kind: Kind,
    /// Attributes (size, times, mode, ...).
    pub attr: Attr,
    /// Extended attributes.
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Content.
    pub data: Data,
    /// Containing directory (see module invariants).
    pub parent: u64,
    /// Whether the record lives in the hard-link table.
    pub hardlink: bool,
    /// Record must be re-encoded at the next flush.
    pub dirty: bool,
    /// Kernel lookup count.
    pub lookups: u64,
}

/// Bytes an encoded record takes besides its extended attributes and content:
/// kind, ino, perm/uid/gid, size, blocks, nlink, rdev, three timestamps and the
/// xattr count (`tree::put_record`).
const RECORD_FIXED: u64 = 1 + 8 + 3 * 4 + 8 + 8 + 4 + 4 + 3 * 12 + 4;

/// An upper bound of the encoded size of a record whose extended attributes
/// cost `xattr_bytes` ([`super::xattr_cost`], which covers their encoding) and
/// whose content is a symlink target of `symlink` bytes, or a node id.
pub fn record_bound(symlink: Option<usize>, xattr_bytes: usize) -> u64 {
    let content = match symlink {
        Some(n) => 1 + 4 + n as u64,
        None => 1 + 32,
    };
    RECORD_FIXED + xattr_bytes as u64 + content
}

/// The extended attributes' cost ([`super::xattr_cost`] summed).
pub fn xattr_bytes<'a>(x: impl IntoIterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>) -> usize {
    x.into_iter().map(|(k, v)| super::xattr_cost(k, v)).sum()
}

/// [`record_bound`] of a stored record.
pub fn record_bound_of(r: &Record) -> u64 {
    let symlink = match &r.content {
        Content::Bytes(b) => Some(b.len()),
        _ => None,
    };
    record_bound(symlink, xattr_bytes(r.xattrs.iter().map(|(k, v)| (k, v))))
}

impl Inode {
    /// [`record_bound`] of this inode's record.
    pub fn record_bound(&self) -> u64 {
        let symlink = match &self.data {
            Data::Symlink(t) => Some(t.len()),
            _ => None,
        };
        record_bound(symlink, xattr_bytes(&self.xattrs))
    }

    /// A live inode from a stored record (content not loaded).
    pub fn from_record(r: &Record, parent: u64, hardlink: bool) -> Inode {
        let data = match (&r.kind, &r.content) {
            (Kind::Dir, Content::Node(id)) => Data::Dir(Dir {
                stored: Some(*id),
                entries: None,
                shards: HashMap::new(),
                base: None,
                like: None,
            }),
            (Kind::Dir, _) => Data::Dir(Dir::empty()),
            (Kind::File, Content::Node(id)) => Data::File(FileData::new(Some(*id))),
            (Kind::File, _) => Data::File(FileData::new(None)),
            (Kind::Symlink, Content::Bytes(b)) => Data::Symlink(b.clone()),
            (Kind::Symlink, _) => Data::Symlink(Vec::new()),
            _ => Data::Special,
        };
        Inode {
            kind: r.kind,
            attr: r.attr,
            xattrs: r.xattrs.iter().cloned().collect(),
            data,
            parent,
            hardlink,
            dirty: false,
            lookups: 0,
        }
    }

    /// A fresh inode of `kind`.
    pub fn new(kind: Kind, perm: u32, uid: u32, gid: u32, parent: u64) -> Inode {
        let now = Timespec::now();
        let data = match kind {
            Kind::Dir => Data::Dir(Dir::empty()),
            Kind::File => Data::File(FileData::new(None)),
            Kind::Symlink => Data::Symlink(Vec::new()),
            _ => Data::Special,
        };
        Inode {
            kind,
            attr: Attr {
                perm: perm & 0o7777,
                uid,
                gid,
                size: 0,
                blocks: 0,
                nlink: if kind == Kind::Dir { 2 } else { 1 },
                rdev: 0,
                atime: now,
                mtime: now,
                ctime: now,
            },
            xattrs: BTreeMap::new(),
            data,
            parent,
            hardlink: false,
            dirty: true,
            lookups: 0,
        }
    }

    /// The stored record of this inode with the given content reference.
    pub fn record(&self, ino: u64, content: Content) -> Record {
        Record {
            kind: self.kind,
            ino,
            attr: self.attr,
            xattrs: self
                .xattrs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            content,
        }
    }

    /// Whether the record is unchanged since it was last encoded (or loaded).
    pub fn is_clean(&self) -> bool {
        !self.dirty
            && match &self.data {
                Data::Dir(d) => d.stored.is_some(),
                Data::File(f) => f.stored.is_some() || self.attr.size == 0,
                _ => true,
            }
    }

    /// Content reference for the record, valid when the content is clean.
    pub fn clean_content(&self) -> Option<Content> {
        match &self.data {
            Data::Dir(d) => d.stored.map(Content::Node),
            Data::File(f) => match f.stored {
                Some(id) => Some(Content::Node(id)),
                None if self.attr.size == 0 => Some(Content::None),
                None => None,
            },
            Data::Symlink(t) => Some(Content::Bytes(t.clone())),
            Data::Special => Some(Content::None),
        }
    }

    /// Number of 512-byte blocks allocated (holes take none), counted in 4 KiB units.
    pub fn blocks512(&self) -> u64 {
        let size = self.attr.size;
        match &self.data {
            Data::File(FileData {
                blocks: Some(b), ..
            }) => b
                .keys()
                .map(|i| {
                    // Allocation in 4 KiB units, like ext4 (so `du` agrees with it).
                    let len = (size.saturating_sub(i * BLOCK_SIZE)).min(BLOCK_SIZE);
                    len.div_ceil(4096) * 8
                })
                .sum(),
            Data::Dir(_) => 8,
            Data::File(_) => self.attr.blocks,
            _ => 0,
        }
    }
}

/// Eviction bookkeeping of the table: directories to try to unload, and forgets
/// since the last sweep (the sweep is `super::evict`'s).
#[derive(Debug, Default)]
pub struct Pending {
    /// Directories that may have become unloadable.
    pub(super) dirs: HashSet<u64>,
    /// Forgets (last references dropped) since the last sweep.
    pub(super) forgets: u64,
    /// Inodes evicted since the table was last shrunk.
    pub(super) removed: usize,
}

impl Pending {
    /// Make directory `d` a candidate (tests: a directory the kernel holds becomes
    /// one when one of its children is forgotten).
    #[cfg(test)]
    pub(crate) fn note_dir(&mut self, d: u64) {
        self.dirs.insert(d);
    }
}

/// The whole live table of one session.
#[derive(Debug, Default)]
pub struct State {
    /// Live inodes by ino.
    pub inodes: HashMap<u64, Inode>,
    /// Next inode number to hand out.
    pub next_ino: u64,
    /// Inos whose records live in the link table (hard-linked).
    pub links: BTreeSet<u64>,
    /// Link-table records not yet materialized as live inodes.
    pub link_records: HashMap<u64, Record>,
    /// The link index (`super::link_index`): (hard-linked ino, loaded directory)
    /// → how many of the directory's entries name it.
    pub link_dirs: BTreeMap<(u64, u64), u32>,
    /// Link table changed since the last flush.
    pub links_dirty: bool,
    /// Sum of [`Inode::record_bound`] over `links`: a bound of the link table's
    /// encoded size, kept below [`super::LINK_TABLE_MAX`] by `link` and `setxattr`.
    pub link_bytes: u64,
    /// Anything changed since the last flush.
    pub changed: bool,
    /// Files holding unsealed written blocks.
    pub dirty_files: HashSet<u64>,
    /// Root node of the last flush.
    pub root_id: Option<NodeId>,
    /// Logical bytes in regular files (for `sessions`).
    pub total_bytes: i64,
    /// Number of inodes in the tree.
    pub total_inodes: i64,
    /// Mutations since the last checkpoint (auto-checkpoint trigger).
    pub mutations: u64,
    /// Monotonic count of every mutation (never reset): lets a control op detect
    /// writes that slipped in between its save and its graft.
    pub generation: u64,
    /// (generation, target root) at the end of the last whole-tree graft: while the
    /// generation is unchanged the live tree equals that root in content.
    pub graft_mark: Option<(u64, NodeId)>,
    /// Unix ms of the last mutation.
    pub last_mutation_ms: u64,
    /// Inodes a graft (checkout, restore) took out of the tree. Until the kernel
    /// gets the graft's invalidations it may still reach them through cached
    /// entries (one-hour TTLs); opening one, or creating a name in one, answers
    /// ESTALE, so the kernel looks the path up again and finds the new tree instead
    /// of writing into an orphan. Handles opened before the graft keep working.
    pub replaced: HashSet<u64>,
    /// Eviction candidates (what `super::evict`'s sweep works through).
    pub evict: Pending,
    /// While a flush encodes outside the lock: every inode `mark_dirty` reached
    /// since the flush took its snapshot (their encoded state is not published).
    pub touched: Option<HashSet<u64>>,
    /// Files whose block map may be loaded: after each flush, the clean ones not
    /// used since the previous flush drop theirs (`FileData::unload`), so a big file
    /// read once does not keep its map in memory for the life of the mount.
    pub maps: HashSet<u64>,
    /// Open pin scopes ([`super::Session::pin_roots`]).
    pub pin_scopes: usize,
    /// Every root a flush returned while a pin scope was open: gc roots (in
    /// `live_ids`) until the last scope closes.
    pub pinned: HashSet<NodeId>,
}

impl State {
    /// A flush returns `root`: pin it when a pin scope is open.
    pub fn note_root(&mut self, root: NodeId) {
        if self.pin_scopes > 0 {
            self.pinned.insert(root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Entries;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashMap};

    proptest! {
        /// A listing read page by page while the directory changes returns every
        /// name that was there throughout exactly once, never a name that was
        /// never there, and nothing twice unless it was re-inserted meanwhile.
        #[test]
        fn cookies_survive_changes(
            initial in proptest::collection::btree_set(0u16..400, 0..120),
            ops in proptest::collection::vec((any::<bool>(), 0u16..400), 0..200),
            page in 1usize..20,
        ) {
            let name = |n: u16| format!("f{n}").into_bytes();
            let mut e = Entries::from(
                initial.iter().map(|&n| (name(n), n as u64)).collect::<BTreeMap<_, _>>(),
            );
            let mut stable: HashMap<Vec<u8>, bool> =
                initial.iter().map(|&n| (name(n), true)).collect();
            let mut ever: std::collections::HashSet<Vec<u8>> = stable.keys().cloned().collect();
            let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
            let mut after = 0;
            let mut ops = ops.into_iter();
            loop {
                let got = e.page(after, 3, page);
                for (c, n, ino) in &got {
                    prop_assert!(*c > after);
                    prop_assert_eq!(e.get(n).copied(), Some(*ino));
                    *seen.entry(n.clone()).or_default() += 1;
                }
                let Some(last) = got.last() else { break };
                after = last.0;
                // Change the directory between pages.
                for (insert, n) in ops.by_ref().take(3) {
                    let k = name(n);
                    if insert {
                        e.insert(k.clone(), 1000 + n as u64);
                        ever.insert(k.clone());
                    } else {
                        e.remove(&k);
                    }
                    stable.insert(k, false);
                }
            }
            for (n, count) in &seen {
                prop_assert!(ever.contains(n));
                if stable.get(n) == Some(&true) {
                    prop_assert_eq!(*count, 1);
                }
            }
            for (n, s) in &stable {
                if *s {
                    prop_assert_eq!(seen.get(n).copied(), Some(1), "stable name {:?} missed", n);
                }
            }
        }
    }
}
