//! [`PackStore`]: the on-disk object store (append-only packs + the object index in
//! the metadata store).
//!
//! Owns: the pack writer, the pending (uncommitted) index entries, the read path
//! with its checks, delta encoding, and the commit protocol. Maintenance for gc and
//! fsck ([`super::Packs`]) is in `maintain.rs`.
//!
//! Write protocol ("packs before index"): `put` appends a record to the current pack
//! and remembers its location in a pending map; `commit` fsyncs every pack written
//! since the last commit and, when a pack was created since, the `packs/` directory
//! (an error fails the commit: a pack whose directory entry is not durable is never
//! named by the index), then applies the pending index entries together with the
//! caller's metadata ops in one atomic, durable batch. So an index entry never points
//! at bytes that are not durable, and a crash loses only unreferenced tails.
//!
//! Read protocol: the index entry's lengths are bounded ([`Loc::decode`]); the record
//! header read from the pack must match the entry in id, kind, codec and both
//! lengths before its payload is decoded (so a damaged header never sizes an
//! allocation); the payload must hash to the id. Any mismatch is [`Error::Corrupt`]
//! (EIO), logged. Read fds are bounded by an LRU ([`super::fds`]); verified objects
//! are kept in two bounded caches: tree nodes and other objects in `cache`, file
//! blocks read by `read()` in `reads`.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::cache::ObjectCache;
use super::fds::PackFds;
use super::metastore::MetaStore;
use super::objects::{Fallback, Loc, ObjectStore, check_object_len};
use super::open::sync_dir;
use super::pack::{self, Codec, Kind, RecordHeader};
use super::rebuild::RebuildReport;
use super::{DELTA_MIN, PACK_TARGET_SIZE, space};
use crate::durable::{self, Scope};
use crate::error::{Error, Result};
use crate::id::ObjectId;
use crate::meta::{self, MetaOp};

pub(super) struct Writer {
    pub(super) pack: u32,
    pub(super) file: Option<Arc<File>>,
    pub(super) offset: u64,
    pub(super) unsynced: Vec<(u32, Arc<File>)>,
    /// Bytes were appended to `file` since its last fsync.
    pub(super) dirty: bool,
    /// A pack was created since the `packs/` directory was last fsync'd.
    pub(super) dir_unsynced: bool,
    /// Packs are rotated once they exceed this size ([`PACK_TARGET_SIZE`]).
    pub(super) target: u64,
}

/// Bytes of decoded file blocks kept for reads: 1/64 of RAM, 32 to 256 MiB
/// (`TREEFORK_READ_CACHE_MB` overrides it). A 4 KiB random read fetches, verifies
/// and decompresses its whole 64 KiB block, and the kernel keeps only the page it
/// asked for; this cache makes the other 15 pages of the block a memory copy when
/// asked next (measured in docs/design.md "Write path and flush").
pub fn read_cache_bytes() -> usize {
    let ram = crate::budget::ram_bytes();
    crate::budget::ram_share("TREEFORK_READ_CACHE_MB", ram, 64, 32 << 20, 256 << 20) as usize
}

/// The on-disk store: `DIR/treefork.store`, `DIR/meta/` (sled), `DIR/packs/pack-N.tfp`.
pub struct PackStore {
    pub(super) dir: PathBuf,
    pub(super) db: Box<dyn MetaStore>,
    pub(super) writer: Mutex<Writer>,
    pub(super) pending: RwLock<HashMap<ObjectId, Loc>>,
    pub(super) fds: PackFds,
    pub(super) cache: ObjectCache,
    /// File blocks read by `read()` ([`ObjectStore::get_for_read`]), apart from
    /// `cache` so a large read does not push out the tree nodes. Same invariants:
    /// verified bytes only, dropped with the object.
    pub(super) reads: ObjectCache,
    /// While a gc runs: every id `put` since it began (dedup hits included), which
    /// the sweep must keep. `gc_active` lets `put` skip the lock otherwise.
    pub(super) gc_active: AtomicBool,
    pub(super) gc_guard: Mutex<HashSet<ObjectId>>,
    pub(super) reserve: space::Reserve,
    /// Asked on a local miss (see [`super::objects::Fallback`]).
    pub(super) fallback: RwLock<Option<Arc<dyn Fallback>>>,
    /// Objects (count, raw bytes) put from the fallback since the last commit.
    pub(super) fetched: Mutex<(usize, u64)>,
}

/// Objects fetched from a fallback are committed (made a durable cache) at least
/// every this many objects...
const FETCH_BATCH_OBJECTS: usize = 64;
/// ...or this many raw bytes.
const FETCH_BATCH_BYTES: u64 = 4 << 20;

pub(super) fn pack_path(dir: &Path, n: u32) -> PathBuf {
    dir.join("packs").join(format!("pack-{n:08}.tfp"))
}

impl PackStore {
    /// Open the store at `dir`, creating it when `dir` is missing or empty.
    /// The caller must already hold the store lock (see `crate::lock`).
    pub fn open(dir: &Path) -> Result<PackStore> {
        let (db, last, _) = super::open::open(dir, false)?;
        Ok(PackStore::new(dir, Box::new(db), last))
    }

    /// Open for `fsck --repair`: a metadata database that fails its check at open
    /// (see `open`) is moved aside and rebuilt from its journal or from what it still
    /// yields (`super::rebuild`); the report of that is returned beside the store. The
    /// object index is rebuilt from the packs by the repair itself.
    pub fn open_for_repair(dir: &Path) -> Result<(PackStore, Option<RebuildReport>)> {
        let (db, last, rebuilt) = super::open::open(dir, true)?;
        Ok((PackStore::new(dir, Box::new(db), last), rebuilt))
    }

    pub(super) fn new(dir: &Path, db: Box<dyn MetaStore>, last_pack: u32) -> PackStore {
        PackStore {
            dir: dir.to_path_buf(),
            db,
            writer: Mutex::new(Writer {
                pack: last_pack,
                file: None,
                offset: 0,
                unsynced: Vec::new(),
                dirty: false,
                dir_unsynced: false,
                target: PACK_TARGET_SIZE,
            }),
            pending: RwLock::new(HashMap::new()),
            fds: PackFds::new(super::fds::DEFAULT_CAPACITY),
            cache: ObjectCache::new(64 << 20),
            reads: ObjectCache::new(read_cache_bytes()),
            gc_active: AtomicBool::new(false),
            gc_guard: Mutex::new(HashSet::new()),
            reserve: space::Reserve::new(dir),
            fallback: RwLock::new(None),
            fetched: Mutex::new((0, 0)),
        }
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of pack `n`.
    pub fn pack_path(&self, n: u32) -> PathBuf {
        pack_path(&self.dir, n)
    }

    /// Append one whole record to the open pack (rotating first when needed), within
    /// the space reserve's `tier`; a failed write is cut off. Called with the writer
    /// lock. Returns (pack, offset) of the record.
    pub(super) fn append(
        &self,
        w: &mut Writer,
        rec: &[u8],
        tier: space::Tier,
    ) -> Result<(u32, u64)> {
        if w.file.is_none() || w.offset >= w.target {
            self.rotate(w)?;
        }
        let file = w.file.clone().unwrap();
        self.reserve.append(&self.dir, rec.len() as u64, tier)?;
        // Positional write at our own offset: a failed (e.g. ENOSPC) partial write is
        // simply overwritten by the next record; cut it off now to free its space.
        if let Err(e) = file.write_all_at(rec, w.offset) {
            let _ = file.set_len(w.offset);
            self.reserve.forget();
            return Err(Error::io(pack_path(&self.dir, w.pack), e));
        }
        let at = (w.pack, w.offset);
        w.offset += rec.len() as u64;
        w.dirty = true;
        Ok(at)
    }

    /// Start a new pack file (called with the writer lock held). Its directory entry
    /// is made durable by the next commit, before any index entry names it.
    fn rotate(&self, w: &mut Writer) -> Result<()> {
        let n = w.pack + 1;
        let p = pack_path(&self.dir, n);
        let mut f = OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(&p)
            .map_err(|e| Error::io(&p, e))?;
        if let Err(e) = f.write_all(&pack::pack_header()) {
            // Do not leave the number taken (the next rotate would fail with EEXIST).
            let _ = std::fs::remove_file(&p);
            return Err(Error::io(&p, e));
        }
        if let Some(old) = w.file.take() {
            w.unsynced.push((w.pack, old));
        }
        w.pack = n;
        w.file = Some(Arc::new(f));
        w.offset = pack::PACK_HEADER_LEN;
        w.dir_unsynced = true;
        Ok(())
    }

    /// Keep at most `n` pack read descriptors open ([`super::fds`]).
    pub fn limit_pack_fds(&self, n: usize) {
        self.fds.set_capacity(n);
    }

    /// Pack read descriptors the store may still open (its bounded LRU's
    /// headroom, [`super::fds`]).
    pub fn pack_fds_unopened(&self) -> usize {
        self.fds.headroom()
    }

    /// The read fd of pack `n` (bounded LRU; see [`super::fds`]).
    pub(super) fn reader(&self, n: u32) -> Result<Arc<File>> {
        self.fds.get(n, || pack_path(&self.dir, n))
    }

    /// While a gc runs, remember `id` as put (see [`super::Packs::gc_begin`]).
    pub(super) fn guard(&self, id: &ObjectId) {
        if self.gc_active.load(Ordering::SeqCst) {
            self.gc_guard.lock().unwrap().insert(*id);
        }
    }

    /// The uncommitted puts and their locations.
    pub(super) fn pending_snapshot(&self) -> Vec<(ObjectId, Loc)> {
        self.pending
            .read()
            .unwrap()
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect()
    }

    pub(super) fn lookup(&self, id: &ObjectId) -> Result<Option<Loc>> {
        if let Some(l) = self.pending.read().unwrap().get(id) {
            return Ok(Some(*l));
        }
        match self.db.get(&meta::object_key(id))? {
            Some(v) => Ok(Some(Loc::decode(&v)?)),
            None => Ok(None),
        }
    }

    pub(super) fn read_object(&self, kind: Kind, id: &ObjectId) -> Result<Vec<u8>> {
        let (h, buf) = self.read_record(kind, id)?;
        self.decode_record(&h, &buf[pack::RECORD_HEADER_LEN..])
    }

    /// Decode (and verify) a record's payload; a delta's base is read and verified
    /// first, and must itself be stored whole.
    pub(super) fn decode_record(&self, h: &RecordHeader, payload: &[u8]) -> Result<Vec<u8>> {
        let Some(b) = pack::delta_base(h, payload) else {
            return pack::decode_payload(h, payload);
        };
        let what = || format!("{:?} object {}", h.kind, h.id.short());
        let base = match self.cache.get(&b) {
            Some(v) => v,
            None => {
                let (bh, buf) = self.read_record(h.kind, &b).map_err(|e| match e {
                    Error::Missing(_) => {
                        Error::corrupt(what(), format!("its delta base {} is missing", b.short()))
                    }
                    e => e,
                })?;
                if bh.codec == Codec::Delta {
                    return Err(Error::corrupt(what(), "its delta base is itself a delta"));
                }
                let raw = Arc::new(pack::decode_payload(&bh, &buf[pack::RECORD_HEADER_LEN..])?);
                if h.kind == Kind::Node {
                    self.cache.insert(b, raw.clone());
                }
                raw
            }
        };
        pack::decode_payload_with(h, payload, Some(&base))
    }

    /// Read an object's whole record; its header must match the index entry (see the
    /// module docs) before anything is decoded.
    fn read_record(&self, kind: Kind, id: &ObjectId) -> Result<(RecordHeader, Vec<u8>)> {
        self.read_record_loc(kind, id).map(|(h, buf, _)| (h, buf))
    }

    /// [`read_record`](Self::read_record), also returning the location read.
    fn read_record_loc(&self, kind: Kind, id: &ObjectId) -> Result<(RecordHeader, Vec<u8>, Loc)> {
        let what = || format!("{kind:?} object {}", id.short());
        let mut loc = self.lookup(id)?.ok_or_else(|| Error::Missing(what()))?;
        let f = match self.reader(loc.pack) {
            Ok(f) => f,
            // A gc moved the object and removed its pack between our lookup and open.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                loc = self.lookup(id)?.ok_or_else(|| Error::Missing(what()))?;
                self.reader(loc.pack)?
            }
            Err(e) => return Err(e),
        };
        // `loc`'s lengths are bounded by `Loc::decode`.
        let mut buf = vec![0u8; loc.record_len() as usize];
        f.read_exact_at(&mut buf, loc.offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::corrupt(what(), "pack truncated")
            } else {
                Error::io(pack_path(&self.dir, loc.pack), e)
            }
        })?;
        let h = RecordHeader::decode(&buf)?;
        if h.id != *id
            || h.kind != kind
            || h.kind != loc.kind
            || h.codec != loc.codec
            || h.stored_len != loc.stored_len
            || h.raw_len != loc.raw_len
        {
            log::error!(
                "{}: record header in pack {} at offset {} does not match the index entry (header {:?} {:?} raw {} stored {}; index {:?} {:?} raw {} stored {})",
                what(),
                loc.pack,
                loc.offset,
                h.kind,
                h.codec,
                h.raw_len,
                h.stored_len,
                loc.kind,
                loc.codec,
                loc.raw_len,
                loc.stored_len
            );
            return Err(Error::corrupt(what(), "record header does not match index"));
        }
        Ok((h, buf, loc))
    }

    /// `id` from either cache (a block read and then modified — an editor's save,
    /// a database page — is often still in the read cache), else read; put in the
    /// read cache when `keep` (see [`ObjectStore::get_for_read`]).
    fn get_keeping(&self, kind: Kind, id: &ObjectId, keep: bool) -> Result<Arc<Vec<u8>>> {
        if let Some(v) = self.cache.get(id).or_else(|| self.reads.get(id)) {
            return Ok(v);
        }
        let raw = Arc::new(self.read_or_fetch(kind, id)?);
        if keep {
            self.reads.insert(*id, raw.clone());
        }
        Ok(raw)
    }

    /// Read `id`, asking the fallback (if any) when it is not stored locally: the
    /// fetched objects (verified again here: never wrong bytes) are put into the
    /// store as a cache and committed in batches; a miss the fallback cannot
    /// answer stays [`Error::Missing`] and is not remembered.
    fn read_or_fetch(&self, kind: Kind, id: &ObjectId) -> Result<Vec<u8>> {
        let missing = match self.read_object(kind, id) {
            Err(Error::Missing(what)) => what,
            other => return other,
        };
        let Some(fb) = self.fallback.read().unwrap().clone() else {
            return Err(Error::Missing(missing));
        };
        let Some(objects) = fb.fetch(kind, id)? else {
            return Err(Error::Missing(missing));
        };
        let mut found = None;
        let (mut n, mut bytes) = (0usize, 0u64);
        for (k, oid, raw) in objects {
            if k.hash(&raw) != oid {
                log::error!(
                    "{k:?} object {} from a remote does not match its id: not used",
                    oid.short()
                );
                if oid == *id {
                    return Err(Error::corrupt(
                        format!("{k:?} object {}", oid.short()),
                        "fetched bytes do not match the id",
                    ));
                }
                continue;
            }
            self.put(k, &raw)?;
            n += 1;
            bytes += raw.len() as u64;
            if oid == *id && k == kind {
                found = Some(raw);
            }
        }
        let due = {
            let mut f = self.fetched.lock().unwrap();
            f.0 += n;
            f.1 += bytes;
            f.0 >= FETCH_BATCH_OBJECTS || f.1 >= FETCH_BATCH_BYTES
        };
        if due {
            self.commit_fetched()?;
        }
        found.ok_or(Error::Missing(missing))
    }

    /// Make the objects fetched from the fallback so far durable (a crash before
    /// this only loses cache).
    pub fn commit_fetched(&self) -> Result<()> {
        *self.fetched.lock().unwrap() = (0, 0);
        self.commit(Vec::new())
    }

    /// The base a delta object names (reads its first payload bytes).
    pub(super) fn delta_base_of(&self, id: &ObjectId, loc: &Loc) -> Result<ObjectId> {
        let what = || format!("{:?} object {}", loc.kind, id.short());
        let mut b = [0u8; pack::DELTA_BASE_LEN];
        self.reader(loc.pack)?
            .read_exact_at(&mut b, loc.offset + pack::RECORD_HEADER_LEN as u64)
            .map_err(|e| Error::corrupt(what(), format!("delta base id unreadable: {e}")))?;
        Ok(ObjectId(b))
    }

    /// How to store `raw`: a delta against `hint` (or against the whole object that
    /// `hint` is a delta of) when that takes at most half the bytes of compressing
    /// `raw` on its own, else [`pack::compress`].
    ///
    /// A delta of at most 1/8 of `raw` is taken without compressing `raw` whole
    /// (zstd level 1 does not get real data below 1/4), which keeps a flush of small
    /// edits at one compression per object.
    fn encode(&self, kind: Kind, raw: &[u8], hint: Option<&ObjectId>) -> (Codec, Vec<u8>) {
        let delta = hint
            .filter(|_| raw.len() >= DELTA_MIN)
            .and_then(|h| self.delta_against(kind, raw, h));
        match delta {
            Some(d) if d.len() * 8 <= raw.len() => (Codec::Delta, d),
            Some(d) => {
                let plain = pack::compress(raw);
                if d.len() * 2 <= plain.1.len() {
                    (Codec::Delta, d)
                } else {
                    plain
                }
            }
            None => pack::compress(raw),
        }
    }

    fn delta_against(&self, kind: Kind, raw: &[u8], hint: &ObjectId) -> Option<Vec<u8>> {
        // Guard each id before looking it up, as `put` does: a concurrent sweep then
        // either keeps the base or has already dropped it (and we store `raw` whole).
        self.guard(hint);
        // A base is only ever of the same kind as its deltas (their ids hash apart).
        let loc = self.lookup(hint).ok()?.filter(|l| l.kind == kind)?;
        let base = if loc.codec == Codec::Delta {
            let b = self.delta_base_of(hint, &loc).ok()?;
            self.guard(&b);
            let l = self.lookup(&b).ok()??;
            (l.codec != Codec::Delta && l.kind == kind).then_some(b)?
        } else {
            *hint
        };
        let base_raw = match self.cache.get(&base) {
            Some(v) => v,
            None => Arc::new(self.read_object(kind, &base).ok()?),
        };
        pack::compress_delta(raw, &base, &base_raw)
    }
}

impl ObjectStore for PackStore {
    fn put(&self, kind: Kind, raw: &[u8]) -> Result<ObjectId> {
        self.put_based(kind, raw, None)
    }

    fn put_based(&self, kind: Kind, raw: &[u8], base: Option<ObjectId>) -> Result<ObjectId> {
        check_object_len(kind, raw.len())?;
        let id = kind.hash(raw);
        // Guard before the dedup lookup: a sweep either sees this id in the guard or
        // has already removed the index entry (and then this put writes a new copy).
        self.guard(&id);
        if self.lookup(&id)?.is_some() {
            return Ok(id);
        }
        let (codec, payload) = self.encode(kind, raw, base.filter(|b| *b != id).as_ref());
        // Every codec stores at most `raw`'s length; checked, not assumed.
        check_object_len(kind, payload.len())?;
        let header = RecordHeader {
            kind,
            codec,
            raw_len: raw.len() as u32,
            stored_len: payload.len() as u32,
            id,
        };
        let mut rec = Vec::with_capacity(pack::RECORD_HEADER_LEN + payload.len());
        rec.extend_from_slice(&header.encode());
        rec.extend_from_slice(&payload);
        let mut w = self.writer.lock().unwrap();
        // Re-check under the writer lock: another thread may have written it meanwhile.
        if self.pending.read().unwrap().contains_key(&id) {
            return Ok(id);
        }
        let tier = match kind {
            Kind::Chunk => space::Tier::Write,
            Kind::Node => space::Tier::Tree,
        };
        let (pack, offset) = self.append(&mut w, &rec, tier)?;
        let loc = Loc {
            kind,
            codec,
            pack,
            offset,
            stored_len: header.stored_len,
            raw_len: header.raw_len,
        };
        self.pending.write().unwrap().insert(id, loc);
        Ok(id)
    }

    fn get(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>> {
        if let Some(v) = self.cache.get(id) {
            return Ok(v);
        }
        let raw = Arc::new(self.read_or_fetch(kind, id)?);
        self.cache.insert(*id, raw.clone());
        Ok(raw)
    }

    fn get_decoded(
        &self,
        kind: Kind,
        id: &ObjectId,
        decode: &dyn Fn(&[u8]) -> Result<super::cache::Decoded>,
    ) -> Result<super::cache::Decoded> {
        if let Some(d) = self.cache.get_decoded(id) {
            return Ok(d);
        }
        let raw = self.get(kind, id)?;
        let d = decode(&raw)?;
        // The decoded form is counted as twice the bytes (names and records
        // in their own allocations).
        self.cache.set_decoded(id, d.clone(), 2 * raw.len());
        Ok(d)
    }

    fn get_uncached(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>> {
        self.get_keeping(kind, id, false)
    }

    fn get_for_read(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>> {
        self.get_keeping(kind, id, true)
    }

    fn stored_record(&self, id: &ObjectId) -> Result<Option<(Loc, Vec<u8>)>> {
        let Some(v) = self.db.get(&meta::object_key(id))? else {
            return Ok(None);
        };
        let loc = Loc::decode(&v)?;
        let (_, buf, at) = self.read_record_loc(loc.kind, id)?;
        Ok(Some((at, buf[pack::RECORD_HEADER_LEN..].to_vec())))
    }

    fn contains(&self, id: &ObjectId) -> Result<bool> {
        Ok(self.lookup(id)?.is_some())
    }

    fn commit(&self, mut ops: Vec<MetaOp>) -> Result<()> {
        self.reserve.commit(&self.dir)?;
        let mut w = self.writer.lock().unwrap();
        let current = w.file.iter().filter(|_| w.dirty);
        for f in w.unsynced.iter().map(|(_, f)| f).chain(current) {
            durable::sync_data(f, Scope::Store)
                .map_err(|e| Error::io(self.dir.join("packs"), e))?;
        }
        // A pack created since the last commit: its directory entry must be durable
        // before the index names it.
        if w.dir_unsynced {
            sync_dir(&self.dir.join("packs"))?;
            w.dir_unsynced = false;
        }
        let pending = self.pending_snapshot();
        for (id, loc) in &pending {
            ops.push(MetaOp::Put(meta::object_key(id), loc.encode()));
        }
        let t = std::time::Instant::now();
        self.db.apply(ops)?;
        log::debug!(
            "commit: {} index entries, metadata batch+flush {:?}",
            pending.len(),
            t.elapsed()
        );
        w.unsynced.clear();
        w.dirty = false;
        let mut p = self.pending.write().unwrap();
        for (id, _) in pending {
            p.remove(&id);
        }
        Ok(())
    }

    fn meta(&self) -> &dyn MetaStore {
        &*self.db
    }

    fn space(&self) -> (u64, u64, u64) {
        super::statvfs_bytes(&self.dir).unwrap_or((0, 0, 0))
    }

    fn dir(&self) -> Option<&Path> {
        Some(&self.dir)
    }

    fn read_cache(&self) -> (usize, usize) {
        (self.reads.capacity(), self.reads.held())
    }

    fn set_read_cache(&self, bytes: usize) {
        self.reads.set_capacity(bytes);
    }

    fn set_fallback(&self, fallback: Option<Arc<dyn Fallback>>) {
        *self.fallback.write().unwrap() = fallback;
    }

    fn fallback(&self) -> Option<Arc<dyn Fallback>> {
        self.fallback.read().unwrap().clone()
    }
}
