//! Turning the live table back into immutable tree nodes.
//!
//! `seal` moves written blocks into the chunk store (base-node reads for delta
//! hints, hashing and compression run outside the table lock); `flush` then
//! re-encodes only dirty paths bottom-up (`session::encode`: planned under the lock,
//! encoded, compressed and put outside it, published under it with a check that
//! nothing planned changed meanwhile), writes the new root node and commits the
//! session record naming it, atomically with the index entries of everything
//! written (store "packs before index"). Cost is proportional to what changed since
//! the last flush, never to tree size (a big file: to its changed block-map leaves).
//! Seal and flush are serialized by the session's flush lock (the gc barrier).
//! An op's batch (`super::Txn`) flushes in two halves: `prepare_locked` encodes and
//! publishes without committing, and the batch commits the record with the rest
//! of the op (or gives the flush up: `abandon_prepared`, the next flush writes it).
//! Also owns the pin scopes ([`Session::pin_roots`]): while one is open, every root
//! a flush returns stays a gc root (reported by `live_ids`) until the last closes.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::inode::{Block, Data};
use super::{Session, SessionRecord, encode, record_op};
use crate::meta::MetaOp;

use std::collections::{BTreeSet, HashMap};

use crate::error::Result;
use crate::id::{ChunkId, NodeId, ObjectId};
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{BLOCK_SIZE, FileNode, INLINE_MAX, Timespec};

pub(crate) use super::encode::clean_leaves;

/// Callback of [`Session::flush_with`]: adjust the record for the new root and return
/// extra ops to commit with it.
pub type Extra<'a> = &'a mut dyn FnMut(&mut SessionRecord, NodeId) -> Result<Vec<MetaOp>>;

/// Seals of at least this many bytes hand freed memory back to the kernel.
const TRIM_AFTER: usize = 8 << 20;

/// One block to seal: (ino, block index, the block as in the table, its stored
/// length): the stored bytes are the block's first `len` bytes, zero-padded when the
/// block is shorter. Last: the file's base node, whose chunk at this index is a
/// delta-base hint (small files only; read outside the lock).
type SealWork = (u64, u64, Arc<Vec<u8>>, usize, Option<NodeId>);

/// Files up to this size store a changed block as a delta of the block it replaced
/// (source files, configs: an edit then costs bytes, not the file); larger files
/// (databases, images, benchmark data) keep every chunk whole, so that a random read
/// stays one record and a rewrite costs no extra read of the old block.
pub(super) const DELTA_FILE_MAX: u64 = 4 * BLOCK_SIZE;

/// The chunks of a small file's base node, by block index (see [`DELTA_FILE_MAX`]).
pub(super) fn base_chunks(
    store: &dyn ObjectStore,
    base: Option<NodeId>,
    size: u64,
) -> HashMap<u64, ChunkId> {
    let Some(b) = base.filter(|_| size <= DELTA_FILE_MAX) else {
        return HashMap::new();
    };
    match store
        .get(ObjKind::Node, &b.into())
        .ok()
        .and_then(|raw| FileNode::decode(&raw).ok())
    {
        Some(FileNode::Blocks { blocks, .. }) => blocks.into_iter().collect(),
        _ => HashMap::new(),
    }
}

/// A pin scope of a session ([`Session::pin_roots`]); closes on drop.
pub struct RootPins<'a>(&'a Session);

impl Drop for RootPins<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.pin_scopes -= 1;
        if st.pin_scopes == 0 {
            st.pinned.clear();
        }
    }
}

impl Session {
    /// Open a pin scope: until it closes, every root a flush returns (even an
    /// unchanged one) stays a gc root (`live_ids`). An operation holds one from
    /// before its first flush until its record is committed: the record names the
    /// roots it flushed (its views), and between that flush and that commit a root
    /// may be named by nothing else (replaced by a checkout's graft, or by a newer
    /// flush of concurrent writes). gc reads the live tables before and after the
    /// durable roots, so a root is marked through the pin or through the record.
    pub fn pin_roots(&self) -> RootPins<'_> {
        self.lock().pin_scopes += 1;
        RootPins(self)
    }

    /// Return once no seal or flush of this session is in progress (gc barrier:
    /// every object they put is then reachable from the live table or the record).
    pub fn flush_barrier(&self) {
        drop(super::relock(self.flush_lock.lock()));
    }

    /// Seal written blocks of large files into chunks. Not durable by itself.
    pub fn seal(&self) -> Result<()> {
        let _g = super::relock(self.flush_lock.lock());
        self.seal_locked()
    }

    /// Seal unless a seal or flush is already running (it seals what it finds; the
    /// writer goes on instead of queueing behind it and holding a FUSE thread, so
    /// other requests of the mount keep being served). Writers block in
    /// [`seal`](Self::seal) only past twice the threshold (see `Session::write`).
    pub(crate) fn try_seal(&self) -> Result<()> {
        self.try_seal_now().map(|_| ())
    }

    /// [`try_seal`](Self::try_seal) for the daemon-wide budget's sealer: whether
    /// it sealed (false: a seal or flush was running).
    pub(crate) fn try_seal_now(&self) -> Result<bool> {
        let _g = match self.flush_lock.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::WouldBlock) => return Ok(false),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        };
        self.seal_locked().map(|()| true)
    }

    /// Charge `n` bytes of new unsealed blocks to the daemon-wide budget; returns
    /// this session's charge after it.
    pub(crate) fn charge(&self, n: u64) -> u64 {
        let before = self.charged.fetch_add(n, Ordering::Relaxed);
        crate::budget::unsealed::ledger().grew(before, n);
        before + n
    }

    /// Seal, then give back to the budget what was charged when the seal took its
    /// snapshot (those blocks are stored now, or freed; a failed seal keeps its
    /// charge). Small files' blocks (inline, at most 4 KiB each) are not sealed but
    /// encoded by the next flush; their charge is given back here too.
    fn seal_locked(&self) -> Result<()> {
        let covered = self.seal_blocks()?;
        let after = self.charged.fetch_sub(covered, Ordering::Relaxed) - covered;
        crate::budget::unsealed::ledger().released(covered, after);
        Ok(())
    }

    /// The seal; returns this session's charge as of its snapshot (read under the
    /// table lock, where writers charge, so a write is wholly before or after it).
    fn seal_blocks(&self) -> Result<u64> {
        self.dirty_bytes.store(0, Ordering::Relaxed);
        self.dirty_fresh.store(0, Ordering::Relaxed);
        let store = self.store();
        let covered;
        let work: Vec<SealWork> = {
            let st = self.lock();
            covered = self.charged.load(Ordering::Relaxed);
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
                let base = f.base.filter(|_| size <= DELTA_FILE_MAX);
                for (&idx, b) in f.blocks.iter().flatten() {
                    if let Block::Mem(d) = b {
                        w.push((ino, idx, d.clone(), block_len(idx, size), base));
                    }
                }
            }
            w
        };
        // Delta hints of small files: their base nodes are read here, unlocked.
        let mut hints: HashMap<(u64, NodeId), HashMap<u64, ChunkId>> = HashMap::new();
        for (ino, _, _, _, base) in &work {
            if let Some(b) = base {
                hints
                    .entry((*ino, *b))
                    .or_insert_with(|| base_chunks(store.as_ref(), Some(*b), 0));
            }
        }
        if work.is_empty() {
            return Ok(covered);
        }
        let sealed_bytes: usize = work.iter().map(|w| w.3).sum();
        // Hash + compress on every core; only the pack append is serialized.
        let seal_one = |(ino, idx, arc, len, base): SealWork| {
            let base = base.and_then(|b| hints.get(&(ino, b))?.get(&idx).copied());
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
                Some(
                    store
                        .put_based(ObjKind::Chunk, &bytes, base.map(ObjectId::from))?
                        .chunk(),
                )
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
                // Counted as new data: the retry comes at the smaller threshold.
                self.dirty_bytes
                    .fetch_add(sealed_bytes as u64, Ordering::Relaxed);
                self.dirty_fresh
                    .fetch_add(sealed_bytes as u64, Ordering::Relaxed);
                return Err(e);
            }
        };
        let mut st = self.lock();
        let mut spent = Vec::with_capacity(sealed.len());
        for (ino, idx, arc, id) in sealed {
            spent.push(arc.clone());
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
        // The buffers no one else holds any more go back to the block pool (the
        // next writes reuse them without faulting pages in); the rest is freed.
        spent
            .into_iter()
            .filter_map(|a| Arc::try_unwrap(a).ok())
            .for_each(super::bufpool::give);
        if sealed_bytes >= TRIM_AFTER {
            // The sealed blocks' memory is free now; glibc keeps freed arena memory
            // mapped (measured: RSS stayed at ~700 MiB after a random-write run).
            // SAFETY: malloc_trim only returns free heap pages to the kernel.
            unsafe {
                libc::malloc_trim(0);
            }
        }
        Ok(covered)
    }

    /// Make the whole working state durable; returns the new root node id.
    ///
    /// Right after a whole-tree graft, with nothing written since, the committed
    /// record already names a tree equal to the live one in content (the graft's
    /// target): that is the root, and nothing is encoded ([`Self::flush_idle`]
    /// and the next flush with a write to save encode the renumbered inodes).
    pub fn flush(&self) -> Result<NodeId> {
        self.flush_with(None).map(|(id, _)| id)
    }

    /// The daemon's periodic flush: as [`flush`](Self::flush), but a fresh graft
    /// is encoded too, off any operation's path, so that later grafts and sweeps
    /// find its directories stored.
    pub fn flush_idle(&self) -> Result<NodeId> {
        let _g = super::relock(self.flush_lock.lock());
        self.flush_encoded(None).map(|(id, _)| id)
    }

    /// `rec_root` when it is the target of the last whole-tree graft and nothing
    /// was written since: the live tree equals it in content.
    pub(crate) fn grafted_root(&self, rec_root: NodeId) -> Option<NodeId> {
        let st = self.lock();
        match st.graft_mark {
            Some((generation, target)) if generation == st.generation && target == rec_root => {
                Some(target)
            }
            _ => None,
        }
    }

    /// Flush, letting `extra` update the session record and add metadata ops that
    /// commit atomically with the new root (checkpoints, refs).
    pub fn flush_with(&self, extra: Option<Extra<'_>>) -> Result<(NodeId, SessionRecord)> {
        let _g = super::relock(self.flush_lock.lock());
        self.flush_locked(extra)
    }

    /// [`flush_with`](Self::flush_with), the flush lock held: the grafted target
    /// when the live tree still equals it (see [`flush`](Self::flush)), else an
    /// encode.
    pub(crate) fn flush_locked(&self, extra: Option<Extra<'_>>) -> Result<(NodeId, SessionRecord)> {
        // Only the root is read on the way to an encode (fsync's path).
        let rec_root = super::relock(self.record.lock()).root;
        let Some(target) = self.grafted_root(rec_root) else {
            return self.flush_encoded(extra);
        };
        let mut rec = self.record();
        let Some(f) = extra else {
            return Ok((target, rec));
        };
        rec.updated = Timespec::now().sec;
        let ops = f(&mut rec, target)?;
        self.commit_prepared(rec.clone(), Default::default(), ops)?;
        Ok((target, rec))
    }

    fn flush_encoded(&self, extra: Option<Extra<'_>>) -> Result<(NodeId, SessionRecord)> {
        let t0 = std::time::Instant::now();
        let Some(p) = self.prepare_locked(extra.is_some())? else {
            return Ok((self.lock().root_id.expect("flushed"), self.record()));
        };
        let t_encode = t0.elapsed();
        let Prepared {
            root: root_id,
            mut rec,
            touched,
        } = p;
        let mut ops = Vec::new();
        if let Some(f) = extra {
            match f(&mut rec, root_id) {
                Ok(o) => ops = o,
                Err(e) => {
                    self.abandon_prepared(touched);
                    return Err(e);
                }
            }
        }
        self.commit_prepared(rec.clone(), touched, ops)?;
        log::debug!(
            "session {}: flush encode {:?} extra+commit {:?}",
            self.name(),
            t_encode,
            t0.elapsed() - t_encode
        );
        Ok((root_id, rec))
    }

    /// Seal and encode the live table and publish the new root in it, without
    /// committing (the flush lock held): the caller commits the returned record
    /// with [`commit_prepared`](Self::commit_prepared) in its own batch, or gives
    /// it up with [`abandon_prepared`](Self::abandon_prepared) (the next flush
    /// then writes it again). `None` when nothing changed since the last flush and
    /// `force` is false (an idle flush: it sweeps what waited for one).
    pub(crate) fn prepare_locked(&self, force: bool) -> Result<Option<Prepared>> {
        let t0 = std::time::Instant::now();
        self.seal_locked()?;
        let t_seal = t0.elapsed();
        let store = self.store().clone();
        let planned = {
            let mut st = self.lock();
            let dropped = st.drop_idle_maps();
            if dropped > 0 {
                log::debug!("session {}: dropped {dropped} idle block maps", self.name());
            }
            if !st.changed
                && let Some(r) = st.root_id
            {
                if !force {
                    // An idle flush (the daemon's periodic one) sweeps the
                    // forgotten directories no sweep has seen yet.
                    st.sweep_after_flush();
                    st.note_root(r);
                    return Ok(None);
                }
                None
            } else {
                Some(encode::plan(&mut st, &*store)?)
            }
        };
        // Encoding, compression, deltas and puts run outside the table lock.
        let encoded = planned.as_ref().map(|p| encode::encode(p, &*store));
        let mut st = self.lock();
        if let (Some(p), Some(enc)) = (&planned, encoded) {
            match enc {
                Ok(enc) => encode::publish(&mut st, p, enc),
                Err(e) => {
                    encode::abandon(&mut st, p);
                    return Err(e);
                }
            }
        }
        let id = st.root_id.expect("a flushed session has a root");
        st.note_root(id);
        let mut rec = super::relock(self.record.lock()).clone();
        rec.root = id;
        rec.updated = Timespec::now().sec;
        rec.bytes = st.total_bytes;
        rec.inodes = st.total_inodes;
        // After the publish: every change in this root had noted its path.
        let touched = self.take_touched(&mut st);
        log::trace!("session {}: seal {t_seal:?}", self.name());
        Ok(Some(Prepared {
            root: id,
            rec,
            touched,
        }))
    }

    /// Commit `rec` (the session record), the touched paths `touched` and `ops`
    /// in one batch; the in-memory record follows only once it is durable. On
    /// failure the flush is given up ([`abandon_prepared`](Self::abandon_prepared)).
    pub(crate) fn commit_prepared(
        &self,
        rec: SessionRecord,
        touched: BTreeSet<Vec<u8>>,
        mut ops: Vec<MetaOp>,
    ) -> Result<()> {
        ops.push(record_op(&rec));
        ops.extend(crate::lifecycle::touched::add_ops(
            self.name(),
            touched.iter().map(Vec::as_slice),
        ));
        if let Err(e) = self.store().commit(ops) {
            self.abandon_prepared(touched);
            return Err(e);
        }
        self.touched_durable(&touched);
        *super::relock(self.record.lock()) = rec;
        // Forgotten directories that waited for this flush can be unloaded now.
        self.lock().sweep_after_flush();
        Ok(())
    }

    /// A prepared flush that will not be committed: the next flush writes the
    /// tree again and records its touched paths.
    pub(crate) fn abandon_prepared(&self, touched: BTreeSet<Vec<u8>>) {
        self.lock().changed = true;
        self.untake_touched(touched);
    }
}

/// A flush encoded and published in the live table, not committed yet (see
/// [`Session::prepare_locked`]).
pub(crate) struct Prepared {
    /// The new root.
    pub root: NodeId,
    /// The session record naming it (and the table's usage).
    pub rec: SessionRecord,
    /// The paths changed since the last flush.
    pub touched: BTreeSet<Vec<u8>>,
}

/// The stored length of block `idx` of a file of `size` bytes.
fn block_len(idx: u64, size: u64) -> usize {
    size.saturating_sub(idx * BLOCK_SIZE).min(BLOCK_SIZE) as usize
}

/// The bytes of block `idx` as stored: exactly its logical length, zero padded.
pub(super) fn canonical_block(d: &[u8], idx: u64, size: u64) -> Vec<u8> {
    let len = size.saturating_sub(idx * BLOCK_SIZE).min(BLOCK_SIZE) as usize;
    let mut v = d[..d.len().min(len)].to_vec();
    v.resize(len, 0);
    v
}

impl crate::budget::unsealed::Holder for Session {
    fn charged(&self) -> u64 {
        self.charged.load(Ordering::Relaxed)
    }

    fn seal_for_budget(&self) -> Result<bool> {
        self.try_seal_now()
    }

    fn holder_name(&self) -> String {
        self.name.clone()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Whatever it still holds is freed with it.
        let n = self.charged.swap(0, Ordering::Relaxed);
        crate::budget::unsealed::ledger().released(n, 0);
    }
}
