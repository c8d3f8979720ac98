//! File data operations of a session: read, write, truncate, fallocate, lseek.
//!
//! Files are cut into fixed [`BLOCK_SIZE`] blocks. A block is a sealed chunk, an
//! in-memory buffer, or absent (a hole, reading as zeros).
//!
//! No store read runs under the table lock here: a block map is loaded outside it
//! (`Session::lock_loaded`), `read` copies chunks after releasing it, and a change
//! that needs the old bytes of a stored block (a partial-block write, a truncation or
//! a zeroed range cutting into one) runs as `Session::with_chunks`: it names the
//! chunks it is missing, they are read unlocked, and it runs again under the lock,
//! re-checking that each block still is the chunk read (retrying otherwise). Every
//! change to a block map marks its block-map leaves changed (`FileData::touch`/`cut`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use super::inode::{Block, Data, FileData, Inode, State};
use super::{SEAL_FRESH, Session, seal_threshold};
use crate::error::{Result, posix};
use crate::id::{ChunkId, NodeId};
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{BLOCK_SIZE, FileNode, INLINE_MAX, Kind, Timespec};

/// Largest file size accepted (like ext4's 16 TiB).
pub const MAX_FILE_SIZE: u64 = 1 << 44;

fn file_mut(st: &mut State, ino: u64) -> Result<&mut FileData> {
    match &mut st.get_mut(ino)?.data {
        Data::File(f) => Ok(f),
        Data::Dir(_) => posix(libc::EISDIR),
        _ => posix(libc::EINVAL),
    }
}

fn blocks_mut(st: &mut State, ino: u64) -> Result<&mut std::collections::BTreeMap<u64, Block>> {
    Ok(file_mut(st, ino)?.blocks.as_mut().expect("file loaded"))
}

/// Chunks read outside the table lock, by id.
pub(crate) type Fetched = HashMap<ChunkId, Arc<Vec<u8>>>;

/// What a change run by [`Session::with_chunks`] did: done, or it needs these
/// chunks first (and changed nothing).
pub(crate) enum Step<T> {
    Done(T),
    Need(Vec<ChunkId>),
}

/// After this many rounds of blocks changing under a change (each round reads
/// outside the lock), the last round reads under it, so a change always completes.
const FETCH_ROUNDS: usize = 8;

/// Read a chunk of file `ino` (a failure is logged). `keep`: a `read()` asked for
/// only part of the block, so it goes through the store's read cache
/// ([`ObjectStore::get_for_read`]: the kernel keeps only the pages it asked for,
/// the rest will come from there). Otherwise caches are looked up but nothing is
/// put in: a block read whole is in the kernel's page cache (sequential reads,
/// `grep`, would fill the cache with it), and a block read to be modified is about
/// to be replaced.
fn get_chunk(store: &dyn ObjectStore, id: &ChunkId, ino: u64, keep: bool) -> Result<Arc<Vec<u8>>> {
    let r = if keep {
        store.get_for_read(ObjKind::Chunk, &id.into())
    } else {
        store.get_uncached(ObjKind::Chunk, &id.into())
    };
    r.map_err(|e| {
        log::error!("ino {ino}: chunk {} unreadable: {e}", id.to_hex());
        e
    })
}

/// Mark file content modified: its node id no longer names it.
fn content_changed(st: &mut State, ino: u64) {
    if let Ok(i) = st.get_mut(ino)
        && let Data::File(f) = &mut i.data
    {
        f.unstore();
    }
    st.dirty_files.insert(ino);
    st.mark_dirty(ino);
}

fn set_size(st: &mut State, ino: u64, size: u64) -> Result<()> {
    let i = st.get_mut(ino)?;
    let delta = size as i64 - i.attr.size as i64;
    i.attr.size = size;
    if i.attr.nlink > 0 {
        st.total_bytes += delta;
    }
    Ok(())
}

/// Truncate or extend `ino` to `size` (table lock held, file loaded). A cut into a
/// stored block needs its bytes: `Need` when they are not in `fetched`. Returns the
/// bytes of the block it brought into memory (charged by the caller).
fn truncate_step(st: &mut State, fetched: &Fetched, ino: u64, size: u64) -> Result<Step<u64>> {
    if size > MAX_FILE_SIZE {
        return posix(libc::EFBIG);
    }
    let old = st.get(ino)?.attr.size;
    let mut pulled = 0;
    if size < old {
        let tail_idx = size / BLOCK_SIZE;
        let tail_len = (size % BLOCK_SIZE) as usize;
        // Materialize a partial tail block before cutting it.
        let tail_data = match blocks_mut(st, ino)?.get(&tail_idx) {
            Some(Block::Stored(c)) if tail_len > 0 => match fetched.get(c) {
                Some(d) => Some(d.clone()),
                None => return Ok(Step::Need(vec![*c])),
            },
            _ => None,
        };
        let f = file_mut(st, ino)?;
        let first_gone = if tail_len == 0 {
            tail_idx
        } else {
            tail_idx + 1
        };
        f.cut(first_gone);
        if tail_len > 0 {
            f.touch(tail_idx, tail_idx);
            let blocks = f.blocks.as_mut().expect("file loaded");
            if let Some(d) = tail_data {
                pulled = d.len() as u64;
                blocks.insert(tail_idx, Block::Mem(d));
            }
            if let Some(Block::Mem(d)) = blocks.get_mut(&tail_idx) {
                let v = Arc::make_mut(d);
                v.truncate(tail_len);
            }
        }
    }
    if size != old {
        set_size(st, ino, size)?;
        let now = Timespec::now();
        let i = st.get_mut(ino)?;
        i.attr.mtime = now;
        i.attr.ctime = now;
        content_changed(st, ino);
    }
    Ok(Step::Done(pulled))
}

/// A file's block map as read from its node, ready to install.
pub(crate) struct LoadedMap {
    blocks: BTreeMap<u64, Block>,
    leaves: BTreeMap<u64, NodeId>,
}

/// Read file node `id` of `ino` whole (its leaves too) and build its block map
/// (callers outside the table lock build it there), logging a failure.
pub(crate) fn load_file_node(store: &dyn ObjectStore, ino: u64, id: NodeId) -> Result<LoadedMap> {
    let loaded = crate::files::load(store, id).map_err(|e| {
        log::error!("file ino {ino} (node {id}) does not load: {e}");
        e
    })?;
    let mut blocks: BTreeMap<u64, Block> = loaded
        .blocks
        .into_iter()
        .map(|(i, c)| (i, Block::Stored(c)))
        .collect();
    if let Some(d) = loaded.inline
        && !d.is_empty()
    {
        blocks.insert(0, Block::Mem(Arc::new(d)));
    }
    Ok(LoadedMap {
        blocks,
        leaves: loaded.leaves.into_iter().collect(),
    })
}

impl State {
    /// The node to load for file `ino`, or `None` when its block map is loaded.
    pub(crate) fn file_to_load(&self, ino: u64) -> Result<Option<NodeId>> {
        match &self.get(ino)?.data {
            Data::File(f) if f.blocks.is_some() => Ok(None),
            Data::File(f) => Ok(Some(f.stored.expect("unloaded file has a stored id"))),
            Data::Dir(_) => posix(libc::EISDIR),
            _ => posix(libc::EINVAL),
        }
    }

    /// Install the block map read from node `id`, if `ino` is still unloaded at `id`.
    pub(crate) fn install_file(&mut self, ino: u64, id: NodeId, loaded: LoadedMap) {
        let Some(Inode {
            data: Data::File(f),
            ..
        }) = self.inodes.get_mut(&ino)
        else {
            return;
        };
        if f.blocks.is_some() || f.stored != Some(id) {
            return;
        }
        f.blocks = Some(loaded.blocks);
        f.dirty_leaves = (!loaded.leaves.is_empty()).then(Default::default);
        f.leaves = loaded.leaves;
        f.used = true;
        self.maps.insert(ino);
    }

    /// Drop the block maps of clean files not used since the last call (and forget
    /// files no longer in the table). Called after each flush.
    pub(crate) fn drop_idle_maps(&mut self) -> usize {
        let mut dropped = 0;
        let inodes = &mut self.inodes;
        self.maps.retain(|ino| {
            let Some(Inode {
                data: Data::File(f),
                ..
            }) = inodes.get_mut(ino)
            else {
                return false;
            };
            if std::mem::take(&mut f.used) {
                return true;
            }
            if f.unload() {
                dropped += 1;
                return false;
            }
            f.blocks.is_some()
        });
        dropped
    }
}

impl Session {
    /// The table lock, with the block map of file `ino` loaded: the file node (and
    /// its leaves) is read outside the lock, then installed if the file still is
    /// at that node (a concurrent load or change wins; then it looks again).
    pub(crate) fn lock_loaded(&self, ino: u64) -> Result<MutexGuard<'_, State>> {
        for _ in 0..FETCH_ROUNDS {
            let mut st = self.lock();
            let Some(id) = st.file_to_load(ino)? else {
                if let Data::File(f) = &mut st.get_mut(ino)?.data
                    && !f.used
                {
                    f.used = true;
                    st.maps.insert(ino);
                }
                return Ok(st);
            };
            drop(st);
            let loaded = load_file_node(&**self.store(), ino, id)?;
            let mut st = self.lock();
            st.install_file(ino, id, loaded);
        }
        let mut st = self.lock();
        st.load_file(&**self.store(), ino)?;
        Ok(st)
    }

    /// Run `change` under the table lock with file `ino` loaded. When it needs the
    /// bytes of stored chunks it answers `Need` (having changed nothing); they are
    /// read outside the lock and it runs again, finding them in its `Fetched` if the
    /// blocks still name them. Returns the lock, still held, with the result.
    pub(crate) fn with_chunks<T>(
        &self,
        ino: u64,
        mut change: impl FnMut(&mut State, &Fetched) -> Result<Step<T>>,
    ) -> Result<(MutexGuard<'_, State>, T)> {
        let mut fetched = Fetched::new();
        for round in 0.. {
            let mut st = self.lock_loaded(ino)?;
            let need = match change(&mut st, &fetched)? {
                Step::Done(t) => return Ok((st, t)),
                Step::Need(ids) => ids,
            };
            if round + 1 >= FETCH_ROUNDS {
                // Blocks keep changing under us: read under the lock this once.
                for c in need {
                    let d = get_chunk(&**self.store(), &c, ino, false)?;
                    fetched.insert(c, d);
                }
                if let Step::Done(t) = change(&mut st, &fetched)? {
                    return Ok((st, t));
                }
                continue;
            }
            drop(st);
            // Keep only what the next round can still use (bounds the memory).
            fetched.retain(|c, _| need.contains(c));
            for c in need {
                if let std::collections::hash_map::Entry::Vacant(e) = fetched.entry(c) {
                    e.insert(get_chunk(&**self.store(), &c, ino, false)?);
                }
            }
        }
        unreachable!("the loop returns")
    }

    /// Truncate or extend file `ino` to `size`; returns with the table lock held.
    pub(crate) fn truncate(&self, ino: u64, size: u64) -> Result<MutexGuard<'_, State>> {
        {
            let st = self.lock();
            match st.get(ino)?.kind {
                Kind::Dir => return posix(libc::EISDIR),
                Kind::File => {}
                _ => return posix(libc::EINVAL),
            }
        }
        let (st, pulled) =
            self.with_chunks(ino, |st, fetched| truncate_step(st, fetched, ino, size))?;
        // A stored tail block cut in memory is unsealed data like a write's.
        self.charge(pulled);
        self.dirty_bytes.fetch_add(pulled, Ordering::Relaxed);
        Ok(st)
    }

    /// Read up to `size` bytes at `offset`.
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        let mut fetch: Vec<(usize, usize, usize, ChunkId, bool)> = Vec::new();
        let small = {
            let st = self.lock();
            let (fsize, unloaded) = match &st.get(ino)?.data {
                Data::File(f) => (
                    st.get(ino)?.attr.size,
                    f.stored.filter(|_| f.blocks.is_none()),
                ),
                _ => return posix(libc::EISDIR),
            };
            if offset >= fsize {
                return Ok(Vec::new());
            }
            unloaded
                .filter(|_| fsize <= INLINE_MAX)
                .map(|id| (id, fsize))
        };
        if let Some((id, fsize)) = small {
            // A small clean file is served from its stored (inline) node without
            // loading it into the table: the kernel's page cache keeps the data, and
            // loading kept every small file read once in memory (+100 MiB per
            // 100,000). Read outside the lock: the node names the content as of the
            // size read with it. A larger file's block map is loaded once and kept,
            // so reads do not decode it again on every call.
            if let FileNode::Inline(d) =
                FileNode::decode(&self.store().get(ObjKind::Node, &id.into())?)?
            {
                let end = fsize.min(offset + size as u64);
                let mut buf = vec![0u8; (end - offset) as usize];
                copy_padded(&mut buf, &d, offset as usize);
                return Ok(buf);
            }
        }
        let mut buf;
        {
            let st = self.lock_loaded(ino)?;
            let fsize = st.get(ino)?.attr.size;
            if offset >= fsize {
                return Ok(Vec::new());
            }
            let end = fsize.min(offset + size as u64);
            buf = vec![0u8; (end - offset) as usize];
            let Data::File(f) = &st.get(ino)?.data else {
                return posix(libc::EISDIR);
            };
            let blocks = f.blocks.as_ref().expect("file loaded");
            let first = offset / BLOCK_SIZE;
            let last = (end - 1) / BLOCK_SIZE;
            for (&idx, b) in blocks.range(first..=last) {
                let bstart = idx * BLOCK_SIZE;
                let from = offset.max(bstart);
                let to = end.min(bstart + BLOCK_SIZE);
                let (in_block, out) = ((from - bstart) as usize, (from - offset) as usize);
                let len = (to - from) as usize;
                // The whole block asked for (readahead, a small file read whole):
                // the kernel keeps all of it, so it does not go to the read cache.
                let whole = from == bstart && (to == bstart + BLOCK_SIZE || to == fsize);
                match b {
                    Block::Mem(d) => copy_padded(&mut buf[out..out + len], d, in_block),
                    Block::Stored(c) => fetch.push((out, in_block, len, *c, whole)),
                }
            }
        }
        for (out, in_block, len, c, whole) in fetch {
            let d = get_chunk(&**self.store(), &c, ino, !whole).inspect_err(|_| {
                let path = self.lock().path_of(ino);
                log::error!(
                    "read of {path} (ino {ino}) failed: chunk {} is damaged or missing",
                    c.to_hex()
                );
            })?;
            copy_padded(&mut buf[out..out + len], &d, in_block);
        }
        Ok(buf)
    }

    /// Write `data` at `offset`; returns bytes written.
    pub fn write(&self, ino: u64, offset: u64, data: &[u8]) -> Result<u32> {
        let _gate = self.gate_shared();
        offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= MAX_FILE_SIZE)
            .ok_or(crate::error::Error::Posix(libc::EFBIG))?;
        let budget = crate::budget::unsealed::ledger();
        if self.past_own_marks() || budget.must_seal(self.charged.load(Ordering::Relaxed)) {
            // The last seal failed (disk full), writers outran a long flush, or
            // the daemon-wide budget is spent and this session holds part of it:
            // seal before taking more data into memory, and refuse this write
            // while sealing keeps failing.
            self.seal()?;
        }
        let (st, grown) = self.with_chunks(ino, |st, fetched| {
            write_step(st, fetched, ino, offset, data)
        })?;
        // Charged under the table lock, where a seal takes its snapshot.
        let charged = grown.as_ref().map(|g| self.charge(g.all));
        drop(st);
        let (Some(Grown { all, fresh }), Some(charged)) = (grown, charged) else {
            return Ok(0);
        };
        let fresh = self.dirty_fresh.fetch_add(fresh, Ordering::Relaxed) + fresh;
        let all = self.dirty_bytes.fetch_add(all, Ordering::Relaxed) + all;
        if fresh > SEAL_FRESH || all > seal_threshold() || budget.should_seal(charged) {
            // In a slot (few at once), else the sealer's or the next writer's to do.
            match budget.writer_slot() {
                Some(_slot) => self.try_seal()?,
                None => budget.nudge(),
            }
        }
        Ok(data.len() as u32)
    }

    /// Whether this session's unsealed data is past twice its own marks (fresh or
    /// all blocks): its writers seal before writing more.
    fn past_own_marks(&self) -> bool {
        self.dirty_fresh.load(Ordering::Relaxed) > 2 * SEAL_FRESH
            || self.dirty_bytes.load(Ordering::Relaxed) > 2 * seal_threshold()
    }

    /// Whether a write would seal before it is served (its session past its own
    /// marks, or the daemon-wide budget spent while it holds part of it): the
    /// /dev/fuse pool asks, to bound how many of its workers wait so.
    pub(crate) fn write_would_wait(&self) -> bool {
        self.past_own_marks()
            || crate::budget::unsealed::ledger().over_limit(self.charged.load(Ordering::Relaxed))
    }

    /// fallocate(2): mode 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE.
    pub fn fallocate(&self, ino: u64, offset: u64, len: u64, mode: i32) -> Result<()> {
        let _gate = self.gate_shared();
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= MAX_FILE_SIZE)
            .ok_or(crate::error::Error::Posix(libc::EFBIG))?;
        let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let punch = mode & libc::FALLOC_FL_PUNCH_HOLE != 0;
        let zero = mode & libc::FALLOC_FL_ZERO_RANGE != 0;
        let known =
            libc::FALLOC_FL_KEEP_SIZE | libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE;
        if mode & !known != 0 || (punch && !keep) || (punch && zero) {
            return posix(libc::EOPNOTSUPP);
        }
        let (mut st, fsize) = self.with_chunks(ino, |st, fetched| {
            if st.get(ino)?.kind != Kind::File {
                return posix(libc::ENODEV);
            }
            let fsize = st.get(ino)?.attr.size;
            if punch || zero {
                let zend = end.min(if keep { fsize } else { end.max(fsize) });
                if let Step::Need(c) = zero_range(st, fetched, ino, offset, zend)? {
                    return Ok(Step::Need(c));
                }
            }
            Ok(Step::Done(fsize))
        })?;
        if !keep && end > fsize {
            set_size(&mut st, ino, end)?;
        }
        let i = st.get_mut(ino)?;
        i.attr.ctime = Timespec::now();
        if punch || zero || (!keep && end > fsize) {
            i.attr.mtime = i.attr.ctime;
            content_changed(&mut st, ino);
        } else {
            st.mark_dirty(ino);
        }
        Ok(())
    }

    /// lseek(2) SEEK_DATA / SEEK_HOLE at block granularity.
    pub fn seek_data_hole(&self, ino: u64, offset: u64, whence: i32) -> Result<u64> {
        let st = self.lock_loaded(ino)?;
        let i = st.get(ino)?;
        let size = i.attr.size;
        if offset >= size {
            return posix(libc::ENXIO);
        }
        let Data::File(f) = &i.data else {
            return posix(libc::EINVAL);
        };
        let blocks = f.blocks.as_ref().unwrap();
        let first = offset / BLOCK_SIZE;
        match whence {
            libc::SEEK_DATA => match blocks.range(first..).next() {
                Some((&idx, _)) if idx * BLOCK_SIZE < size => Ok(offset.max(idx * BLOCK_SIZE)),
                _ => posix(libc::ENXIO),
            },
            libc::SEEK_HOLE => {
                let mut idx = first;
                while blocks.contains_key(&idx) {
                    idx += 1;
                }
                Ok(offset.max(idx * BLOCK_SIZE).min(size))
            }
            _ => posix(libc::EINVAL),
        }
    }
}

/// Memory a write added, by allocation: all of it, and the part that is new data
/// (not blocks pulled in from the store by a partial overwrite).
struct Grown {
    all: u64,
    fresh: u64,
}

/// The body of a write under the table lock (file loaded): `Need` when a block it
/// writes part of is a stored chunk not in `fetched`; else the memory it added, or
/// `None` for an empty write.
fn write_step(
    st: &mut State,
    fetched: &Fetched,
    ino: u64,
    offset: u64,
    data: &[u8],
) -> Result<Step<Option<Grown>>> {
    let fsize = st.get(ino)?.attr.size;
    if data.is_empty() {
        return Ok(Step::Done(None));
    }
    let end = offset + data.len() as u64;
    let first = offset / BLOCK_SIZE;
    let last = (end - 1) / BLOCK_SIZE;
    let whole = |idx: u64| {
        let bstart = idx * BLOCK_SIZE;
        let to = end.min(bstart + BLOCK_SIZE);
        offset <= bstart && (to - bstart == BLOCK_SIZE || to >= fsize)
    };
    // Only the first and last block can be partial.
    let need: Vec<ChunkId> = {
        let blocks = blocks_mut(st, ino)?;
        [first, last]
            .into_iter()
            .filter(|&i| !whole(i))
            .filter_map(|i| match blocks.get(&i) {
                Some(Block::Stored(c)) if !fetched.contains_key(c) => Some(*c),
                _ => None,
            })
            .collect()
    };
    if !need.is_empty() {
        return Ok(Step::Need(need));
    }
    file_mut(st, ino)?.touch(first, last);
    // Memory this write adds (by allocation, so a 4 KiB write into a stored
    // block counts the whole 64 KiB it pulls in, and growing a block in
    // memory counts its growth).
    let mut grown = Grown { all: 0, fresh: 0 };
    for idx in first..=last {
        let bstart = idx * BLOCK_SIZE;
        let from = offset.max(bstart);
        let to = end.min(bstart + BLOCK_SIZE);
        let in_block = (from - bstart) as usize;
        let src = &data[(from - offset) as usize..(to - offset) as usize];
        let whole = whole(idx);
        // Take the table's reference so make_mut does not copy needlessly.
        let existing = blocks_mut(st, ino)?.remove(&idx);
        let was_mem = matches!(existing, Some(Block::Mem(_)));
        let refetched = matches!(existing, Some(Block::Stored(_))) && !whole;
        let mut buf: Arc<Vec<u8>> = match existing {
            Some(Block::Mem(d)) => d,
            Some(Block::Stored(_)) if whole => Arc::new(super::bufpool::take()),
            Some(Block::Stored(c)) => fetched[&c].clone(),
            // A small file's only block (an inline file, kept in memory as its
            // content): its size, not a pooled 64 KiB buffer held for it.
            None if idx == 0 && end <= INLINE_MAX => Arc::new(Vec::with_capacity(end as usize)),
            None => Arc::new(super::bufpool::take()),
        };
        // A block in memory that a running seal also holds: `make_mut` copies
        // it, and until the seal ends both copies are in memory.
        let copied = was_mem && Arc::strong_count(&buf) > 1;
        let v = Arc::make_mut(&mut buf);
        // Memory this block holds beyond what was already counted: all of
        // it when it enters memory (or is copied), its growth when it was in
        // memory.
        let before = if was_mem && !copied { v.capacity() } else { 0 };
        let need = in_block + src.len();
        if whole && v.len() > need && to >= fsize {
            v.truncate(need);
        }
        // Zero only a gap before the write (a hole), overwrite what the block
        // already holds, append the rest: no byte is zeroed and then copied over.
        if v.len() < in_block {
            v.resize(in_block, 0);
        }
        let overlap = (v.len() - in_block).min(src.len());
        v[in_block..in_block + overlap].copy_from_slice(&src[..overlap]);
        v.extend_from_slice(&src[overlap..]);
        let g = v.capacity().saturating_sub(before) as u64;
        grown.all += g;
        if !refetched && !copied {
            grown.fresh += g;
        }
        blocks_mut(st, ino)?.insert(idx, Block::Mem(buf));
    }
    if end > fsize {
        set_size(st, ino, end)?;
    }
    let now = Timespec::now();
    let i = st.get_mut(ino)?;
    i.attr.mtime = now;
    i.attr.ctime = now;
    content_changed(st, ino);
    Ok(Step::Done(Some(grown)))
}

/// Zero bytes [from, to): whole blocks become holes, partial ones are rewritten
/// (`Need` when a partial one is a stored chunk not in `fetched`; nothing changed).
fn zero_range(st: &mut State, fetched: &Fetched, ino: u64, from: u64, to: u64) -> Result<Step<()>> {
    if from >= to {
        return Ok(Step::Done(()));
    }
    let first = from / BLOCK_SIZE;
    let last = (to - 1) / BLOCK_SIZE;
    let partial = |idx: u64| {
        let bstart = idx * BLOCK_SIZE;
        from > bstart || to < bstart + BLOCK_SIZE
    };
    let blocks = blocks_mut(st, ino)?;
    let need: Vec<ChunkId> = [first, last]
        .into_iter()
        .filter(|&i| partial(i))
        .filter_map(|i| match blocks.get(&i) {
            Some(Block::Stored(c)) if !fetched.contains_key(c) => Some(*c),
            _ => None,
        })
        .collect();
    if !need.is_empty() {
        return Ok(Step::Need(need));
    }
    let present: Vec<u64> = blocks.range(first..=last).map(|(i, _)| *i).collect();
    file_mut(st, ino)?.touch(first, last);
    for idx in present {
        let bstart = idx * BLOCK_SIZE;
        let a = from.max(bstart) - bstart;
        let b = to.min(bstart + BLOCK_SIZE) - bstart;
        if !partial(idx) {
            blocks_mut(st, ino)?.remove(&idx);
            continue;
        }
        let mut buf = match blocks_mut(st, ino)?.remove(&idx) {
            Some(Block::Mem(d)) => d,
            Some(Block::Stored(c)) => fetched[&c].clone(),
            None => continue,
        };
        let v = Arc::make_mut(&mut buf);
        let (a, b) = (a as usize, (b as usize).min(v.len()));
        if a < b {
            v[a..b].fill(0);
        }
        blocks_mut(st, ino)?.insert(idx, Block::Mem(buf));
    }
    Ok(Step::Done(()))
}

/// Copy `src[from..]` into `dst`, zero-filling past the end of `src`.
fn copy_padded(dst: &mut [u8], src: &[u8], from: usize) {
    let avail = src.len().saturating_sub(from).min(dst.len());
    if avail > 0 {
        dst[..avail].copy_from_slice(&src[from..from + avail]);
    }
    dst[avail..].fill(0);
}
