//! Bulk fetching from a remote's packs (pull's node packs, hydrate's chunks):
//! wanted records grouped into few large range reads, each record verified, kept
//! in the local store.
//!
//! Invariants: never one request per object: wanted records of one pack are
//! merged into ranges (gaps under [`MERGE_GAP`], ranges up to [`MAX_RANGE`]); a
//! record that fails verification fails the fetch ([`Error::Corrupt`]) and is
//! not kept; a delta's base comes from the same batch or through the store.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::id::{ObjectId, PackHash};
use crate::remote::index::RemoteIndex;
use crate::remote::lazy::{self, Source};
use crate::remote::packidx::IdxEntry;
use crate::store::{Kind, ObjectStore};

/// Wanted records closer than this are read in one range (the gap is read too).
pub const MERGE_GAP: u64 = 1 << 20;
/// Largest single range read.
pub const MAX_RANGE: u64 = 32 << 20;

/// What a fetch brought.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Fetched {
    /// Objects kept.
    pub objects: u64,
    /// Bytes read from the remote.
    pub bytes: u64,
    /// Range requests made.
    pub requests: u64,
}

impl Fetched {
    /// Add `o`.
    pub fn add(&mut self, o: Fetched) {
        self.objects += o.objects;
        self.bytes += o.bytes;
        self.requests += o.requests;
    }
}

/// Fetch records `want` of pack `pack` of `src` into `store` (not committed).
pub fn fetch_entries(
    store: &dyn ObjectStore,
    src: &Source,
    pack: &PackHash,
    mut want: Vec<IdxEntry>,
) -> Result<Fetched> {
    want.sort_by_key(|e| e.offset);
    want.dedup_by_key(|e| e.id);
    let mut out = Fetched::default();
    let mut i = 0;
    while i < want.len() {
        let start = want[i].offset;
        let mut j = i + 1;
        while j < want.len()
            && want[j].offset.saturating_sub(want[j - 1].range().end) < MERGE_GAP
            && want[j].range().end - start <= MAX_RANGE
        {
            j += 1;
        }
        let group = &want[i..j];
        let records = lazy::read_records(&src.client, pack, group)?;
        out.requests += 1;
        out.bytes += group.last().map(|l| l.range().end).unwrap_or(start) - start;
        let base_of = |d: &IdxEntry, b: &ObjectId| store.get(d.kind, b);
        for (e, raw) in lazy::decode_batch(&src.name, records, &base_of) {
            let raw = raw.inspect_err(|err| log::error!("remote {}: {err}", src.name))?;
            store.put(e.kind, &raw)?;
            out.objects += 1;
        }
        i = j;
    }
    Ok(out)
}

/// Fetch `ids` (those the remote index knows; others are left out) grouped by
/// pack. Returns what was fetched and the ids no live pack holds.
pub fn fetch_ids(
    store: &dyn ObjectStore,
    src: &Source,
    ids: impl IntoIterator<Item = ObjectId>,
    progress: &mut dyn FnMut(Fetched),
) -> Result<(Fetched, Vec<ObjectId>)> {
    let mut by_pack: HashMap<PackHash, Vec<IdxEntry>> = HashMap::new();
    let mut unknown = Vec::new();
    for id in ids {
        match src.index.get(&id) {
            Some(e) => by_pack.entry(e.pack).or_default().push(e.idx_entry()),
            None => unknown.push(id),
        }
    }
    let mut total = Fetched::default();
    let mut packs: Vec<_> = by_pack.into_iter().collect();
    packs.sort_by_key(|(h, _)| *h);
    for (pack, want) in packs {
        total.add(fetch_entries(store, src, &pack, want)?);
        store.commit(Vec::new())?;
        progress(total);
    }
    Ok((total, unknown))
}

/// Reads tree nodes for a walk, fetching a missing node's WHOLE node pack (the
/// records not present locally) on first use: a tree comes in a few requests.
pub struct NodeFetcher<'a> {
    store: &'a dyn ObjectStore,
    src: &'a Source,
    /// Nodes fetched by this fetcher (a walk descends into these).
    pub fetched: Mutex<HashSet<ObjectId>>,
    /// What it brought.
    pub stats: Mutex<Fetched>,
}

impl<'a> NodeFetcher<'a> {
    /// A fetcher into `store` from `src`.
    pub fn new(store: &'a dyn ObjectStore, src: &'a Source) -> NodeFetcher<'a> {
        NodeFetcher {
            store,
            src,
            fetched: Mutex::new(HashSet::new()),
            stats: Mutex::new(Fetched::default()),
        }
    }

    /// Make node `id` local (fetching its pack when it is missing). `Ok(false)`:
    /// no remote pack holds it.
    pub fn ensure(&self, id: &ObjectId) -> Result<bool> {
        if self.store.contains(id)? {
            return Ok(true);
        }
        let Some(e) = self.src.index.get(id) else {
            return Ok(false);
        };
        let want = pack_entries(&self.src.index, &e.pack, e.idx_entry())?
            .into_iter()
            .filter(|x| x.kind == Kind::Node && !self.store.contains(&x.id).unwrap_or(false))
            .collect::<Vec<_>>();
        let ids: Vec<ObjectId> = want.iter().map(|x| x.id).collect();
        let got = fetch_entries(self.store, self.src, &e.pack, want)?;
        self.stats.lock().unwrap().add(got);
        self.fetched.lock().unwrap().extend(ids);
        Ok(true)
    }

    /// Read node `id` (fetching it when missing).
    pub fn read(&self, kind: Kind, id: &ObjectId) -> Result<std::sync::Arc<Vec<u8>>> {
        if kind == Kind::Node && !self.ensure(id)? {
            return Err(Error::Missing(format!(
                "tree node {} (neither local nor on remote {})",
                id.short(),
                self.src.name
            )));
        }
        self.store.get(kind, id)
    }

    /// Whether a walk that only wants what is missing stops at `id`: present
    /// locally before this fetcher brought it.
    pub fn was_local(&self, id: &ObjectId) -> bool {
        !self.fetched.lock().unwrap().contains(id) && self.store.contains(id).unwrap_or(false)
    }
}

/// Every entry of pack `pack` (from the cached idx; just `one` if it is gone).
fn pack_entries(index: &RemoteIndex, pack: &PackHash, one: IdxEntry) -> Result<Vec<IdxEntry>> {
    Ok(match index.idx_of(pack)? {
        Some(idx) => idx.entries,
        None => vec![one],
    })
}
