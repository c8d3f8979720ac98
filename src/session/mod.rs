//! One workspace session: a live, mutable view of a Merkle tree.
//!
//! Owns: the inode table ([`inode::State`]) of one session, the POSIX operations on it
//! (`posix`, `data`), turning it back into immutable tree nodes (`flush`, `encode`),
//! checkpoints and grafting another tree in (`snapshot`, `graft`), evicting
//! forgotten clean inodes from it (`evict`), collecting touched paths (`touch`) and
//! the writer watch of a recorded command (`watch`).
//! The session never names fuser: `crate::fs` translates FUSE requests into calls here.
//!
//! Persistence: the session's durable state is its session record (`s/<name>` in the
//! metadata db; the record, its format and its reading live below, in
//! `crate::refs::session_record`, re-exported here) naming a root node. A flush seals dirty blocks into chunks, re-encodes
//! only dirty paths, and commits the new root with the store's "packs before index"
//! protocol, so after a crash the session is exactly at its last flush.
//! Concurrency: one mutex over the table; store reads (block maps, chunks), sealing
//! and tree encoding (hash + compress + delta + pack append) run outside it (`data`,
//! `flush`, `encode`: a flush publishes under the lock only what no request changed
//! meanwhile).
//! Bounded records: every node a request can grow is bounded at that request
//! ([`XATTR_BYTES_MAX`], [`XATTR_COUNT_MAX`], [`SYMLINK_MAX`], [`NAME_MAX`],
//! [`DIR_ENTRIES_MAX`], [`LINK_TABLE_MAX`], `data::MAX_FILE_SIZE`; the errno ext4
//! would answer), so no flush ever meets a node over the store's object limit
//! (docs/design.md, "Bounded records").

mod beside;
#[cfg(test)]
mod bound_tests;
mod bufpool;
pub mod data;
#[cfg(test)]
mod deep_tests;
mod encode;
pub mod evict;
#[cfg(test)]
mod evict_tests;
pub mod flush;
mod graft;
pub mod inode;
mod link_index;
#[cfg(test)]
mod lock_tests;
#[cfg(test)]
pub(crate) mod model_tests;
pub mod posix;
#[cfg(test)]
mod seal_tests;
pub mod snapshot;
pub mod touch;
pub mod txn;
pub use txn::Txn;
#[cfg(test)]
mod txn_tests;
pub mod watch;
mod xattr;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, LockResult, Mutex, MutexGuard, PoisonError};

use crate::error::{Error, Result, posix};
use crate::id::NodeId;
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{Attr, Content, DirNode, Entry, Kind, Record, RootNode, Timespec};
use inode::{Data, Inode, State};

pub use crate::refs::session_record::{
    BranchMoved, Merging, SESSION_RECORD_VERSION, SessionConfig, SessionRecord, create_record,
    list_records, load_record, new_record, record_op, remove_record, validate_session_name,
};

/// Longest file name accepted.
pub const NAME_MAX: usize = 255;
/// Longest symlink target accepted (bytes; the kernel's `PATH_MAX` less its NUL).
pub const SYMLINK_MAX: usize = 4095;
/// Extended attributes of one inode: at most this many bytes, each attribute
/// counted as [`xattr_cost`] (`setxattr` past it: `ENOSPC`, as ext4 when its
/// xattr block is full). Together with [`NAME_MAX`], [`SYMLINK_MAX`] and the
/// 512-entry shard bound it keeps every directory node under the store's object
/// limit (docs/design.md, "Bounded records").
pub const XATTR_BYTES_MAX: usize = 96 * 1024;
/// Extended attributes of one inode: at most this many (`ENOSPC` past it).
pub const XATTR_COUNT_MAX: usize = 1024;
/// Bytes one extended attribute counts against [`XATTR_BYTES_MAX`]: its name,
/// its value and 16 (at least its encoding's two length prefixes).
pub fn xattr_cost(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 16
}
/// Entries of one directory: at most this many (`ENOSPC` past it), which bounds a
/// sharded directory's index node (docs/design.md, "Bounded records").
pub const DIR_ENTRIES_MAX: usize = 1 << 22;
/// The hard-link table (records of inodes with several names, all encoded in the
/// root node): at most this many bytes by [`inode::record_bound`] (`ENOSPC` for a
/// `link` or `setxattr` past it), so the root node stays under the object limit.
pub const LINK_TABLE_MAX: u64 = 48 << 20;

/// Attributes as reported to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Inode number.
    pub ino: u64,
    /// Kind.
    pub kind: Kind,
    /// Attributes.
    pub attr: Attr,
    /// 512-byte blocks allocated.
    pub blocks: u64,
}

/// Store a root node for an empty workspace owned by `uid:gid`.
pub fn empty_root(store: &dyn ObjectStore, uid: u32, gid: u32) -> Result<NodeId> {
    let now = Timespec::now();
    let root = RootNode {
        root: Record {
            kind: Kind::Dir,
            ino: 1,
            attr: Attr {
                perm: 0o755,
                uid,
                gid,
                size: 0,
                blocks: 0,
                nlink: 2,
                rdev: 0,
                atime: now,
                mtime: now,
                ctime: now,
            },
            xattrs: Vec::new(),
            content: Content::Node(
                store
                    .put(ObjKind::Node, &DirNode::default().encode())?
                    .node(),
            ),
        },
        links: Vec::new(),
        next_ino: 2,
    };
    Ok(store.put(ObjKind::Node, &root.encode())?.node())
}

/// What the agent view of `crate::visibility` reads of a live session (it keeps
/// the view's cache here).
impl crate::visibility::LiveSession for Session {
    fn name(&self) -> &str {
        Session::name(self)
    }

    fn store(&self) -> &dyn ObjectStore {
        &**Session::store(self)
    }

    fn record(&self) -> SessionRecord {
        Session::record(self)
    }

    fn seen(&self) -> &Mutex<crate::visibility::Seen> {
        &self.seen
    }
}

/// Unsealed bytes of new data (blocks that did not come from the store: appends,
/// whole-block writes, holes filled) above which a writer seals; past twice this,
/// writers wait for the seal. Each such block is sealed once, so a larger budget
/// would buy nothing but memory.
pub const SEAL_FRESH: u64 = 32 << 20;

/// Unsealed bytes of a session, all blocks counted, above which a writer seals
/// (past twice this, writers wait): 1/64 of the machine's RAM, at least 32 MiB and
/// at most 256 MiB. It matters for blocks pulled in from the store by a partial
/// overwrite: sealed, such a block is fetched and sealed again whole at its next
/// write (64 KiB of hashing and compression per 4 KiB written), so random
/// overwrites of a file larger than the budget cost up to 16x their bytes (measured
/// in docs/design.md "Write path and flush"). `TREEFORK_SEAL_MB` overrides it
/// (diagnostics and the bench); read once.
pub fn seal_threshold() -> u64 {
    static T: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *T.get_or_init(|| {
        let ram = crate::budget::ram_bytes();
        crate::budget::ram_share("TREEFORK_SEAL_MB", ram, 64, 32 << 20, 256 << 20)
    })
}

/// A live session.
pub struct Session {
    name: String,
    store: Arc<dyn ObjectStore>,
    state: Mutex<State>,
    record: Mutex<SessionRecord>,
    /// Serializes seal/flush.
    flush_lock: Mutex<()>,
    /// Unsealed bytes (by allocation), every block: see [`seal_threshold`].
    dirty_bytes: AtomicU64,
    /// The part of `dirty_bytes` that is new data: see [`SEAL_FRESH`].
    dirty_fresh: AtomicU64,
    /// What this session has charged to the daemon-wide budget of unsealed data
    /// (`budget::unsealed`): counted like `dirty_bytes`, given back when a seal has
    /// stored what it covered (not when the seal starts), and at drop.
    charged: AtomicU64,
    /// Serializes control operations (checkpoint, checkout, restore, ...).
    pub(crate) op_lock: Mutex<()>,
    /// Mutating operations hold it shared; a checkout/restore holds it exclusively
    /// from its save to its graft, so no write can fall between the two.
    pub(crate) gate: std::sync::RwLock<()>,
    /// Who writes while a recorded command runs (`treefork exec`).
    pub watch: watch::WriterWatch,
    /// Touched paths waiting for the next flush ([`touch`]).
    touch: touch::Pending,
    /// FUSE requests and ops served (the daemon's access clock reads it).
    accesses: AtomicU64,
    /// What the session's agent sees (`crate::visibility`).
    pub(crate) seen: Mutex<crate::visibility::Seen>,
    /// The undo/redo stacks as of the newest record replayed (see
    /// [`crate::oplog::walk::stacks`]): an undo replays only what came since.
    pub(crate) undo_stacks: Mutex<crate::oplog::walk::StackCache>,
}

impl Session {
    /// Open a session from its record.
    pub fn open(store: Arc<dyn ObjectStore>, rec: SessionRecord) -> Result<Session> {
        let root_id = rec.root;
        let root = RootNode::decode(&store.get(ObjKind::Node, &root_id.into())?)?;
        let mut st = State {
            next_ino: root.next_ino.max(2),
            root_id: Some(root_id),
            total_bytes: rec.bytes,
            total_inodes: rec.inodes,
            ..State::default()
        };
        let mut ri = Inode::from_record(&root.root, 0, false);
        ri.lookups = 1;
        st.inodes.insert(1, ri);
        for l in root.links {
            st.link_bytes += inode::record_bound_of(&l);
            st.links.insert(l.ino);
            st.link_records.insert(l.ino, l);
        }
        Ok(Session {
            name: rec.name.clone(),
            store,
            state: Mutex::new(st),
            record: Mutex::new(rec),
            flush_lock: Mutex::new(()),
            dirty_bytes: AtomicU64::new(0),
            dirty_fresh: AtomicU64::new(0),
            charged: AtomicU64::new(0),
            op_lock: Mutex::new(()),
            gate: std::sync::RwLock::new(()),
            watch: watch::WriterWatch::default(),
            touch: touch::Pending::default(),
            accesses: AtomicU64::new(0),
            seen: crate::visibility::new_cache(),
            undo_stacks: Mutex::default(),
        })
    }

    /// Session name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Let the daemon-wide sealer seal this session when the budget of unsealed
    /// data runs low (a mounted session; see `budget::unsealed`).
    pub fn join_budget(self: &Arc<Self>) {
        let h: Arc<dyn crate::budget::unsealed::Holder> = self.clone();
        crate::budget::unsealed::ledger().register(Arc::downgrade(&h));
    }

    /// The store this session writes to.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The last durable session record.
    pub fn record(&self) -> SessionRecord {
        relock(self.record.lock()).clone()
    }

    /// The table lock. A panic in a request while it was held (a bug) poisons it;
    /// the table is then checked and repaired ([`State::repair_after_panic`]) and
    /// the mount keeps serving, instead of every later request panicking too.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => {
                let mut g = p.into_inner();
                self.state.clear_poison();
                log::error!(
                    "session {}: a request panicked holding the table lock; repairing the table",
                    self.name
                );
                g.repair_after_panic();
                g
            }
        }
    }

    /// The mutating-request gate, shared (see `gate`). Only a panicking writer
    /// (checkout, restore) could poison it; it guards no data.
    pub(crate) fn gate_shared(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        relock(self.gate.read())
    }

    /// Number of inodes in the live table (what eviction bounds; `sessions` shows it
    /// as `live_inodes`).
    pub fn live_inodes(&self) -> usize {
        self.lock().inodes.len()
    }

    /// Unload every forgotten clean directory now ([`evict`]); returns the number
    /// of inodes removed from the table.
    pub fn evict_forgotten(&self) -> usize {
        self.lock().sweep()
    }

    /// Live (logical bytes, inodes) of the working state.
    pub fn usage(&self) -> (i64, i64) {
        let st = self.lock();
        (st.total_bytes, st.total_inodes)
    }

    /// Every object id the live inode table holds, as gc roots: (node ids of any
    /// type, chunk ids). Covers what no durable root reaches yet — sealed blocks of
    /// files written since the last flush, open-but-unlinked files, cached shard
    /// leaves a flush may reuse without writing them again — and the roots pinned
    /// for operations in flight ([`Session::pin_roots`]).
    pub fn live_ids(&self) -> (Vec<NodeId>, Vec<crate::id::ChunkId>) {
        let st = self.lock();
        let mut nodes: Vec<NodeId> = st.root_id.into_iter().collect();
        nodes.extend(st.graft_mark.map(|(_, r)| r));
        nodes.extend(st.pinned.iter().copied());
        let mut chunks = Vec::new();
        for i in st.inodes.values() {
            match &i.data {
                inode::Data::Dir(d) => {
                    nodes.extend(d.stored);
                    nodes.extend(d.shards.values().copied());
                }
                inode::Data::File(f) => {
                    nodes.extend(f.stored);
                    nodes.extend(f.leaves.values().copied());
                    for b in f.blocks.iter().flat_map(|b| b.values()) {
                        if let inode::Block::Stored(c) = b {
                            chunks.push(*c);
                        }
                    }
                }
                _ => {}
            }
        }
        for r in st.link_records.values() {
            if let crate::tree::Content::Node(id) = r.content {
                nodes.push(id);
            }
        }
        (nodes, chunks)
    }

    /// Attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> Result<Stat> {
        let st = self.lock();
        stat_of(&st, ino)
    }

    /// Statfs numbers: (total, free, avail) bytes of the backing store, and inodes used.
    pub fn statfs(&self) -> (u64, u64, u64, u64) {
        let (t, f, a) = self.store.space();
        (t, f, a, self.lock().total_inodes.max(0) as u64)
    }
}

/// A guard whether or not a panic poisoned its lock: for locks whose data stays
/// consistent at every unlock point (or that guard no data).
pub(crate) fn relock<G>(r: LockResult<G>) -> G {
    r.unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn stat_of(st: &State, ino: u64) -> Result<Stat> {
    let i = st.inodes.get(&ino).ok_or(Error::Posix(libc::ENOENT))?;
    Ok(Stat {
        ino,
        kind: i.kind,
        attr: i.attr,
        blocks: i.blocks512(),
    })
}

pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > NAME_MAX {
        return posix(libc::ENAMETOOLONG);
    }
    if name.is_empty() || name.contains(&b'/') || name == b"." || name == b".." {
        return posix(libc::EINVAL);
    }
    Ok(())
}

impl State {
    /// A path of `ino` for messages: walks `parent` links (names found by scanning
    /// each parent's loaded entries); hard-linked and orphaned inodes are described.
    pub fn path_of(&self, ino: u64) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut cur = ino;
        while cur != 1 {
            let Some(i) = self.inodes.get(&cur) else {
                return format!("(inode {ino})");
            };
            if i.hardlink {
                parts.push(format!("(hard-linked inode {cur})"));
                break;
            }
            let name = self.inodes.get(&i.parent).and_then(|p| match &p.data {
                Data::Dir(d) => d
                    .entries
                    .as_ref()?
                    .iter()
                    .find(|(_, v)| **v == cur)
                    .map(|(k, _)| String::from_utf8_lossy(k).into_owned()),
                _ => None,
            });
            match name {
                Some(n) => parts.push(n),
                None => {
                    parts.push(format!("(unlinked inode {cur})"));
                    break;
                }
            }
            cur = i.parent;
            if parts.len() > 4096 {
                break;
            }
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }

    pub(crate) fn get(&self, ino: u64) -> Result<&Inode> {
        self.inodes.get(&ino).ok_or(Error::Posix(libc::ENOENT))
    }

    pub(crate) fn get_mut(&mut self, ino: u64) -> Result<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(Error::Posix(libc::ENOENT))
    }

    /// Mark `ino`'s record changed, and every ancestor's content (module invariant).
    pub(crate) fn mark_dirty(&mut self, ino: u64) {
        self.changed = true;
        self.mutations += 1;
        self.generation += 1;
        self.last_mutation_ms = crate::clock::unix_ms();
        let mut cur = ino;
        let mut first = true;
        while let Some(i) = self.inodes.get_mut(&cur) {
            if let Some(t) = &mut self.touched {
                t.insert(cur);
            }
            if !first && let Data::Dir(d) = &mut i.data {
                d.unstore();
            }
            let was = i.dirty;
            i.dirty = true;
            if i.hardlink {
                self.links_dirty = true;
                return;
            }
            if (was && !first) || i.parent == 0 {
                return;
            }
            first = false;
            cur = i.parent;
        }
    }

    /// Mark a directory's entries changed.
    pub(crate) fn mark_dir_changed(&mut self, ino: u64) {
        if let Some(Inode {
            data: Data::Dir(d), ..
        }) = self.inodes.get_mut(&ino)
        {
            d.unstore();
        }
        self.mark_dirty(ino);
    }

    pub(crate) fn alloc_ino(&mut self) -> u64 {
        let i = self.next_ino;
        self.next_ino += 1;
        i
    }

    /// Make sure the entries of directory `ino` are loaded.
    pub(crate) fn load_dir(&mut self, store: &dyn ObjectStore, ino: u64) -> Result<()> {
        let id = match &self.get(ino)?.data {
            Data::Dir(d) if d.entries.is_some() => return Ok(()),
            Data::Dir(d) => d.stored.expect("unloaded dir has a stored id"),
            _ => return posix(libc::ENOTDIR),
        };
        let loaded = crate::dirs::load_shards(store, id).map_err(|e| {
            log::error!("directory {ino} (node {id}) does not load: {e}");
            e
        })?;
        let sharded = loaded.len() > 1;
        let mut entries = BTreeMap::new();
        let mut shards = HashMap::new();
        let mut links = Vec::new();
        for shard in loaded {
            let mut digest = crate::tree::ShardDigest::default();
            for (name, e) in shard.node.entries {
                let child = e.ino();
                digest.add(&name, child, e.kind(), matches!(e, Entry::HardLink { .. }));
                match e {
                    Entry::Inline(r) => {
                        self.inodes
                            .entry(child)
                            .or_insert_with(|| Inode::from_record(&r, ino, false));
                    }
                    Entry::HardLink { .. } => {
                        if !self.inodes.contains_key(&child) {
                            let r = self.link_records.remove(&child).ok_or_else(|| {
                                Error::corrupt(
                                    format!("directory node {id}"),
                                    format!("hard link to ino {child} missing from the link table"),
                                )
                            })?;
                            self.inodes.insert(child, Inode::from_record(&r, 0, true));
                        }
                        links.push(child);
                    }
                }
                entries.insert(name, child);
            }
            if sharded {
                shards.insert(digest.finish(), shard.id);
            }
        }
        if let Data::Dir(d) = &mut self.get_mut(ino)?.data {
            d.entries = Some(entries.into());
            d.shards = shards;
        }
        for child in links {
            self.index_link(child, ino);
        }
        Ok(())
    }

    /// Make sure the block map of file `ino` is loaded (reads under the caller's
    /// lock; the session's data paths load outside it, `Session::lock_loaded`).
    pub(crate) fn load_file(&mut self, store: &dyn ObjectStore, ino: u64) -> Result<()> {
        let Some(id) = self.file_to_load(ino)? else {
            return Ok(());
        };
        let loaded = data::load_file_node(store, ino, id)?;
        self.install_file(ino, id, loaded);
        Ok(())
    }

    /// Look up `name` in directory `parent` (loading it if needed).
    pub(crate) fn child(
        &mut self,
        store: &dyn ObjectStore,
        parent: u64,
        name: &[u8],
    ) -> Result<Option<u64>> {
        self.load_dir(store, parent)?;
        match &self.get(parent)?.data {
            Data::Dir(d) => Ok(d.entries.as_ref().unwrap().get(name).copied()),
            _ => posix(libc::ENOTDIR),
        }
    }

    pub(crate) fn entries_mut(&mut self, dir: u64) -> Result<&mut inode::Entries> {
        match &mut self.get_mut(dir)?.data {
            Data::Dir(d) => Ok(d.entries.as_mut().expect("dir loaded")),
            _ => posix(libc::ENOTDIR),
        }
    }

    /// Restore the table's structural invariants after a request panicked halfway
    /// through a mutation: every loaded directory entry names a live inode, and
    /// everything is re-encoded at the next flush (whatever the interrupted request
    /// changed). What it changed is otherwise kept; the panic is answered EIO.
    pub(crate) fn repair_after_panic(&mut self) {
        let mut dangling = Vec::new();
        for (&ino, i) in &self.inodes {
            if let Data::Dir(d) = &i.data
                && let Some(e) = &d.entries
            {
                for (name, child) in e.iter() {
                    if !self.inodes.contains_key(child) {
                        dangling.push((ino, name.clone()));
                    }
                }
            }
        }
        for (dir, name) in dangling {
            log::error!(
                "repair: dropping entry {:?} of inode {dir} (no inode)",
                String::from_utf8_lossy(&name)
            );
            let _ = self.remove_entry(dir, &name);
            self.mark_dir_changed(dir);
        }
        self.changed = true;
    }

    /// Drop an inode that is unlinked and no longer referenced by the kernel.
    pub(crate) fn maybe_reap(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get(&ino)
            && i.attr.nlink == 0
            && i.lookups == 0
        {
            self.unindex_ino(ino);
            self.inodes.remove(&ino);
            self.dirty_files.remove(&ino);
            self.replaced.remove(&ino);
        }
    }
}

#[cfg(test)]
mod record_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Stored session records: valid ones round-trip; arbitrary or mutated bytes
        /// give a record or `Corrupt`, never a panic.
        #[test]
        fn session_record_decoder(
            name in "[a-z][a-z0-9._-]{0,20}",
            bytes in any::<i64>(),
            head in any::<bool>(),
            flips in proptest::collection::vec((any::<usize>(), 0u8..8), 0..4),
            cut in any::<usize>(),
            junk in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut r = new_record(&name, NodeId::of(name.as_bytes()), bytes, 3).unwrap();
            r.head = head.then(|| crate::id::CheckpointId::of(b"h"));
            let enc = serde_json::to_vec(&r).unwrap();
            prop_assert_eq!(&SessionRecord::decode(&name, &enc).unwrap(), &r);
            let mut m = enc.clone();
            for (at, bit) in &flips {
                let i = at % m.len();
                m[i] ^= 1 << bit;
            }
            m.truncate(cut % (m.len() + 1));
            match SessionRecord::decode(&name, &m) {
                // Its ids are well-formed by type; what decodes writes back as itself.
                Ok(d) => prop_assert_eq!(
                    SessionRecord::decode(&name, &serde_json::to_vec(&d).unwrap()).unwrap(),
                    d
                ),
                Err(e) => prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e),
            }
            let _ = SessionRecord::decode(&name, &junk);
        }
    }
}
