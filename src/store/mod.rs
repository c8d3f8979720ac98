//! The content-addressed object store.
//!
//! Owns: object bytes (file chunks and tree nodes) and the metadata database that
//! indexes them. [`ObjectStore`] is the trait every layer above uses; [`PackStore`] is
//! the on-disk implementation (append-only packs + sled index), [`MemStore`] the
//! in-memory twin for tests.
//!
//! Write protocol ("packs before index"): `put` appends a record to the current pack
//! and remembers its location in a pending map; `commit` fdatasyncs every pack written
//! since the last commit, then applies the pending index entries together with the
//! caller's metadata ops in one atomic sled batch that is durable when it returns
//! (`MetaDb::apply` syncs sled's files itself). A new pack's directory entry is synced
//! before the pack takes a record; every sync goes through `crate::durable`. So an
//! index entry never points at bytes that are not durable, and a crash or power cut
//! loses only unreferenced tails.
//! Every `get` verifies the object's hash; a mismatch is [`Error::Corrupt`] (EIO).
//!
//! Deltas: [`ObjectStore::put_based`] may store an object as a delta of an earlier
//! version (pack codec 2). Invariants: a delta's base is stored whole (reads take at
//! most two records); a put guards the base's id before looking it up (so a
//! concurrent gc keeps it or the object is stored whole); a sweep keeps the base of
//! every kept, guarded or pending delta.

pub mod cache;
pub mod pack;
pub mod space;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::durable::{self, Scope};
use crate::error::{Error, Result};
use crate::meta::{self, MetaDb, MetaOp};
use cache::ObjectCache;
use pack::RecordHeader;
pub use pack::{Codec, Kind};

/// What every layer above needs from a store of objects plus metadata.
pub trait ObjectStore: Send + Sync {
    /// Store `raw` (deduplicated); returns its id. Not durable until [`commit`](Self::commit).
    fn put(&self, kind: Kind, raw: &[u8]) -> Result<[u8; 32]>;
    /// Like [`put`](Self::put), with a hint: `base` is an earlier version of the same
    /// content (same kind), which the store may use to keep only the difference.
    /// Stores without deltas ignore it.
    fn put_based(&self, kind: Kind, raw: &[u8], base: Option<&[u8; 32]>) -> Result<[u8; 32]> {
        let _ = base;
        self.put(kind, raw)
    }
    /// Read and verify an object.
    fn get(&self, kind: Kind, id: &[u8; 32]) -> Result<Arc<Vec<u8>>>;
    /// Like [`get`](Self::get), without adding the object to a cache (for reads whose
    /// result is about to be replaced, like a block read to be rewritten).
    fn get_uncached(&self, kind: Kind, id: &[u8; 32]) -> Result<Arc<Vec<u8>>> {
        self.get(kind, id)
    }
    /// Whether the object is present (durable or pending).
    fn contains(&self, id: &[u8; 32]) -> Result<bool>;
    /// Make every put durable, then apply `ops` atomically and durably.
    fn commit(&self, ops: Vec<MetaOp>) -> Result<()>;
    /// Read a metadata key.
    fn meta_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Scan metadata keys by prefix.
    fn meta_scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Free space of the backing filesystem, for statfs: (total, free, avail) bytes.
    fn space(&self) -> (u64, u64, u64);
}

/// Location of an object in the packs (value of an `o/` key).
///
/// Encoding (23 bytes, little-endian): version u8 = 1 | kind u8 | codec u8 |
/// pack u32 | offset u64 | stored_len u32 | raw_len u32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    /// Object kind.
    pub kind: Kind,
    /// Payload codec.
    pub codec: Codec,
    /// Pack number.
    pub pack: u32,
    /// Offset of the record header within the pack.
    pub offset: u64,
    /// Payload length in the pack.
    pub stored_len: u32,
    /// Decoded length.
    pub raw_len: u32,
}

const LOC_VERSION: u8 = 1;
const LOC_LEN: usize = 23;

impl Loc {
    /// Encode for the index.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(LOC_LEN);
        v.push(LOC_VERSION);
        v.push(self.kind as u8);
        v.push(self.codec as u8);
        v.extend_from_slice(&self.pack.to_le_bytes());
        v.extend_from_slice(&self.offset.to_le_bytes());
        v.extend_from_slice(&self.stored_len.to_le_bytes());
        v.extend_from_slice(&self.raw_len.to_le_bytes());
        v
    }

    /// Bytes the record takes in its pack (header + payload).
    pub fn record_len(&self) -> u64 {
        pack::RECORD_HEADER_LEN as u64 + self.stored_len as u64
    }

    /// Decode an index value.
    pub fn decode(b: &[u8]) -> Result<Loc> {
        if b.len() != LOC_LEN || b[0] != LOC_VERSION {
            return Err(Error::corrupt("index entry", "bad length or version"));
        }
        let kind = Kind::from_u8(b[1]).ok_or_else(|| Error::corrupt("index entry", "bad kind"))?;
        let codec =
            Codec::from_u8(b[2]).ok_or_else(|| Error::corrupt("index entry", "bad codec"))?;
        Ok(Loc {
            kind,
            codec,
            pack: u32::from_le_bytes(b[3..7].try_into().unwrap()),
            offset: u64::from_le_bytes(b[7..15].try_into().unwrap()),
            stored_len: u32::from_le_bytes(b[15..19].try_into().unwrap()),
            raw_len: u32::from_le_bytes(b[19..23].try_into().unwrap()),
        })
    }
}

/// Name of the store descriptor file.
pub const STORE_FILE: &str = "treefork.store";
/// Format tag in the descriptor.
pub const STORE_FORMAT: &str = "treefork-store";
/// Current store layout version. 2 added delta records (codec 2); a version-1 store
/// (no deltas) is accepted and marked 2 when opened, so that an older treefork refuses
/// it by its descriptor instead of failing on its first delta record.
pub const STORE_VERSION: u32 = 2;
/// Objects smaller than this are always stored whole (a delta would not pay for
/// its base id and the second read).
pub const DELTA_MIN: usize = 256;
/// Packs are rotated once they exceed this size.
pub const PACK_TARGET_SIZE: u64 = 64 << 20;

#[derive(serde::Serialize, serde::Deserialize)]
struct StoreDescriptor {
    format: String,
    version: u32,
}

/// Check the bytes of a store descriptor (`treefork.store`); `what` names it in
/// errors. Returns the store's version (1 or [`STORE_VERSION`]).
pub fn check_descriptor(what: &str, bytes: &[u8]) -> Result<u32> {
    let d: StoreDescriptor = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt(what, format!("unreadable: {e}")))?;
    if d.format != STORE_FORMAT || !(1..=STORE_VERSION).contains(&d.version) {
        return Err(Error::corrupt(
            what,
            format!("unsupported format {} version {}", d.format, d.version),
        ));
    }
    Ok(d.version)
}

fn write_descriptor(dir: &Path) -> Result<()> {
    let d = StoreDescriptor {
        format: STORE_FORMAT.into(),
        version: STORE_VERSION,
    };
    let tmp = dir.join("treefork.store.tmp");
    let path = dir.join(STORE_FILE);
    fs::write(&tmp, serde_json::to_vec_pretty(&d).unwrap()).map_err(|e| Error::io(&tmp, e))?;
    File::open(&tmp)
        .and_then(|f| durable::sync_all(&f, Scope::Store))
        .map_err(|e| Error::io(&tmp, e))?;
    fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    // The rename (and, at creation, `packs/`) must be durable: a store that lost its
    // descriptor is refused as "not a treefork store".
    durable::sync_dir(dir, Scope::Store).map_err(|e| Error::io(dir, e))?;
    Ok(())
}

struct Writer {
    pack: u32,
    file: Option<Arc<File>>,
    offset: u64,
    unsynced: Vec<(u32, Arc<File>)>,
    /// Bytes were appended to `file` since its last fsync.
    dirty: bool,
}

/// The on-disk store: `DIR/treefork.store`, `DIR/meta/` (sled), `DIR/packs/pack-N.tfp`.
pub struct PackStore {
    dir: PathBuf,
    db: MetaDb,
    writer: Mutex<Writer>,
    pending: RwLock<HashMap<[u8; 32], Loc>>,
    readers: RwLock<HashMap<u32, Arc<File>>>,
    cache: ObjectCache,
    /// While a gc runs: every id `put` since it began (dedup hits included), which
    /// the sweep must keep. `gc_active` lets `put` skip the lock otherwise.
    gc_active: std::sync::atomic::AtomicBool,
    gc_guard: Mutex<HashSet<[u8; 32]>>,
    reserve: space::Reserve,
}

fn pack_path(dir: &Path, n: u32) -> PathBuf {
    dir.join("packs").join(format!("pack-{n:08}.tfp"))
}

impl PackStore {
    /// Open the store at `dir`, creating it when `dir` is missing or empty.
    /// The caller must already hold the store lock (see `crate::lock`).
    pub fn open(dir: &Path) -> Result<PackStore> {
        Self::open_with(dir, false)
    }

    /// Open for `fsck --repair`: a metadata database without its format marker (lost
    /// or damaged: sled reads it as empty) is accepted and marked again, so the index
    /// can be rebuilt from the packs. Session, checkpoint and branch records that were
    /// only in the lost database do not come back.
    pub fn open_for_repair(dir: &Path) -> Result<PackStore> {
        Self::open_with(dir, true)
    }

    fn open_with(dir: &Path, repair: bool) -> Result<PackStore> {
        let desc_path = dir.join(STORE_FILE);
        let empty = match fs::read_dir(dir) {
            Ok(mut it) => it.all(|e| {
                e.map(|e| e.file_name() == "lock" || e.file_name() == "daemon.log")
                    .unwrap_or(false)
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(Error::io(dir, e)),
        };
        if empty {
            fs::create_dir_all(dir.join("packs")).map_err(|e| Error::io(dir, e))?;
            // The store directory's own entry (when this created it).
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                durable::sync_dir(parent, Scope::Store).map_err(|e| Error::io(parent, e))?;
            }
            write_descriptor(dir)?;
        } else {
            let bytes = fs::read(&desc_path).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Error::Invalid(format!(
                        "{} is not a treefork store (no {STORE_FILE}) and is not empty",
                        dir.display()
                    ))
                } else {
                    Error::io(&desc_path, e)
                }
            })?;
            if check_descriptor(&desc_path.display().to_string(), &bytes)? < STORE_VERSION {
                write_descriptor(dir)?;
            }
            fs::create_dir_all(dir.join("packs")).map_err(|e| Error::io(dir, e))?;
        }
        let meta_dir = dir.join("meta");
        let db = std::panic::catch_unwind(|| MetaDb::open(&meta_dir)).map_err(|_| {
            Error::corrupt(
                format!("metadata database {}", meta_dir.display()),
                "sled panicked while opening it",
            )
        })??;
        // sled treats an unreadable database as empty; the marker written at creation
        // tells "new store" from "lost index", so a damaged index is never mistaken
        // for an empty store (which would hide every session).
        match db.get(meta::FORMAT_KEY)? {
            Some(v) if v == meta::FORMAT_VALUE => {}
            Some(v) => {
                return Err(Error::corrupt(
                    format!("metadata database {}", meta_dir.display()),
                    format!("unknown format marker {:?}", String::from_utf8_lossy(&v)),
                ));
            }
            None if empty => db.apply(vec![MetaOp::Put(
                meta::FORMAT_KEY.to_vec(),
                meta::FORMAT_VALUE.to_vec(),
            )])?,
            None if repair => {
                log::warn!(
                    "metadata database {}: format marker missing; marking it for the index rebuild",
                    meta_dir.display()
                );
                db.apply(vec![MetaOp::Put(
                    meta::FORMAT_KEY.to_vec(),
                    meta::FORMAT_VALUE.to_vec(),
                )])?
            }
            None => {
                return Err(Error::corrupt(
                    format!("metadata database {}", meta_dir.display()),
                    "format marker missing (index lost or damaged; the packs are untouched; `treefork fsck --repair` rebuilds the index)",
                ));
            }
        }
        let mut last = 0u32;
        for e in fs::read_dir(dir.join("packs")).map_err(|e| Error::io(dir, e))? {
            let name = e.map_err(|e| Error::io(dir, e))?.file_name();
            let name = name.to_string_lossy();
            if let Some(n) = name
                .strip_prefix("pack-")
                .and_then(|s| s.strip_suffix(".tfp"))
                .and_then(|s| s.parse::<u32>().ok())
            {
                last = last.max(n);
            }
        }
        Ok(PackStore {
            dir: dir.to_path_buf(),
            db,
            writer: Mutex::new(Writer {
                pack: last,
                file: None,
                offset: 0,
                unsynced: Vec::new(),
                dirty: false,
            }),
            pending: RwLock::new(HashMap::new()),
            readers: RwLock::new(HashMap::new()),
            cache: ObjectCache::new(64 << 20),
            gc_active: std::sync::atomic::AtomicBool::new(false),
            gc_guard: Mutex::new(HashSet::new()),
            reserve: space::Reserve::new(dir),
        })
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Start a gc: from now on every `put` (dedup hits included) is remembered until
    /// [`gc_end`](Self::gc_end), and [`sweep`](Self::sweep) keeps those objects.
    pub fn gc_begin(&self) {
        self.gc_guard.lock().unwrap().clear();
        self.gc_active
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// End a gc (see [`gc_begin`](Self::gc_begin)).
    pub fn gc_end(&self) {
        self.gc_active
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.gc_guard.lock().unwrap().clear();
    }

    /// Every committed index entry.
    pub fn index(&self) -> Result<Vec<([u8; 32], Loc)>> {
        let mut out = Vec::new();
        for (k, v) in self.db.scan(meta::OBJECT_PREFIX)? {
            let id: [u8; 32] = k[meta::OBJECT_PREFIX.len()..]
                .try_into()
                .map_err(|_| Error::corrupt("index", "malformed object key"))?;
            out.push((id, Loc::decode(&v)?));
        }
        Ok(out)
    }

    /// The objects a sweep keeping `keep` would drop: committed index entries that
    /// are neither in `keep` nor put since [`gc_begin`](Self::gc_begin).
    pub fn unreachable(&self, keep: &HashSet<[u8; 32]>) -> Result<Vec<([u8; 32], Loc)>> {
        let guard = self.gc_guard.lock().unwrap();
        self.dead(keep, &guard)
    }

    /// Committed index entries neither in `keep`, nor in the gc `guard`, nor the
    /// base of a delta that stays. Called with the guard locked.
    fn dead(
        &self,
        keep: &HashSet<[u8; 32]>,
        guard: &HashSet<[u8; 32]>,
    ) -> Result<Vec<([u8; 32], Loc)>> {
        // Pending before the index: `commit` applies its entries to the index and
        // only then forgets them, so every put is seen in one or the other.
        let pending = self.pending_snapshot();
        let index = self.index()?;
        let bases = self.bases_of(keep, guard, &index, &pending)?;
        Ok(index
            .into_iter()
            .filter(|(id, _)| !keep.contains(id) && !guard.contains(id) && !bases.contains(id))
            .collect())
    }

    /// Drop the index entries of every object not in `keep` and not put since
    /// [`gc_begin`](Self::gc_begin), together with `extra` metadata ops. Puts wait
    /// while this runs, so an object deduplicated by a concurrent put is either kept
    /// (in the guard) or written again (its entry already gone). Returns (objects,
    /// stored bytes) dropped. The pack bytes stay until [`repack`](Self::repack) or
    /// [`delete_pack`](Self::delete_pack).
    pub fn sweep(&self, keep: &HashSet<[u8; 32]>, extra: Vec<MetaOp>) -> Result<(u64, u64)> {
        let guard = self.gc_guard.lock().unwrap();
        let dead = self.dead(keep, &guard)?;
        let bytes: u64 = dead.iter().map(|(_, l)| l.record_len()).sum();
        let mut ops = extra;
        for (id, _) in &dead {
            ops.push(MetaOp::Delete(meta::key(meta::OBJECT_PREFIX, id)));
            if ops.len() >= 50_000 {
                self.db.apply(std::mem::take(&mut ops))?;
            }
        }
        self.db.apply(ops)?;
        drop(guard);
        for (id, _) in &dead {
            self.cache.remove(id);
        }
        Ok((dead.len() as u64, bytes))
    }

    /// Pack files on disk: (number, size in bytes), by number.
    pub fn packs(&self) -> Result<Vec<(u32, u64)>> {
        let dir = self.dir.join("packs");
        let mut out = Vec::new();
        for e in fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let e = e.map_err(|e| Error::io(&dir, e))?;
            let name = e.file_name();
            if let Some(n) = name
                .to_string_lossy()
                .strip_prefix("pack-")
                .and_then(|s| s.strip_suffix(".tfp"))
                .and_then(|s| s.parse::<u32>().ok())
            {
                let len = e.metadata().map_err(|err| Error::io(e.path(), err))?.len();
                out.push((n, len));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Packs that may still gain index entries (the open pack, packs not yet
    /// fsync'd, packs holding uncommitted puts): a gc never rewrites or deletes them.
    pub fn protected_packs(&self) -> HashSet<u32> {
        let w = self.writer.lock().unwrap();
        let mut p: HashSet<u32> = w.unsynced.iter().map(|(n, _)| *n).collect();
        if w.file.is_some() {
            p.insert(w.pack);
        }
        p.extend(self.pending.read().unwrap().values().map(|l| l.pack));
        p
    }

    /// Close the open pack if everything in it is committed, so a gc may rewrite or
    /// delete it (the next put starts a new pack). A long-running daemon otherwise
    /// keeps its first pack open for up to 64 MiB.
    pub fn close_pack(&self) {
        let mut w = self.writer.lock().unwrap();
        let pack = w.pack;
        if w.file.is_some()
            && !w.dirty
            && w.unsynced.is_empty()
            && !self
                .pending
                .read()
                .unwrap()
                .values()
                .any(|l| l.pack == pack)
        {
            w.file = None;
        }
    }

    /// Path of pack `n`.
    pub fn pack_path(&self, n: u32) -> PathBuf {
        pack_path(&self.dir, n)
    }

    /// Copy the records `live` (all in pack `n`, each verified on the way) into the
    /// open pack, commit their new locations, then delete pack `n`. A record that
    /// fails verification stops the repack before anything is deleted. Returns the
    /// bytes copied.
    pub fn repack(&self, n: u32, live: &[([u8; 32], Loc)]) -> Result<u64> {
        let path = pack_path(&self.dir, n);
        let image = read_pack(&path)?;
        let mut copied = 0u64;
        for (id, loc) in live {
            debug_assert_eq!(loc.pack, n);
            let start = loc.offset as usize;
            let end = start + pack::RECORD_HEADER_LEN + loc.stored_len as usize;
            let what = || {
                format!(
                    "{:?} object {} in pack {n}",
                    loc.kind,
                    crate::id::hex(&id[..6])
                )
            };
            let rec = image
                .get(start..end)
                .ok_or_else(|| Error::corrupt(what(), "pack truncated"))?;
            let h = RecordHeader::decode(rec)?;
            if h.id != *id || h.kind != loc.kind || h.stored_len != loc.stored_len {
                return Err(Error::corrupt(what(), "record header does not match index"));
            }
            self.decode_record(&h, &rec[pack::RECORD_HEADER_LEN..])?;
            let mut w = self.writer.lock().unwrap();
            if w.file.is_none() || w.offset >= PACK_TARGET_SIZE {
                self.rotate(&mut w)?;
            }
            let file = w.file.clone().unwrap();
            file.write_all_at(rec, w.offset)
                .map_err(|e| Error::io(pack_path(&self.dir, w.pack), e))?;
            let new = Loc {
                pack: w.pack,
                offset: w.offset,
                ..*loc
            };
            w.offset += rec.len() as u64;
            w.dirty = true;
            self.pending.write().unwrap().insert(*id, new);
            copied += rec.len() as u64;
        }
        self.commit(Vec::new())?;
        self.delete_pack(n)?;
        Ok(copied)
    }

    /// Delete pack `n` (the caller has made sure no index entry names it).
    pub fn delete_pack(&self, n: u32) -> Result<()> {
        let path = pack_path(&self.dir, n);
        self.readers.write().unwrap().remove(&n);
        fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        if let Ok(d) = File::open(self.dir.join("packs")) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Read and verify an object from its pack, bypassing the cache (fsck).
    pub fn read_verified(&self, kind: Kind, id: &[u8; 32]) -> Result<Arc<Vec<u8>>> {
        self.read_object(kind, id).map(Arc::new)
    }

    fn read_object(&self, kind: Kind, id: &[u8; 32]) -> Result<Vec<u8>> {
        let (h, buf) = self.read_record(kind, id)?;
        self.decode_record(&h, &buf[pack::RECORD_HEADER_LEN..])
    }

    /// Decode (and verify) a record's payload; a delta's base is read and verified
    /// first, and must itself be stored whole.
    fn decode_record(&self, h: &RecordHeader, payload: &[u8]) -> Result<Vec<u8>> {
        let Some(b) = pack::delta_base(h, payload) else {
            return pack::decode_payload(h, payload);
        };
        let what = || format!("{:?} object {}", h.kind, crate::id::hex(&h.id[..6]));
        let base = match self.cache.get(&b) {
            Some(v) => v,
            None => {
                let (bh, buf) = self.read_record(h.kind, &b).map_err(|e| match e {
                    Error::Missing(_) => Error::corrupt(
                        what(),
                        format!("its delta base {} is missing", crate::id::hex(&b[..6])),
                    ),
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

    /// Read an object's whole record (header checked against the index).
    fn read_record(&self, kind: Kind, id: &[u8; 32]) -> Result<(RecordHeader, Vec<u8>)> {
        let what = || format!("{kind:?} object {}", crate::id::hex(&id[..6]));
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
        let mut buf = vec![0u8; pack::RECORD_HEADER_LEN + loc.stored_len as usize];
        f.read_exact_at(&mut buf, loc.offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::corrupt(what(), "pack truncated")
            } else {
                Error::io(pack_path(&self.dir, loc.pack), e)
            }
        })?;
        let h = RecordHeader::decode(&buf)?;
        if h.id != *id || h.kind != kind || h.stored_len != loc.stored_len {
            return Err(Error::corrupt(what(), "record header does not match index"));
        }
        Ok((h, buf))
    }

    /// Read and verify the whole (non-delta) record of `id` at `loc`, which need not
    /// be what the index says (fsck's rebuild).
    pub fn read_whole_at(&self, id: &[u8; 32], loc: &Loc) -> Result<Vec<u8>> {
        let what = || format!("{:?} object {}", loc.kind, crate::id::hex(&id[..6]));
        let mut buf = vec![0u8; pack::RECORD_HEADER_LEN + loc.stored_len as usize];
        self.reader(loc.pack)?
            .read_exact_at(&mut buf, loc.offset)
            .map_err(|e| Error::corrupt(what(), format!("unreadable: {e}")))?;
        let h = RecordHeader::decode(&buf)?;
        if h.id != *id || h.kind != loc.kind || h.codec == Codec::Delta {
            return Err(Error::corrupt(what(), "not a whole record of this object"));
        }
        pack::decode_payload(&h, &buf[pack::RECORD_HEADER_LEN..])
    }

    /// The base a delta object names (reads its first payload bytes).
    fn delta_base_of(&self, id: &[u8; 32], loc: &Loc) -> Result<[u8; 32]> {
        let what = || format!("{:?} object {}", loc.kind, crate::id::hex(&id[..6]));
        let mut b = [0u8; pack::DELTA_BASE_LEN];
        self.reader(loc.pack)?
            .read_exact_at(&mut b, loc.offset + pack::RECORD_HEADER_LEN as u64)
            .map_err(|e| Error::corrupt(what(), format!("delta base id unreadable: {e}")))?;
        Ok(b)
    }

    /// While a gc runs, remember `id` as put (see [`gc_begin`](Self::gc_begin)).
    fn guard(&self, id: &[u8; 32]) {
        if self.gc_active.load(std::sync::atomic::Ordering::SeqCst) {
            self.gc_guard.lock().unwrap().insert(*id);
        }
    }

    /// How to store `raw`: a delta against `hint` (or against the whole object that
    /// `hint` is a delta of) when that takes at most half the bytes of compressing
    /// `raw` on its own, else [`pack::compress`].
    ///
    /// A delta of at most 1/8 of `raw` is taken without compressing `raw` whole
    /// (zstd level 1 does not get real data below 1/4), which keeps a flush of small
    /// edits at one compression per object.
    fn encode(&self, kind: Kind, raw: &[u8], hint: Option<&[u8; 32]>) -> (Codec, Vec<u8>) {
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

    fn delta_against(&self, kind: Kind, raw: &[u8], hint: &[u8; 32]) -> Option<Vec<u8>> {
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

    /// Bases to keep beside `keep`: the base of every delta in `keep` or the gc
    /// guard, and of every pending delta whatever it is (a put from before the gc
    /// began may commit after the sweep, and its base must still be there).
    /// Called with the guard locked.
    fn bases_of(
        &self,
        keep: &HashSet<[u8; 32]>,
        guard: &HashSet<[u8; 32]>,
        index: &[([u8; 32], Loc)],
        pending: &[([u8; 32], Loc)],
    ) -> Result<HashSet<[u8; 32]>> {
        let kept = index
            .iter()
            .filter(|(id, _)| keep.contains(id) || guard.contains(id));
        let mut out = HashSet::new();
        for (id, loc) in kept.chain(pending.iter()) {
            if loc.codec == Codec::Delta {
                let b = self.delta_base_of(id, loc)?;
                if !keep.contains(&b) {
                    out.insert(b);
                }
            }
        }
        Ok(out)
    }

    /// The uncommitted puts and their locations.
    fn pending_snapshot(&self) -> Vec<([u8; 32], Loc)> {
        self.pending
            .read()
            .unwrap()
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect()
    }

    fn lookup(&self, id: &[u8; 32]) -> Result<Option<Loc>> {
        if let Some(l) = self.pending.read().unwrap().get(id) {
            return Ok(Some(*l));
        }
        match self.db.get(&meta::key(meta::OBJECT_PREFIX, id))? {
            Some(v) => Ok(Some(Loc::decode(&v)?)),
            None => Ok(None),
        }
    }

    fn reader(&self, pack: u32) -> Result<Arc<File>> {
        if let Some(f) = self.readers.read().unwrap().get(&pack) {
            return Ok(f.clone());
        }
        let p = pack_path(&self.dir, pack);
        let f = Arc::new(File::open(&p).map_err(|e| Error::io(&p, e))?);
        self.readers.write().unwrap().insert(pack, f.clone());
        Ok(f)
    }

    /// Start a new pack file (called with the writer lock held).
    fn rotate(&self, w: &mut Writer) -> Result<()> {
        let n = w.pack + 1;
        let p = pack_path(&self.dir, n);
        let mut f = OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(&p)
            .map_err(|e| Error::io(&p, e))?;
        // The new directory entry must be durable before any index entry names it:
        // a pack whose entry could not be synced is not used.
        let packs = self.dir.join("packs");
        if let Err(e) = f
            .write_all(&pack::pack_header())
            .map_err(|e| Error::io(&p, e))
            .and_then(|_| durable::sync_dir(&packs, Scope::Store).map_err(|e| Error::io(&packs, e)))
        {
            // Do not leave the number taken (the next rotate would fail with EEXIST).
            let _ = fs::remove_file(&p);
            return Err(e);
        }
        let f = Arc::new(f);
        if let Some(old) = w.file.take() {
            w.unsynced.push((w.pack, old));
        }
        self.readers.write().unwrap().insert(n, f.clone());
        w.pack = n;
        w.file = Some(f);
        w.offset = pack::PACK_HEADER_LEN;
        Ok(())
    }
}

impl ObjectStore for PackStore {
    fn put(&self, kind: Kind, raw: &[u8]) -> Result<[u8; 32]> {
        self.put_based(kind, raw, None)
    }

    fn put_based(&self, kind: Kind, raw: &[u8], base: Option<&[u8; 32]>) -> Result<[u8; 32]> {
        let id = kind.hash(raw);
        // Guard before the dedup lookup: a sweep either sees this id in the guard or
        // has already removed the index entry (and then this put writes a new copy).
        self.guard(&id);
        if self.lookup(&id)?.is_some() {
            return Ok(id);
        }
        let (codec, payload) = self.encode(kind, raw, base.filter(|b| **b != id));
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
        if w.file.is_none() || w.offset >= PACK_TARGET_SIZE {
            self.rotate(&mut w)?;
        }
        let file = w.file.clone().unwrap();
        self.reserve.append(&self.dir, rec.len() as u64)?;
        // Positional write at our own offset: a failed (e.g. ENOSPC) partial write is
        // simply overwritten by the next record; cut it off now to free its space.
        if let Err(e) = file.write_all_at(&rec, w.offset) {
            let _ = file.set_len(w.offset);
            self.reserve.forget();
            return Err(Error::io(pack_path(&self.dir, w.pack), e));
        }
        let loc = Loc {
            kind,
            codec,
            pack: w.pack,
            offset: w.offset,
            stored_len: payload.len() as u32,
            raw_len: raw.len() as u32,
        };
        w.offset += rec.len() as u64;
        w.dirty = true;
        self.pending.write().unwrap().insert(id, loc);
        Ok(id)
    }

    fn get(&self, kind: Kind, id: &[u8; 32]) -> Result<Arc<Vec<u8>>> {
        if let Some(v) = self.cache.get(id) {
            return Ok(v);
        }
        let raw = Arc::new(self.read_object(kind, id)?);
        self.cache.insert(*id, raw.clone());
        Ok(raw)
    }

    fn get_uncached(&self, kind: Kind, id: &[u8; 32]) -> Result<Arc<Vec<u8>>> {
        match self.cache.get(id) {
            Some(v) => Ok(v),
            None => self.read_object(kind, id).map(Arc::new),
        }
    }

    fn contains(&self, id: &[u8; 32]) -> Result<bool> {
        Ok(self.lookup(id)?.is_some())
    }

    fn commit(&self, mut ops: Vec<MetaOp>) -> Result<()> {
        self.reserve.commit(&self.dir)?;
        let w = self.writer.lock().unwrap();
        let current = w.file.iter().filter(|_| w.dirty);
        for f in w.unsynced.iter().map(|(_, f)| f).chain(current) {
            durable::sync_data(f, Scope::Store)
                .map_err(|e| Error::io(self.dir.join("packs"), e))?;
        }
        let pending = self.pending_snapshot();
        for (id, loc) in &pending {
            ops.push(MetaOp::Put(
                meta::key(meta::OBJECT_PREFIX, id),
                loc.encode(),
            ));
        }
        let t = std::time::Instant::now();
        self.db.apply(ops)?;
        log::debug!(
            "commit: {} index entries, sled batch+flush {:?}",
            pending.len(),
            t.elapsed()
        );
        let mut w = w;
        w.unsynced.clear();
        w.dirty = false;
        let mut p = self.pending.write().unwrap();
        for (id, _) in pending {
            p.remove(&id);
        }
        Ok(())
    }

    fn meta_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get(key)
    }

    fn meta_scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.db.scan(prefix)
    }

    fn space(&self) -> (u64, u64, u64) {
        statvfs_bytes(&self.dir).unwrap_or((0, 0, 0))
    }
}

/// (total, free, available) bytes of the filesystem holding `path`.
pub fn statvfs_bytes(path: &Path) -> Option<(u64, u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `s` a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let f = s.f_frsize;
    Some((s.f_blocks * f, s.f_bfree * f, s.f_bavail * f))
}

type MemObject = (Kind, Arc<Vec<u8>>);

/// In-memory twin of [`PackStore`] for tests of the layers above.
#[derive(Default)]
pub struct MemStore {
    objects: RwLock<HashMap<[u8; 32], MemObject>>,
    meta: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl ObjectStore for MemStore {
    fn put(&self, kind: Kind, raw: &[u8]) -> Result<[u8; 32]> {
        let id = kind.hash(raw);
        self.objects
            .write()
            .unwrap()
            .entry(id)
            .or_insert_with(|| (kind, Arc::new(raw.to_vec())));
        Ok(id)
    }
    fn get(&self, kind: Kind, id: &[u8; 32]) -> Result<Arc<Vec<u8>>> {
        match self.objects.read().unwrap().get(id) {
            Some((k, v)) if *k == kind => Ok(v.clone()),
            _ => Err(Error::Missing(crate::id::hex(&id[..6]))),
        }
    }
    fn contains(&self, id: &[u8; 32]) -> Result<bool> {
        Ok(self.objects.read().unwrap().contains_key(id))
    }
    fn commit(&self, ops: Vec<MetaOp>) -> Result<()> {
        let mut m = self.meta.lock().unwrap();
        for op in ops {
            match op {
                MetaOp::Put(k, v) => {
                    m.insert(k, v);
                }
                MetaOp::Delete(k) => {
                    m.remove(&k);
                }
            }
        }
        Ok(())
    }
    fn meta_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.meta.lock().unwrap().get(key).cloned())
    }
    fn meta_scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self
            .meta
            .lock()
            .unwrap()
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
    fn space(&self) -> (u64, u64, u64) {
        (1 << 40, 1 << 40, 1 << 40)
    }
}

/// Read a whole pack file (for scanning).
pub fn read_pack(path: &Path) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut v))
        .map_err(|e| Error::io(path, e))?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite(s: &dyn ObjectStore) {
        let a = s.put(Kind::Chunk, b"hello world").unwrap();
        let b = s.put(Kind::Chunk, b"hello world").unwrap();
        assert_eq!(a, b);
        assert_eq!(&**s.get(Kind::Chunk, &a).unwrap(), b"hello world");
        let big = vec![3u8; 65536];
        let c = s.put(Kind::Node, &big).unwrap();
        s.commit(vec![MetaOp::Put(b"s/x".to_vec(), b"1".to_vec())])
            .unwrap();
        assert_eq!(&**s.get(Kind::Node, &c).unwrap(), &big);
        assert!(s.contains(&c).unwrap());
        assert_eq!(s.meta_get(b"s/x").unwrap().unwrap(), b"1");
        assert_eq!(s.meta_scan(b"s/").unwrap().len(), 1);
        assert!(s.get(Kind::Chunk, &[9; 32]).is_err());
    }

    #[test]
    fn mem_store_suite() {
        suite(&MemStore::default());
    }

    #[test]
    fn pack_store_suite_and_reopen() {
        let d = tempfile::tempdir().unwrap();
        let id;
        {
            let s = PackStore::open(d.path()).unwrap();
            suite(&s);
            id = s.put(Kind::Chunk, b"durable").unwrap();
            s.commit(vec![]).unwrap();
        }
        let s = PackStore::open(d.path()).unwrap();
        assert_eq!(&**s.get(Kind::Chunk, &id).unwrap(), b"durable");
        // The reopened store writes to a fresh pack.
        s.put(Kind::Chunk, b"more").unwrap();
        assert_eq!(s.writer.lock().unwrap().pack, 2);
    }

    fn text(seed: u32, n: u32) -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                format!("fn f{i}() -> u32 {{ {} }}\n", i.wrapping_mul(seed) % 9973).into_bytes()
            })
            .collect()
    }

    #[test]
    fn deltas_round_trip_stay_one_level_and_keep_their_base() {
        let d = tempfile::tempdir().unwrap();
        let v1 = text(7, 2000);
        let mut v2 = v1.clone();
        v2.splice(20_000..20_000, b"// an edit\n".iter().copied());
        let mut v3 = v2.clone();
        v3.splice(100..100, b"// another\n".iter().copied());
        let (a, b, c);
        {
            let s = PackStore::open(d.path()).unwrap();
            a = s.put(Kind::Chunk, &v1).unwrap();
            s.commit(vec![]).unwrap();
            b = s.put_based(Kind::Chunk, &v2, Some(&a)).unwrap();
            // A delta of a delta is a delta of the whole base.
            c = s.put_based(Kind::Chunk, &v3, Some(&b)).unwrap();
            s.commit(vec![]).unwrap();
            let lb = s.lookup(&b).unwrap().unwrap();
            let lc = s.lookup(&c).unwrap().unwrap();
            assert_eq!(lb.codec, Codec::Delta);
            assert_eq!(lc.codec, Codec::Delta);
            assert!(
                lb.stored_len < 200,
                "delta of a one-line edit: {} bytes",
                lb.stored_len
            );
            assert_eq!(s.delta_base_of(&c, &lc).unwrap(), a);
            // An unrelated hint is ignored when it does not pay.
            let other = s.put_based(Kind::Chunk, &text(13, 500), Some(&a)).unwrap();
            assert_ne!(s.lookup(&other).unwrap().unwrap().codec, Codec::Delta);
            // A hint of another kind (even one in the cache) or a missing hint:
            // stored whole.
            s.get(Kind::Chunk, &a).unwrap();
            let n = s.put_based(Kind::Node, &v2, Some(&a)).unwrap();
            assert_ne!(s.lookup(&n).unwrap().unwrap().codec, Codec::Delta);
            let m = s
                .put_based(Kind::Node, &v3[..5000], Some(&[9; 32]))
                .unwrap();
            assert_ne!(s.lookup(&m).unwrap().unwrap().codec, Codec::Delta);
        }
        let s = PackStore::open(d.path()).unwrap();
        assert_eq!(&**s.get(Kind::Chunk, &b).unwrap(), &v2);
        assert_eq!(&**s.get_uncached(Kind::Chunk, &c).unwrap(), &v3);
        // gc keeping only the deltas keeps their base.
        s.gc_begin();
        let keep: HashSet<[u8; 32]> = [b, c].into_iter().collect();
        assert!(s.unreachable(&keep).unwrap().iter().all(|(id, _)| *id != a));
        s.sweep(&keep, vec![]).unwrap();
        s.gc_end();
        assert!(s.contains(&a).unwrap());
        drop(s);
        let s = PackStore::open(d.path()).unwrap();
        assert_eq!(&**s.read_verified(Kind::Chunk, &c).unwrap(), &v3);
        // Without their base, deltas are corrupt (never wrong data).
        s.gc_begin();
        s.db.apply(vec![MetaOp::Delete(meta::key(meta::OBJECT_PREFIX, &a))])
            .unwrap();
        s.gc_end();
        let e = s.read_verified(Kind::Chunk, &b).unwrap_err();
        assert!(
            matches!(e, Error::Corrupt { .. }) && e.to_string().contains("delta base"),
            "{e}"
        );
    }

    #[test]
    fn gc_keeps_the_base_of_an_uncommitted_delta() {
        // A delta put before the gc began, still pending while the sweep runs and
        // committed after it: its base is in no keep set, and must stay.
        let d = tempfile::tempdir().unwrap();
        let v1 = text(3, 2000);
        let mut v2 = v1.clone();
        v2.splice(5_000..5_000, b"// an edit\n".iter().copied());
        let s = PackStore::open(d.path()).unwrap();
        let a = s.put(Kind::Chunk, &v1).unwrap();
        s.commit(vec![]).unwrap();
        let b = s.put_based(Kind::Chunk, &v2, Some(&a)).unwrap();
        assert_eq!(s.lookup(&b).unwrap().unwrap().codec, Codec::Delta);
        s.gc_begin();
        let keep = HashSet::new();
        assert!(s.unreachable(&keep).unwrap().iter().all(|(id, _)| *id != a));
        s.sweep(&keep, vec![]).unwrap();
        s.gc_end();
        s.commit(vec![]).unwrap();
        s.cache.remove(&a);
        assert_eq!(&**s.read_verified(Kind::Chunk, &b).unwrap(), &v2);
    }

    #[test]
    fn version_1_store_is_upgraded() {
        let d = tempfile::tempdir().unwrap();
        drop(PackStore::open(d.path()).unwrap());
        let p = d.path().join(STORE_FILE);
        fs::write(&p, br#"{"format":"treefork-store","version":1}"#).unwrap();
        drop(PackStore::open(d.path()).unwrap());
        assert_eq!(
            check_descriptor("d", &fs::read(&p).unwrap()).unwrap(),
            STORE_VERSION
        );
        fs::write(&p, br#"{"format":"treefork-store","version":3}"#).unwrap();
        let e = PackStore::open(d.path()).err().unwrap();
        assert!(e.to_string().contains("version 3"), "{e}");
    }

    #[test]
    fn corrupt_pack_is_an_error_not_wrong_data() {
        let d = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let id;
        {
            let s = PackStore::open(d.path()).unwrap();
            id = s.put(Kind::Chunk, &data).unwrap();
            s.commit(vec![]).unwrap();
        }
        let p = pack_path(d.path(), 1);
        let mut bytes = fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 100] ^= 1;
        fs::write(&p, bytes).unwrap();
        let s = PackStore::open(d.path()).unwrap();
        let e = s.get(Kind::Chunk, &id).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

        /// Index entries: valid ones round-trip, any other bytes are `Corrupt`.
        #[test]
        fn loc_decoder(
            kind in 1u8..3, codec in 0u8..3, pack: u32, offset: u64, stored_len: u32, raw_len: u32,
            flip in proptest::option::of((0usize..LOC_LEN, 0u8..8)),
            cut in 0usize..LOC_LEN + 2,
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        ) {
            let l = Loc {
                kind: Kind::from_u8(kind).unwrap(),
                codec: Codec::from_u8(codec).unwrap(),
                pack, offset, stored_len, raw_len,
            };
            let mut b = l.encode();
            proptest::prop_assert_eq!(Loc::decode(&b).unwrap(), l);
            if let Some((i, bit)) = flip {
                b[i] ^= 1 << bit;
            }
            b.truncate(cut);
            match Loc::decode(&b) {
                Ok(d) => proptest::prop_assert_eq!(d.encode(), b),
                Err(e) => proptest::prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e),
            }
            if let Ok(d) = Loc::decode(&junk) {
                proptest::prop_assert_eq!(d.encode(), junk);
            }
        }

        /// Store descriptors: the written one is accepted, anything else is refused
        /// as corrupt (never a panic).
        #[test]
        fn descriptor_decoder(
            flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 0u8..8), 0..3),
            cut in proptest::prelude::any::<usize>(),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100),
        ) {
            let good = serde_json::to_vec_pretty(&StoreDescriptor {
                format: STORE_FORMAT.into(),
                version: STORE_VERSION,
            })
            .unwrap();
            proptest::prop_assert!(check_descriptor("d", &good).is_ok());
            let mut m = good.clone();
            for (at, bit) in &flips {
                let i = at % m.len();
                m[i] ^= 1 << bit;
            }
            m.truncate(cut % (m.len() + 1));
            if let Err(e) = check_descriptor("d", &m) {
                proptest::prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e);
            }
            proptest::prop_assert!(check_descriptor("d", &junk).is_err());
        }
    }

    #[test]
    fn foreign_directory_is_refused() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("notes.txt"), b"x").unwrap();
        let e = PackStore::open(d.path()).err().unwrap();
        assert!(e.to_string().contains("not a treefork store"), "{e}");
    }
}
