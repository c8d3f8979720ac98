//! Lazy hydration: the store's [`Fallback`] over every configured remote.
//!
//! Owns: [`Lazy`] (asked by `PackStore::get` on a local miss: finds the object in
//! a remote's [`RemoteIndex`], reads ONE byte range of its pack covering the
//! record and the records that follow it (read-ahead, up to
//! [`READ_AHEAD_BYTES`], only records not present locally), verifies every record
//! and returns the objects whole); [`read_records`] / [`decode_batch`], the range
//! read and verification shared with pull and hydrate; [`install`], which sets the
//! fallback of a store from its configured remotes (daemon start, pull, mount
//! from a remote).
//!
//! Invariants: never wrong bytes: every record's header is checked against its
//! index entry and every object's id is verified (blake3 in its kind's domain)
//! after decoding, before it is returned; a requested object that fails is
//! [`Error::Corrupt`], a neighbour that fails is logged and left out. The
//! requested delta's base is read through the store (so it is fetched and kept
//! too), which may ask a remote again; a read-ahead neighbour is kept only when
//! its base is in the batch or local (so one read follows one chain, never a
//! tree of them). That recursion is bounded. Each thread keeps the chain of
//! deltas it is decoding ([`decode_batch`]); a base already on the chain (a
//! cycle: A on B on A, or an object on itself) or a chain longer than
//! [`MAX_DELTA_DEPTH`] is [`Error::Corrupt`] naming the object and the remote,
//! before any further request: a hostile index cannot overflow the stack. (Local
//! packs store a delta's base whole: a chain of one, `PackStore::decode_record`.)
//! Nothing
//! negative is cached: an object no index knows triggers an index refresh (at
//! most one per [`REFRESH_EVERY`] per remote) and is asked again next time.
//! Network work happens on the caller's thread through the synchronous client
//! (never inside a tokio runtime).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::client::Client;
use super::index::RemoteIndex;
use super::layout;
use super::packidx::{self, IdxEntry, Stored};
use super::registry::Remote;
use crate::error::{Error, Result};
use crate::id::{ObjectId, PackHash};
use crate::store::pack::{Codec, Kind};
use crate::store::{Fallback, FetchedObject, ObjectStore};

/// How far past the requested record one lazy read reaches.
pub const READ_AHEAD_BYTES: u64 = 2 << 20;
/// An object no index knows refreshes that remote's index at most this often.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// Packs whose offset-ordered entries are kept in memory.
const PACKS_KEPT: usize = 256;
/// Longest chain of remote deltas one read follows (a delta on a delta on ...).
/// Push copies local records, whose bases are stored whole, so a remote written
/// by one store has chains of one; several stores pushing to one remote can make
/// longer ones. Past this the read is [`Error::Corrupt`].
pub const MAX_DELTA_DEPTH: usize = 8;

thread_local! {
    /// The deltas this thread is decoding, outermost first (see the module docs).
    static CHAIN: RefCell<Vec<ObjectId>> = const { RefCell::new(Vec::new()) };
}

/// One delta on this thread's chain; leaves it when dropped.
struct OnChain;

impl Drop for OnChain {
    fn drop(&mut self) {
        CHAIN.with(|c| c.borrow_mut().pop());
    }
}

/// Put delta `id` (of `kind`, on `base`, read from `remote`) on this thread's
/// chain before its base is read; a cycle or a chain past [`MAX_DELTA_DEPTH`] is
/// [`Error::Corrupt`].
fn enter_chain(remote: &str, kind: Kind, id: &ObjectId, base: &ObjectId) -> Result<OnChain> {
    CHAIN.with(|c| {
        let mut c = c.borrow_mut();
        let what = || format!("{kind:?} object {} from remote {remote}", id.to_hex());
        if base == id || c.contains(base) || c.contains(id) {
            log::error!("{}: delta cycle through {}", what(), base.to_hex());
            return Err(Error::corrupt(
                what(),
                format!("delta cycle through base {}", base.to_hex()),
            ));
        }
        if c.len() >= MAX_DELTA_DEPTH {
            log::error!("{}: delta chain longer than {MAX_DELTA_DEPTH}", what());
            return Err(Error::corrupt(
                what(),
                format!(
                    "delta chain longer than {MAX_DELTA_DEPTH} (at base {})",
                    base.to_hex()
                ),
            ));
        }
        c.push(*id);
        Ok(OnChain)
    })
}

/// One remote to read from.
#[derive(Clone)]
pub struct Source {
    /// The remote's name.
    pub name: String,
    /// Its client.
    pub client: Client,
    /// Its index (shared with push, pull and trim through the registry).
    pub index: Arc<RemoteIndex>,
}

impl From<&Remote> for Source {
    fn from(r: &Remote) -> Source {
        Source {
            name: r.config.name.clone(),
            client: r.client.clone(),
            index: r.index.clone(),
        }
    }
}

/// What lazy reads cost so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LazyStats {
    /// Range requests made.
    pub requests: u64,
    /// Objects returned (requested + read ahead).
    pub objects: u64,
    /// Bytes read from remotes.
    pub bytes: u64,
}

/// The fallback (see the module docs).
pub struct Lazy {
    sources: Vec<Source>,
    store: Weak<dyn ObjectStore>,
    by_offset: Mutex<HashMap<PackHash, Arc<Vec<IdxEntry>>>>,
    refreshed: Mutex<HashMap<String, Instant>>,
    requests: AtomicU64,
    objects: AtomicU64,
    bytes: AtomicU64,
}

impl Lazy {
    /// A fallback reading from `sources` in order, for `store` (held weakly: the
    /// store holds the fallback).
    pub fn new(sources: Vec<Source>, store: Weak<dyn ObjectStore>) -> Lazy {
        Lazy {
            sources,
            store,
            by_offset: Mutex::new(HashMap::new()),
            refreshed: Mutex::new(HashMap::new()),
            requests: AtomicU64::new(0),
            objects: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// The remotes read from.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// Requests, objects and bytes so far.
    pub fn stats(&self) -> LazyStats {
        LazyStats {
            requests: self.requests.load(Ordering::Relaxed),
            objects: self.objects.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    /// The entries of pack `pack` of `src`, by offset (from the cached `.idx`).
    fn entries_by_offset(&self, src: &Source, pack: &PackHash) -> Result<Arc<Vec<IdxEntry>>> {
        if let Some(v) = self.by_offset.lock().unwrap().get(pack) {
            return Ok(v.clone());
        }
        let idx = src.index.idx_of(pack)?.ok_or_else(|| Error::Remote {
            remote: src.name.clone(),
            detail: format!("the index of pack {} is not cached", pack.to_hex()),
        })?;
        let mut v = idx.entries;
        v.sort_by_key(|e| e.offset);
        let v = Arc::new(v);
        let mut m = self.by_offset.lock().unwrap();
        if m.len() >= PACKS_KEPT {
            m.clear();
        }
        m.insert(*pack, v.clone());
        Ok(v)
    }

    /// The record of `e` in `pack` and the records after it that are not present
    /// locally, while the range stays within [`READ_AHEAD_BYTES`].
    fn plan(&self, src: &Source, pack: &PackHash, e: &IdxEntry) -> Result<Vec<IdxEntry>> {
        let all = self.entries_by_offset(src, pack)?;
        let store = self.store.upgrade();
        let at = all.partition_point(|x| x.offset < e.offset);
        let mut out = vec![*e];
        for next in all.iter().skip(at + 1) {
            if next.range().end - e.offset > READ_AHEAD_BYTES {
                break;
            }
            let present = match &store {
                Some(s) => s.contains(&next.id).unwrap_or(true),
                None => true,
            };
            if present {
                break;
            }
            out.push(*next);
        }
        Ok(out)
    }

    /// Refresh `src`'s index unless that was done within [`REFRESH_EVERY`].
    fn maybe_refresh(&self, src: &Source) -> Result<bool> {
        {
            let mut r = self.refreshed.lock().unwrap();
            let now = Instant::now();
            if r.get(&src.name)
                .is_some_and(|t| now.duration_since(*t) < REFRESH_EVERY)
            {
                return Ok(false);
            }
            r.insert(src.name.clone(), now);
        }
        src.index.refresh(&src.client)?;
        self.by_offset.lock().unwrap().clear();
        Ok(true)
    }

    fn fetch_from(
        &self,
        src: &Source,
        kind: Kind,
        id: &ObjectId,
    ) -> Result<Option<Vec<FetchedObject>>> {
        let Some(entry) = src.index.get(id) else {
            return Ok(None);
        };
        if entry.kind != kind {
            return Ok(None);
        }
        let plan = self.plan(src, &entry.pack, &entry.idx_entry())?;
        let records = read_records(&src.client, &entry.pack, &plan)?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let span = plan.last().map(|l| l.range().end).unwrap_or(0) - entry.offset;
        self.bytes.fetch_add(span, Ordering::Relaxed);
        let store = self.store.upgrade();
        // Only the requested object may fetch its base: a read-ahead neighbour
        // whose base is neither in the batch nor local is left out (it is read
        // on its own when wanted), so one read is one chain, never a tree.
        let base_of = |d: &IdxEntry, b: &ObjectId| -> Result<Arc<Vec<u8>>> {
            let missing = || Error::Missing(format!("delta base {}", b.to_hex()));
            match &store {
                Some(s) if d.id == *id || s.contains(b)? => s.get(d.kind, b),
                _ => Err(missing()),
            }
        };
        let mut out = Vec::new();
        for (e, r) in decode_batch(&src.name, records, &base_of) {
            match r {
                Ok(raw) => out.push((e.kind, e.id, raw)),
                Err(err) if e.id == *id => {
                    log::error!("remote {}: {err}", src.name);
                    return Err(err);
                }
                Err(Error::Missing(_)) => {}
                Err(err) => log::warn!("remote {}: read-ahead skipped: {err}", src.name),
            }
        }
        self.objects.fetch_add(out.len() as u64, Ordering::Relaxed);
        Ok(Some(out))
    }
}

impl Fallback for Lazy {
    fn fetch(&self, kind: Kind, id: &ObjectId) -> Result<Option<Vec<FetchedObject>>> {
        let mut failed = None;
        for pass in 0..2 {
            for src in &self.sources {
                if pass == 1 && !matches!(self.maybe_refresh(src), Ok(true)) {
                    continue;
                }
                match self.fetch_from(src, kind, id) {
                    Ok(Some(v)) => return Ok(Some(v)),
                    Ok(None) => {}
                    Err(e) => failed = Some(e),
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    fn has(&self, id: &ObjectId) -> bool {
        self.sources.iter().any(|s| s.index.has(id))
    }
}

/// Read the records `entries` (of one pack, sorted by offset) with ONE range
/// request spanning them, and check each record's header against its entry.
pub fn read_records(
    client: &Client,
    pack: &PackHash,
    entries: &[IdxEntry],
) -> Result<Vec<(IdxEntry, Result<Stored>)>> {
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return Ok(Vec::new());
    };
    let (start, end) = (first.offset, last.range().end);
    let bytes = client.get_range(&layout::pack_key(pack), start..end)?;
    Ok(split_records(pack, start, &bytes, entries))
}

/// Cut `bytes` (pack `pack` from offset `start`) into the records `entries`.
pub fn split_records(
    pack: &PackHash,
    start: u64,
    bytes: &[u8],
    entries: &[IdxEntry],
) -> Vec<(IdxEntry, Result<Stored>)> {
    entries
        .iter()
        .map(|e| {
            let r = e.range();
            let got = (r.start >= start)
                .then(|| bytes.get((r.start - start) as usize..(r.end - start) as usize))
                .flatten();
            let stored = match got {
                Some(b) => packidx::read_record(pack, e, b),
                None => Err(Error::corrupt(
                    format!("remote object {}", e.id.to_hex()),
                    "record outside the bytes read",
                )),
            };
            (*e, stored)
        })
        .collect()
}

/// Reads the base `id` of delta `entry` -> verified raw bytes.
pub type BaseOf<'a> = &'a dyn Fn(&IdxEntry, &ObjectId) -> Result<Arc<Vec<u8>>>;

/// Decode and verify a batch of records read from `remote`; a delta's base comes
/// from the batch (an earlier record) or from `base_of` (the local store, which
/// may fetch it: the delta is on this thread's chain meanwhile, see the module
/// docs).
pub fn decode_batch(
    remote: &str,
    records: Vec<(IdxEntry, Result<Stored>)>,
    base_of: BaseOf<'_>,
) -> Vec<(IdxEntry, Result<Vec<u8>>)> {
    let mut done: HashMap<ObjectId, usize> = HashMap::new();
    let mut out: Vec<(IdxEntry, Result<Vec<u8>>)> = Vec::with_capacity(records.len());
    for (e, stored) in records {
        let raw = stored.and_then(|s| {
            let base = match (s.codec, s.base) {
                (Codec::Delta, Some(b)) => match done.get(&b).map(|i| &out[*i].1) {
                    Some(Ok(raw)) => Some(Arc::new(raw.clone())),
                    _ => {
                        let _on = enter_chain(remote, e.kind, &e.id, &b)?;
                        Some(base_of(&e, &b)?)
                    }
                },
                _ => None,
            };
            packidx::decode_verified(e.kind, &e.id, &s, base.as_deref().map(|v| &v[..]))
        });
        if raw.is_ok() {
            done.insert(e.id, out.len());
        }
        out.push((e, raw));
    }
    out
}

/// Set `store`'s fallback from its configured remotes (none: no fallback). A
/// remote that cannot be opened (e.g. no credentials) is logged and left out.
pub fn install(store: &Arc<dyn ObjectStore>) -> Result<()> {
    let configs = super::list(&**store)?;
    let mut sources = Vec::new();
    for c in configs {
        match super::open(&**store, &c.name) {
            Ok(r) => sources.push(Source::from(&r)),
            Err(e) => log::warn!("remote {}: not used for lazy reads: {e}", c.name),
        }
    }
    if sources.is_empty() {
        store.set_fallback(None);
    } else {
        store.set_fallback(Some(Arc::new(Lazy::new(sources, Arc::downgrade(store)))));
    }
    Ok(())
}

#[cfg(test)]
#[path = "lazy_tests.rs"]
mod tests;
