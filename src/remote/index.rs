//! [`RemoteIndex`]: what a remote holds, object by object, from its pack indexes.
//!
//! Owns: the local cache of a remote's `.idx` files (`STORE/remotes/<remote>/idx/`,
//! one `<H>.idx` per remote pack, plus `condemned.json`, the last `gc/condemned`
//! seen) and the in-memory map id -> where it lives on the remote.
//!
//! Invariants: every cached `.idx` was decoded and its pack hash equals its name
//! before it is used (a bad cache file is deleted, never trusted: the cache can
//! always be rebuilt from the remote); an id whose only packs are condemned is
//! absent ([`RemoteIndex::get`] / [`RemoteIndex::has`] say no), so nothing pushed
//! from now on builds on a pack a remote gc is about to delete. When an id is in
//! several packs, a live (not condemned) one is preferred. `has` is one hash
//! lookup under a read lock (it is on the lazy-read path).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use super::client::Client;
use super::layout::{self, PackObject};
use super::packidx::{Idx, IdxEntry, Stored};
use super::refval::GcCondemned;
use crate::error::{Error, Result};
use crate::id::{ObjectId, PackHash};
use crate::store::pack::{Codec, Kind};

/// Where one object lives on the remote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Object id.
    pub id: ObjectId,
    /// The pack holding it (`packs/<pack>.tfp`).
    pub pack: PackHash,
    /// Offset of its record header in the pack.
    pub offset: u64,
    /// Payload length.
    pub stored_len: u32,
    /// Decoded length.
    pub raw_len: u32,
    /// Object kind.
    pub kind: Kind,
    /// Payload codec.
    pub codec: Codec,
    /// The delta base (codec 2).
    pub base: Option<ObjectId>,
}

impl Entry {
    /// The entry as the pack's `.idx` has it.
    pub fn idx_entry(&self) -> IdxEntry {
        IdxEntry {
            id: self.id,
            kind: self.kind,
            codec: self.codec,
            offset: self.offset,
            stored_len: self.stored_len,
            raw_len: self.raw_len,
            base: self.base,
        }
    }

    /// Byte range of its whole record in the pack (for `Client::get_range`).
    pub fn range(&self) -> std::ops::Range<u64> {
        self.idx_entry().range()
    }

    /// Check the bytes of [`range`](Self::range) against this entry
    /// ([`packidx::read_record`](super::packidx::read_record)).
    pub fn read_record(&self, bytes: &[u8]) -> Result<Stored> {
        super::packidx::read_record(&self.pack, &self.idx_entry(), bytes)
    }
}

/// One remote pack known to the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackInfo {
    /// Its hash (name).
    pub hash: PackHash,
    /// Its length in bytes.
    pub len: u64,
    /// Objects in it.
    pub count: u32,
    /// The kinds it holds (distinct, chunks first); push keeps node packs apart.
    pub kinds: Vec<Kind>,
    /// Whether the last `gc/condemned` seen names it.
    pub condemned: bool,
}

/// What a [`RemoteIndex::refresh`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// Packs whose `.idx` was new to us.
    pub new_packs: Vec<PackHash>,
    /// Packs whose `.idx` is gone from the remote (dropped here).
    pub dropped_packs: Vec<PackHash>,
    /// Packs `gc/condemned` names.
    pub condemned: usize,
    /// `.idx` objects that failed verification (ignored: their packs do not exist
    /// for us), as `packs/<H>.idx` keys.
    pub corrupt: Vec<String>,
}

/// Compact map value: pack number, offset, stored_len, raw_len, kind, codec.
#[derive(Clone, Copy)]
struct Slot {
    offset: u64,
    pack: u32,
    stored_len: u32,
    raw_len: u32,
    kind: u8,
    codec: u8,
}

struct PackMeta {
    hash: PackHash,
    len: u64,
    count: u32,
    kinds: u8,
    /// In `Inner::condemned` (kept here so `has` does one hash lookup).
    condemned: bool,
}

#[derive(Default)]
struct Inner {
    map: HashMap<ObjectId, Slot>,
    bases: HashMap<ObjectId, ObjectId>,
    /// Pack number -> pack; `None` once dropped (numbers are never reused).
    packs: Vec<Option<PackMeta>>,
    by_hash: HashMap<PackHash, u32>,
    condemned: HashSet<PackHash>,
}

impl Inner {
    fn is_condemned(&self, n: u32) -> bool {
        self.packs[n as usize].as_ref().is_none_or(|p| p.condemned)
    }

    fn insert(&mut self, idx: &Idx) {
        if self.by_hash.contains_key(&idx.pack_hash) {
            return;
        }
        let n = self.packs.len() as u32;
        let kinds = idx.entries.iter().fold(0u8, |k, e| k | e.kind as u8);
        let live = !self.condemned.contains(&idx.pack_hash);
        self.packs.push(Some(PackMeta {
            hash: idx.pack_hash,
            len: idx.pack_len,
            count: idx.entries.len() as u32,
            kinds,
            condemned: !live,
        }));
        self.by_hash.insert(idx.pack_hash, n);
        for e in &idx.entries {
            let slot = Slot {
                offset: e.offset,
                pack: n,
                stored_len: e.stored_len,
                raw_len: e.raw_len,
                kind: e.kind as u8,
                codec: e.codec as u8,
            };
            let replace = match self.map.get(&e.id) {
                None => true,
                Some(old) => live && self.is_condemned(old.pack),
            };
            if replace {
                self.map.insert(e.id, slot);
                match e.base {
                    Some(b) => self.bases.insert(e.id, b),
                    None => self.bases.remove(&e.id),
                };
            }
        }
    }

    fn entry(&self, id: &ObjectId) -> Option<Entry> {
        let s = self.map.get(id)?;
        if self.is_condemned(s.pack) {
            return None;
        }
        let pack = self.packs[s.pack as usize].as_ref()?.hash;
        Some(Entry {
            id: *id,
            pack,
            offset: s.offset,
            stored_len: s.stored_len,
            raw_len: s.raw_len,
            kind: Kind::from_u8(s.kind)?,
            codec: Codec::from_u8(s.codec)?,
            base: self.bases.get(id).copied(),
        })
    }
}

/// The remote's objects (see the module docs). `Send + Sync`; share it in an `Arc`.
pub struct RemoteIndex {
    dir: PathBuf,
    inner: RwLock<Inner>,
    /// Packs whose remote `.idx` did not verify (not downloaded again).
    rejected: Mutex<HashSet<PackHash>>,
}

const CONDEMNED_FILE: &str = "condemned.json";
static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::io(path, e)
}

/// Write `bytes` to `path` atomically (temporary file + rename; a cache, so no fsync:
/// a torn file fails verification on load and is deleted).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!(
        "tmp.{}.{}",
        std::process::id(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&tmp, bytes).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(path, e)
    })
}

/// Read and verify a cached `.idx` named by `h`; `None` (file deleted) when it
/// does not verify.
fn load_cached(path: &Path, h: &PackHash) -> Result<Option<Idx>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path, e)),
    };
    match Idx::decode(&bytes) {
        Ok(idx) if idx.pack_hash == *h => Ok(Some(idx)),
        Ok(_) | Err(_) => {
            log::warn!(
                "remote index cache: {} does not verify; dropped",
                path.display()
            );
            let _ = std::fs::remove_file(path);
            Ok(None)
        }
    }
}

impl RemoteIndex {
    /// Load from the cache directory only (no network); creates it when missing.
    pub fn load(cache_dir: &Path) -> Result<RemoteIndex> {
        std::fs::create_dir_all(cache_dir).map_err(|e| io(cache_dir, e))?;
        let mut inner = Inner::default();
        let cpath = cache_dir.join(CONDEMNED_FILE);
        if let Ok(b) = std::fs::read(&cpath) {
            match GcCondemned::decode(&b) {
                Ok(c) => inner.condemned = condemned_set(&c),
                Err(e) => {
                    // A cache: the next refresh reads `gc/condemned` again.
                    log::warn!(
                        "remote index cache: {} does not decode ({e}); dropped",
                        cpath.display()
                    );
                    let _ = std::fs::remove_file(&cpath);
                }
            }
        }
        let rd = std::fs::read_dir(cache_dir).map_err(|e| io(cache_dir, e))?;
        let mut names = Vec::new();
        for d in rd {
            let d = d.map_err(|e| io(cache_dir, e))?;
            let name = d.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(h) = name
                .strip_suffix(layout::IDX_SUFFIX)
                .and_then(layout::parse_pack_hash)
            {
                names.push(h);
            } else if name.contains(".tmp.") {
                let _ = std::fs::remove_file(d.path());
            }
        }
        names.sort();
        for h in names {
            if let Some(idx) = load_cached(&Self::path_in(cache_dir, &h), &h)? {
                inner.insert(&idx);
            }
        }
        Ok(RemoteIndex {
            dir: cache_dir.to_path_buf(),
            inner: RwLock::new(inner),
            rejected: Mutex::new(HashSet::new()),
        })
    }

    fn path_in(dir: &Path, h: &PackHash) -> PathBuf {
        dir.join(format!("{}{}", h.to_hex(), layout::IDX_SUFFIX))
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bring the index up to date with the remote: LIST `packs/`, download the
    /// `.idx` files not yet cached, drop packs whose `.idx` is gone, read
    /// `gc/condemned`.
    pub fn refresh(&self, c: &Client) -> Result<Refreshed> {
        // Snapshot before listing: a pack `add`ed while we list is not in the
        // snapshot, so it is never taken for one that vanished.
        let known: HashSet<PackHash> = self.inner.read().unwrap().by_hash.keys().copied().collect();
        let listed: HashSet<PackHash> = c
            .list(layout::PACKS_DIR)?
            .into_iter()
            .filter_map(|m| match layout::parse_pack_object(&m.key) {
                Some(PackObject::Idx(h)) => Some(h),
                _ => None,
            })
            .collect();
        let condemned = self.fetch_condemned(c)?;
        let mut out = Refreshed {
            condemned: condemned.len(),
            ..Refreshed::default()
        };
        let unseen: Vec<PackHash> = listed
            .iter()
            .filter(|h| !known.contains(*h))
            .copied()
            .collect();
        let fresh = self.download(c, &unseen, &mut out.corrupt)?;
        let dropped: HashSet<PackHash> =
            known.into_iter().filter(|h| !listed.contains(h)).collect();
        for h in &dropped {
            let _ = std::fs::remove_file(Self::path_in(&self.dir, h));
        }
        self.apply(condemned, &dropped, &fresh)?;
        out.new_packs = fresh.iter().map(|i| i.pack_hash).collect();
        out.dropped_packs = dropped.into_iter().collect();
        Ok(out)
    }

    /// Read `gc/condemned` (and mirror it in the cache): the condemned packs.
    fn fetch_condemned(&self, c: &Client) -> Result<HashSet<PackHash>> {
        let path = self.dir.join(CONDEMNED_FILE);
        match c.get(layout::GC_CONDEMNED, layout::Body::Gc)? {
            Some(g) => {
                let gc = GcCondemned::decode(&g.bytes)?;
                write_atomic(&path, &gc.encode())?;
                Ok(condemned_set(&gc))
            }
            None => {
                let _ = std::fs::remove_file(&path);
                Ok(HashSet::new())
            }
        }
    }

    /// Download and verify the `.idx` of `packs`, caching each that verifies; the
    /// keys of those that do not go to `corrupt` (and are not fetched again by this
    /// index).
    fn download(
        &self,
        c: &Client,
        packs: &[PackHash],
        corrupt: &mut Vec<String>,
    ) -> Result<Vec<Idx>> {
        let packs: Vec<PackHash> = {
            let rejected = self.rejected.lock().unwrap();
            packs
                .iter()
                .filter(|h| !rejected.contains(*h))
                .copied()
                .collect()
        };
        let keys: Vec<String> = packs.iter().map(layout::idx_key).collect();
        let got = c.get_many(&keys, layout::Body::PackIdx)?;
        let mut fresh = Vec::new();
        for ((h, key), g) in packs.iter().zip(keys).zip(got) {
            // Gone since the LIST (a remote gc): nothing to learn.
            let Some(g) = g else { continue };
            match Idx::decode(&g.bytes) {
                Ok(idx) if idx.pack_hash == *h => {
                    write_atomic(&Self::path_in(&self.dir, h), &g.bytes)?;
                    fresh.push(idx);
                }
                Ok(_) | Err(_) => {
                    log::error!(
                        "remote {}: {key} does not verify; its pack is ignored",
                        c.name()
                    );
                    self.rejected.lock().unwrap().insert(*h);
                    corrupt.push(key);
                }
            }
        }
        Ok(fresh)
    }

    /// Install a refresh's result. When packs were dropped or the condemned set
    /// changed (a remote gc ran: rare), the map is rebuilt from the cache so every id
    /// gets its best remaining pack; the rebuild reads files outside the lock.
    fn apply(
        &self,
        condemned: HashSet<PackHash>,
        dropped: &HashSet<PackHash>,
        fresh: &[Idx],
    ) -> Result<()> {
        let rebuild = !dropped.is_empty() || self.inner.read().unwrap().condemned != condemned;
        if !rebuild {
            let mut g = self.inner.write().unwrap();
            fresh.iter().for_each(|idx| g.insert(idx));
            return Ok(());
        }
        let mut next = Inner {
            condemned,
            ..Inner::default()
        };
        let before: Vec<PackHash> = self.pack_hashes();
        for h in before.iter().filter(|h| !dropped.contains(*h)) {
            if let Some(idx) = load_cached(&Self::path_in(&self.dir, h), h)? {
                next.insert(&idx);
            }
        }
        fresh.iter().for_each(|idx| next.insert(idx));
        let mut g = self.inner.write().unwrap();
        // Packs added (by a concurrent push) while we read the cache.
        let late: Vec<PackHash> = g
            .packs
            .iter()
            .flatten()
            .map(|p| p.hash)
            .filter(|h| !dropped.contains(h) && !next.by_hash.contains_key(h))
            .collect();
        for h in late {
            if let Some(idx) = load_cached(&Self::path_in(&self.dir, &h), &h)? {
                next.insert(&idx);
            }
        }
        *g = next;
        Ok(())
    }

    fn pack_hashes(&self) -> Vec<PackHash> {
        let g = self.inner.read().unwrap();
        g.packs.iter().flatten().map(|p| p.hash).collect()
    }

    /// Where `id` lives; `None` if absent or only in condemned packs.
    pub fn get(&self, id: &ObjectId) -> Option<Entry> {
        self.inner.read().unwrap().entry(id)
    }

    /// Whether the remote holds `id` in a live pack.
    pub fn has(&self, id: &ObjectId) -> bool {
        let g = self.inner.read().unwrap();
        g.map.get(id).is_some_and(|s| !g.is_condemned(s.pack))
    }

    /// Add the `.idx` of a pack we just uploaded (verified, and cached on disk).
    pub fn add(&self, idx_bytes: &[u8]) -> Result<()> {
        let idx = Idx::decode(idx_bytes)?;
        write_atomic(&Self::path_in(&self.dir, &idx.pack_hash), idx_bytes)?;
        self.inner.write().unwrap().insert(&idx);
        Ok(())
    }

    /// Every known pack (condemned ones flagged).
    pub fn packs(&self) -> Vec<PackInfo> {
        let g = self.inner.read().unwrap();
        g.packs
            .iter()
            .flatten()
            .map(|p| PackInfo {
                hash: p.hash,
                len: p.len,
                count: p.count,
                kinds: [Kind::Chunk, Kind::Node]
                    .into_iter()
                    .filter(|k| p.kinds & *k as u8 != 0)
                    .collect(),
                condemned: p.condemned,
            })
            .collect()
    }

    /// The cached `.idx` of pack `h` (every entry: e.g. to fetch a node pack whole).
    pub fn idx_of(&self, h: &PackHash) -> Result<Option<Idx>> {
        load_cached(&Self::path_in(&self.dir, h), h)
    }

    /// The packs the last `gc/condemned` seen names.
    pub fn condemned(&self) -> HashSet<PackHash> {
        self.inner.read().unwrap().condemned.clone()
    }

    /// Ids known (those only in condemned packs included).
    pub fn len(&self) -> usize {
        self.inner.read().unwrap().map.len()
    }

    /// Whether no id is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn condemned_set(c: &GcCondemned) -> HashSet<PackHash> {
    c.packs
        .iter()
        .filter_map(|h| layout::parse_pack_hash(h))
        .collect()
}

#[cfg(test)]
mod tests;
