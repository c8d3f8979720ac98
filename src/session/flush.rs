//! Turning the live table back into immutable tree nodes.
//!
//! `seal` moves written blocks into the chunk store (hashing and compression run
//! outside the table lock); `flush` then re-encodes only dirty paths bottom-up,
//! writes the new root node and commits the session record naming it, atomically
//! with the index entries of everything written (store "packs before index").
//! Cost is proportional to what changed since the last flush, never to tree size.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::inode::{Block, Data, State};
use super::{Session, SessionRecord, record_op};
use crate::meta::MetaOp;

use std::collections::HashMap;

use crate::error::Result;
use crate::id::{ChunkId, NodeId};
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{
    BLOCK_SIZE, Content, DirIndex, DirNode, Entry, FileNode, INLINE_MAX, Record, RootNode,
    ShardDigest, Timespec, shard_ranges,
};

/// Callback of [`Session::flush_with`]: adjust the record for the new root and return
/// extra ops to commit with it.
pub type Extra<'a> = &'a mut dyn FnMut(&mut SessionRecord, NodeId) -> Result<Vec<MetaOp>>;

/// Seals of at least this many bytes hand freed memory back to the kernel.
const TRIM_AFTER: usize = 8 << 20;

/// One block to seal: (ino, block index, the live buffer, its canonical bytes).
/// (ino, block index, the block as in the table, its stored length): the stored
/// bytes are the block's first `len` bytes, zero-padded when the block is shorter.
/// Last: the chunk this block replaced, a delta-base hint (small files only).
type SealWork = (u64, u64, Arc<Vec<u8>>, usize, Option<ChunkId>);

/// Files up to this size store a changed block as a delta of the block it replaced
/// (source files, configs: an edit then costs bytes, not the file); larger files
/// (databases, images, benchmark data) keep every chunk whole, so that a random read
/// stays one record and a rewrite costs no extra read of the old block.
const DELTA_FILE_MAX: u64 = 4 * BLOCK_SIZE;

/// The chunks of a small file's base node, by block index (see [`DELTA_FILE_MAX`]).
fn base_chunks(store: &dyn ObjectStore, base: Option<NodeId>, size: u64) -> HashMap<u64, ChunkId> {
    let Some(b) = base.filter(|_| size <= DELTA_FILE_MAX) else {
        return HashMap::new();
    };
    match store
        .get(ObjKind::Node, &b.0)
        .ok()
        .and_then(|raw| FileNode::decode(&raw).ok())
    {
        Some(FileNode::Blocks { blocks, .. }) => blocks.into_iter().collect(),
        _ => HashMap::new(),
    }
}

impl Session {
    /// Seal written blocks of large files into chunks. Not durable by itself.
    /// Return once no seal or flush of this session is in progress (gc barrier:
    /// every object they put is then reachable from the live table or the record).
    pub fn flush_barrier(&self) {
        drop(super::relock(self.flush_lock.lock()));
    }

    pub fn seal(&self) -> Result<()> {
        let _g = super::relock(self.flush_lock.lock());
        self.seal_locked()
    }

    fn seal_locked(&self) -> Result<()> {
        self.dirty_bytes.store(0, Ordering::Relaxed);
        let store = self.store();
        let work: Vec<SealWork> = {
            let st = self.lock();
            let mut w = Vec::new();
            for &ino in &st.dirty_files {
                let Some(i) = st.inodes.get(&ino) else {
                    continue;
                };
                let size = i.attr.size;
                if size <= INLINE_MAX {
                    continue;
                }
                let Data::File(f) = &i.data else { continue };
                let bases = base_chunks(store.as_ref(), f.base, size);
                for (&idx, b) in f.blocks.iter().flatten() {
                    if let Block::Mem(d) = b {
                        let base = bases.get(&idx).copied();
                        w.push((ino, idx, d.clone(), block_len(idx, size), base));
                    }
                }
            }
            w
        };
        if work.is_empty() {
            return Ok(());
        }
        let sealed_bytes: usize = work.iter().map(|w| w.3).sum();
        // Hash + compress on every core; only the pack append is serialized.
        let seal_one = |(ino, idx, arc, len, base): SealWork| {
            // Borrow the block when it already has its stored length (the common
            // case); copy only to pad or cut it.
            let bytes: std::borrow::Cow<'_, [u8]> = if arc.len() == len {
                std::borrow::Cow::Borrowed(&arc[..])
            } else {
                std::borrow::Cow::Owned(canonical_block(&arc, idx, len as u64 + idx * BLOCK_SIZE))
            };
            let id = if bytes.iter().all(|&b| b == 0) {
                None
            } else {
                Some(ChunkId(store.put_based(
                    ObjKind::Chunk,
                    &bytes,
                    base.as_ref().map(|c| &c.0),
                )?))
            };
            Ok::<_, crate::error::Error>((ino, idx, arc, id))
        };
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(4);
        let sealed: Result<Vec<_>> = if workers < 2 || work.len() < 4 {
            work.into_iter().map(seal_one).collect()
        } else {
            let mut parts: Vec<Vec<_>> = (0..workers).map(|_| Vec::new()).collect();
            for (i, w) in work.into_iter().enumerate() {
                parts[i % workers].push(w);
            }
            let results: Vec<Result<Vec<_>>> = std::thread::scope(|s| {
                let handles: Vec<_> = parts
                    .into_iter()
                    .map(|p| {
                        s.spawn(move || p.into_iter().map(seal_one).collect::<Result<Vec<_>>>())
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("seal worker panicked"))
                    .collect()
            });
            results.into_iter().try_fold(Vec::new(), |mut all, r| {
                all.extend(r?);
                Ok(all)
            })
        };
        // A failed put (ENOSPC, EIO) leaves every block in memory as `Mem` (only the
        // swap below makes a block `Stored`), and counts them as unsealed again so
        // the next write retries the seal (and is refused while it keeps failing)
        // instead of piling up more memory. Records that did reach the pack stay
        // pending in the store and are reused by id on the retry.
        let sealed = match sealed {
            Ok(s) => s,
            Err(e) => {
                self.dirty_bytes
                    .fetch_add(sealed_bytes as u64, Ordering::Relaxed);
                return Err(e);
            }
        };
        let mut st = self.lock();
        for (ino, idx, arc, id) in sealed {
            let Some(i) = st.inodes.get_mut(&ino) else {
                continue;
            };
            let Data::File(f) = &mut i.data else { continue };
            let Some(blocks) = f.blocks.as_mut() else {
                continue;
            };
            if let Some(Block::Mem(cur)) = blocks.get(&idx)
                && Arc::ptr_eq(cur, &arc)
            {
                match id {
                    Some(c) => blocks.insert(idx, Block::Stored(c)),
                    None => blocks.remove(&idx),
                };
            }
        }
        drop(st);
        if sealed_bytes >= TRIM_AFTER {
            // The sealed blocks' memory is free now; glibc keeps freed arena memory
            // mapped (measured: RSS stayed at ~700 MiB after a random-write run).
            // SAFETY: malloc_trim only returns free heap pages to the kernel.
            unsafe {
                libc::malloc_trim(0);
            }
        }
        Ok(())
    }

    /// Make the whole working state durable; returns the new root node id.
    pub fn flush(&self) -> Result<NodeId> {
        self.flush_with(None).map(|(id, _)| id)
    }

    /// Flush, letting `extra` update the session record and add metadata ops that
    /// commit atomically with the new root (checkpoints, refs).
    pub fn flush_with(&self, extra: Option<Extra<'_>>) -> Result<(NodeId, SessionRecord)> {
        let _g = super::relock(self.flush_lock.lock());
        self.flush_locked(extra)
    }

    pub(crate) fn flush_locked(&self, extra: Option<Extra<'_>>) -> Result<(NodeId, SessionRecord)> {
        let t0 = std::time::Instant::now();
        self.seal_locked()?;
        let t_seal = t0.elapsed();
        let (root_id, mut rec) = {
            let mut st = self.lock();
            if !st.changed
                && extra.is_none()
                && let Some(r) = st.root_id
            {
                // An idle flush (the daemon's periodic one) sweeps the forgotten
                // directories no sweep has seen yet.
                st.sweep_after_flush();
                return Ok((r, self.record()));
            }
            let store = self.store().clone();
            let id = encode_tree(&mut st, &*store)?;
            let mut rec = super::relock(self.record.lock()).clone();
            rec.root = id.to_hex();
            rec.updated = Timespec::now().sec;
            rec.bytes = st.total_bytes;
            rec.inodes = st.total_inodes;
            st.root_id = Some(id);
            st.changed = false;
            st.links_dirty = false;
            (id, rec)
        };
        let t_encode = t0.elapsed();
        let mut ops = Vec::new();
        if let Some(f) = extra {
            match f(&mut rec, root_id) {
                Ok(o) => ops = o,
                Err(e) => {
                    self.lock().changed = true;
                    return Err(e);
                }
            }
        }
        ops.push(record_op(&rec));
        if let Err(e) = self.store().commit(ops) {
            // Not durable: make sure the next flush tries again.
            self.lock().changed = true;
            return Err(e);
        }
        *super::relock(self.record.lock()) = rec.clone();
        // Forgotten directories that waited for this flush can be unloaded now.
        self.lock().sweep_after_flush();
        log::debug!(
            "session {}: flush seal {:?} encode {:?} extra+commit {:?}",
            self.name(),
            t_seal,
            t_encode - t_seal,
            t0.elapsed() - t_encode
        );
        Ok((root_id, rec))
    }
}

/// Encode every dirty node (so each live directory and file has a content id again)
/// and return the root node's id. Puts objects but commits nothing: a caller that
/// needs durability commits afterwards (`changed` is left for it to clear).
pub(crate) fn encode_tree(st: &mut State, store: &dyn ObjectStore) -> Result<NodeId> {
    let root_rec = encode(st, store, 1)?;
    let mut links = Vec::new();
    let link_inos: Vec<u64> = st.links.iter().copied().collect();
    for ino in link_inos {
        if st.inodes.contains_key(&ino) {
            links.push(encode(st, store, ino)?);
        } else if let Some(r) = st.link_records.get(&ino) {
            links.push(r.clone());
        }
    }
    let root = RootNode {
        root: root_rec,
        links,
        next_ino: st.next_ino,
    };
    Ok(match st.root_id {
        Some(id) if !st.changed => id,
        _ => NodeId(store.put(ObjKind::Node, &root.encode())?),
    })
}

/// The stored length of block `idx` of a file of `size` bytes.
fn block_len(idx: u64, size: u64) -> usize {
    size.saturating_sub(idx * BLOCK_SIZE).min(BLOCK_SIZE) as usize
}

/// The bytes of block `idx` as stored: exactly its logical length, zero padded.
fn canonical_block(d: &[u8], idx: u64, size: u64) -> Vec<u8> {
    let len = size.saturating_sub(idx * BLOCK_SIZE).min(BLOCK_SIZE) as usize;
    let mut v = d[..d.len().min(len)].to_vec();
    v.resize(len, 0);
    v
}

/// Encode inode `ino` into its stored record, re-encoding its content and that of
/// every changed descendant first. Iterative (an explicit stack, children before
/// parents): a tree as deep as an agent can make it never grows the thread's stack.
fn encode(st: &mut State, store: &dyn ObjectStore, ino: u64) -> Result<Record> {
    for n in content_order(st, store, ino)? {
        encode_content(st, store, n)?;
        // Its record now names new content: the parent's leaf must be rewritten
        // (as for any changed record; see `shard_state`).
        st.get_mut(n)?.dirty = true;
    }
    take_record(st, ino)
}

/// The inodes below (and including) `ino` whose content must be re-encoded, each
/// after all of its descendants (post-order). A clean directory's subtree is skipped:
/// its content id covers every record below it (`mark_dirty` unstores ancestors).
fn content_order(st: &mut State, store: &dyn ObjectStore, ino: u64) -> Result<Vec<u64>> {
    let mut order = Vec::new();
    let mut stack = vec![(ino, false)];
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            order.push(n);
            continue;
        }
        let i = st.get(n)?;
        if i.clean_content().is_some() {
            continue;
        }
        if !matches!(i.data, Data::Dir(_)) {
            order.push(n);
            continue;
        }
        st.load_dir(store, n)?;
        stack.push((n, true));
        let Data::Dir(d) = &st.get(n)?.data else {
            unreachable!("checked above")
        };
        for &child in d.entries.as_ref().expect("dir loaded").values() {
            if st.get(child).is_ok_and(|c| !c.hardlink) {
                stack.push((child, false));
            }
        }
    }
    Ok(order)
}

/// The stored record of `ino`, whose content is clean (encoded before): marks the
/// record clean.
fn take_record(st: &mut State, ino: u64) -> Result<Record> {
    let i = st.get_mut(ino)?;
    let content = i.clean_content().ok_or_else(|| {
        crate::error::Error::corrupt(
            format!("live inode {ino}"),
            "content not encoded before its record",
        )
    })?;
    i.dirty = false;
    if i.kind == crate::tree::Kind::File {
        i.attr.blocks = i.blocks512();
    }
    Ok(i.record(ino, content))
}

/// A live shard's membership digest, and whether every inline child in it is clean
/// (then the shard encodes to the leaf cached under that digest).
fn shard_state<'a>(
    st: &State,
    part: impl Iterator<Item = (&'a [u8], u64)>,
) -> Result<([u8; 32], bool)> {
    let mut digest = ShardDigest::default();
    let mut clean = true;
    for (name, c) in part {
        let i = st.get(c)?;
        digest.add(name, c, i.kind, i.hardlink);
        clean &= i.hardlink || i.is_clean();
    }
    Ok((digest.finish(), clean))
}

/// The shards of live directory `dir` that are known to equal a stored leaf: clean
/// (every inline child clean) and with a cached membership digest. Returns (leaf id,
/// the shard's names). Same partition and digest as the sharded encode below.
pub(crate) fn clean_leaves(st: &State, dir: u64) -> Result<Vec<(NodeId, Vec<Vec<u8>>)>> {
    let Data::Dir(d) = &st.get(dir)?.data else {
        return Ok(Vec::new());
    };
    let Some(entries) = d.entries.as_ref() else {
        return Ok(Vec::new());
    };
    if d.shards.is_empty() || !crate::dirs::is_sharded_len(entries.len()) {
        return Ok(Vec::new());
    }
    let children: Vec<(&Vec<u8>, u64)> = entries.iter().map(|(k, v)| (k, *v)).collect();
    let mut out = Vec::new();
    for r in shard_ranges(children.iter().map(|(n, _)| n.as_slice())) {
        let part = &children[r];
        let (digest, clean) = shard_state(st, part.iter().map(|(n, c)| (n.as_slice(), *c)))?;
        if clean && let Some(id) = d.shards.get(&digest) {
            out.push((*id, part.iter().map(|(n, _)| (*n).clone()).collect()));
        }
    }
    Ok(out)
}

/// Encode the entries of `children` (name, ino), in order; their content is clean
/// (see [`content_order`]).
fn encode_entries(st: &mut State, children: &[(Vec<u8>, u64)]) -> Result<Vec<(Vec<u8>, Entry)>> {
    let mut out = Vec::with_capacity(children.len());
    for (name, child) in children {
        let c = st.get(*child)?;
        let e = if c.hardlink {
            Entry::HardLink {
                ino: *child,
                kind: c.kind,
            }
        } else {
            Entry::Inline(take_record(st, *child)?)
        };
        out.push((name.clone(), e));
    }
    Ok(out)
}

/// Write the content node of a dirty directory or file and remember its id. A
/// directory's children must have clean content already (not recursive).
fn encode_content(st: &mut State, store: &dyn ObjectStore, ino: u64) -> Result<Content> {
    let kind_is_dir = matches!(st.get(ino)?.data, Data::Dir(_));
    if kind_is_dir {
        st.load_dir(store, ino)?;
        let children: Vec<(Vec<u8>, u64)> = match &st.get(ino)?.data {
            Data::Dir(d) => d
                .entries
                .as_ref()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            _ => unreachable!(),
        };
        let base = match &st.get(ino)?.data {
            Data::Dir(d) => d.base,
            _ => None,
        };
        if !crate::dirs::is_sharded_len(children.len()) {
            let node = DirNode {
                entries: encode_entries(st, &children)?,
            };
            let id = NodeId(store.put_based(
                ObjKind::Node,
                &node.encode(),
                base.as_ref().map(|b| &b.0),
            )?);
            if let Data::Dir(d) = &mut st.get_mut(ino)?.data {
                d.stored = Some(id);
                d.base = None;
                d.shards.clear();
            }
            return Ok(Content::Node(id));
        }
        // A changed leaf's delta base: the old index's leaf at the same position
        // (membership changes move few names across leaves).
        let old_leaves: Vec<NodeId> = base
            .and_then(|b| store.get(ObjKind::Node, &b.0).ok())
            .and_then(|raw| DirIndex::decode(&raw).ok())
            .map(|ix| ix.shards.into_iter().map(|(_, id)| id).collect())
            .unwrap_or_default();
        // Sharded: rewrite only the leaves whose membership changed or that hold a
        // changed record; reuse the others by id.
        let old = match &mut st.get_mut(ino)?.data {
            Data::Dir(d) => std::mem::take(&mut d.shards),
            _ => unreachable!(),
        };
        let mut shards = HashMap::with_capacity(old.len() + 1);
        let mut index = DirIndex::default();
        let (mut reused, mut written) = (0usize, 0usize);
        for (pos, r) in shard_ranges(children.iter().map(|(n, _)| n.as_slice()))
            .into_iter()
            .enumerate()
        {
            let part = &children[r];
            let (digest, clean) = shard_state(st, part.iter().map(|(n, c)| (n.as_slice(), *c)))?;
            let id = match old.get(&digest) {
                Some(id) if clean => {
                    reused += 1;
                    *id
                }
                _ => {
                    written += 1;
                    let leaf = DirNode {
                        entries: encode_entries(st, part)?,
                    };
                    let hint = old_leaves.get(pos).map(|b| &b.0);
                    NodeId(store.put_based(ObjKind::Node, &leaf.encode(), hint)?)
                }
            };
            shards.insert(digest, id);
            index.shards.push((part.len() as u32, id));
        }
        log::trace!("dir {ino}: {written} shards written, {reused} reused");
        let id =
            NodeId(store.put_based(ObjKind::Node, &index.encode(), base.as_ref().map(|b| &b.0))?);
        if let Data::Dir(d) = &mut st.get_mut(ino)?.data {
            d.stored = Some(id);
            d.base = None;
            d.shards = shards;
        }
        return Ok(Content::Node(id));
    }
    // Regular file.
    st.load_file(store, ino)?;
    let i = st.get(ino)?;
    let size = i.attr.size;
    if size == 0 {
        return Ok(Content::None);
    }
    let Data::File(f) = &i.data else {
        unreachable!()
    };
    let blocks = f.blocks.as_ref().unwrap();
    let base = f.base;
    let node = if size <= INLINE_MAX {
        let mut buf = vec![0u8; size as usize];
        match blocks.get(&0) {
            Some(Block::Mem(d)) => {
                let n = d.len().min(buf.len());
                buf[..n].copy_from_slice(&d[..n]);
            }
            Some(Block::Stored(c)) => {
                let d = store.get(ObjKind::Chunk, &c.0)?;
                let n = d.len().min(buf.len());
                buf[..n].copy_from_slice(&d[..n]);
            }
            None => {}
        }
        FileNode::Inline(buf)
    } else {
        let mut list = Vec::with_capacity(blocks.len());
        let mut resealed = Vec::new();
        let mut bases: Option<HashMap<u64, ChunkId>> = None;
        for (&idx, b) in blocks {
            if idx * BLOCK_SIZE >= size {
                continue;
            }
            match b {
                Block::Stored(c) => list.push((idx, *c)),
                Block::Mem(d) => {
                    // Written after the seal pass: seal it here, under the lock.
                    let bytes = canonical_block(d, idx, size);
                    if bytes.iter().all(|&x| x == 0) {
                        continue;
                    }
                    let hint = bases
                        .get_or_insert_with(|| base_chunks(store, base, size))
                        .get(&idx)
                        .copied();
                    let c = ChunkId(store.put_based(
                        ObjKind::Chunk,
                        &bytes,
                        hint.as_ref().map(|c| &c.0),
                    )?);
                    list.push((idx, c));
                    resealed.push((idx, c));
                }
            }
        }
        if let Data::File(f) = &mut st.get_mut(ino)?.data {
            let b = f.blocks.as_mut().unwrap();
            for (idx, c) in resealed {
                b.insert(idx, Block::Stored(c));
            }
        }
        FileNode::Blocks { size, blocks: list }
    };
    let id = NodeId(store.put_based(ObjKind::Node, &node.encode(), base.as_ref().map(|b| &b.0))?);
    if let Data::File(f) = &mut st.get_mut(ino)?.data {
        f.stored = Some(id);
        f.base = None;
    }
    st.dirty_files.remove(&ino);
    Ok(Content::Node(id))
}
