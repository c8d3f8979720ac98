//! Remote gc marking: what a remote's refs reach, and which packs must stay so
//! that every object a reader can see keeps its whole closure.
//!
//! Owns: the catalogue of every remote pack (condemned ones included: gc sees
//! what `RemoteIndex` hides), the walk from the refs (branch -> checkpoint
//! ancestry -> trees; session -> root, base, HEAD's ancestry, and the
//! checkpoints and workspace roots its log segments name), and the pack closure.
//!
//! Invariants:
//! - Marking never guesses: an unreadable ref, a checkpoint record a ref or an
//!   ancestry needs that is nowhere, a segment that does not verify, or a tree
//!   node that cannot be read fails the mark (`Error`), so gc deletes nothing on
//!   an incomplete picture. Checkpoints only a log names may be absent (push
//!   sends them when it has them).
//! - Tree nodes are read from the local store when it has them, else from the
//!   remote (the node records of the pack, verified by hash), kept in memory
//!   only: gc neither fills nor needs the local store.
//! - Pack closure: a kept pack's every object keeps its dependencies (children,
//!   delta base), even objects no ref reaches, because `RemoteIndex::has` will
//!   still say yes for them and a pusher skips what is under them.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId, ObjectId};
use crate::meta::TrackKind;
use crate::reach::{ChunkCheck, Walk};
use crate::refs::Checkpoint;
use crate::remote::client::Client;
use crate::remote::layout;
use crate::remote::lazy;
use crate::remote::packidx::{Idx, IdxEntry};
use crate::remote::pull::refs::{self as rrefs, Fetched};
use crate::remote::refval::RefValue;
use crate::remote::segment::SegEntry;
use crate::store::{Kind, ObjectStore};

/// Largest range read when fetching a pack's node records.
const MAX_RANGE: u64 = 32 << 20;

/// Every readable remote pack, with where each id lives.
#[derive(Default)]
pub struct Catalog {
    /// The packs' indexes.
    pub packs: Vec<Idx>,
    /// id -> (pack number, entry number), one per copy.
    pub by_id: HashMap<ObjectId, Vec<(u32, u32)>>,
}

impl Catalog {
    /// A catalogue of `packs`.
    pub fn new(packs: Vec<Idx>) -> Catalog {
        let mut by_id: HashMap<ObjectId, Vec<(u32, u32)>> = HashMap::new();
        for (p, idx) in packs.iter().enumerate() {
            for (e, entry) in idx.entries.iter().enumerate() {
                by_id
                    .entry(entry.id)
                    .or_default()
                    .push((p as u32, e as u32));
            }
        }
        Catalog { packs, by_id }
    }

    fn entry(&self, at: (u32, u32)) -> &IdxEntry {
        &self.packs[at.0 as usize].entries[at.1 as usize]
    }
}

/// Every ref on the remote, strictly: one that cannot be read or does not decode
/// fails the listing (gc must not mark without it). A ref deleted between the
/// LIST and the read is skipped.
pub fn list_refs(client: &Client) -> Result<Vec<Fetched>> {
    let mut out = Vec::new();
    for kind in [TrackKind::Branch, TrackKind::Session] {
        let mut names = Vec::new();
        for m in client.list(layout::refs_dir(kind))? {
            match layout::parse_ref_key(kind, &m.key) {
                Some(n) => names.push(n),
                None => log::warn!(
                    "remote {}: {} is not a ref name; ignored by gc",
                    client.name(),
                    m.key
                ),
            }
        }
        names.sort();
        for n in names {
            out.extend(rrefs::read(client, kind, &n)?);
        }
    }
    Ok(out)
}

/// What the marking found.
#[derive(Default, Debug)]
pub struct Marked {
    /// Live checkpoint records (hex).
    pub checkpoints: HashSet<String>,
    /// Live log segments (hex).
    pub logs: HashSet<String>,
    /// Objects the refs reach (with delta bases).
    pub reached: HashSet<ObjectId>,
    /// Packs kept (numbers in the catalogue).
    pub packs: HashSet<u32>,
    /// Tree nodes read from the remote.
    pub nodes_read: u64,
    /// Bytes read from the remote for them.
    pub bytes_read: u64,
}

/// Mark from `refs` (see the module docs).
pub fn mark(
    store: &dyn ObjectStore,
    client: &Client,
    cat: &Catalog,
    refs: &[Fetched],
) -> Result<Marked> {
    let mut out = Marked::default();
    let mut required: Vec<String> = Vec::new();
    let mut optional: Vec<String> = Vec::new();
    let mut roots: Vec<String> = Vec::new();
    for f in refs {
        match &f.value {
            RefValue::Branch(b) => required.push(b.checkpoint.clone()),
            RefValue::Session(s) => {
                let rec = s.session_record()?;
                required.extend(rec.head.map(|h| h.to_hex()));
                roots.extend([rec.root.to_hex(), rec.base.to_hex()]);
                for h in &s.logs {
                    out.logs.insert(h.clone());
                }
                named_by_logs(client, &s.logs, &mut optional, &mut roots)?;
            }
        }
    }
    let cps = checkpoints(store, client, &required, &optional)?;
    for c in cps.values() {
        roots.push(c.root.to_hex());
    }
    out.checkpoints = cps.into_keys().collect();
    let nodes = RemoteNodes::new(store, client, cat);
    let read = |k: Kind, id: &ObjectId| nodes.read(k, id);
    let mut w = Walk::new(&read, ChunkCheck::Mark);
    let mut seen_roots = HashSet::new();
    for r in roots {
        if !seen_roots.insert(r.clone()) {
            continue;
        }
        let id = NodeId::from_hex(&r)
            .ok_or_else(|| Error::corrupt("remote ref", format!("bad tree root {r:?}")))?;
        w.root("ref", id);
    }
    fail_on_problems(&w)?;
    out.reached = w.reached().copied().collect();
    add_bases(cat, &mut out.reached);
    pack_closure(cat, &mut w, &out.reached, &mut out.packs)?;
    let stats = *nodes.stats.lock().unwrap();
    (out.nodes_read, out.bytes_read) = stats;
    Ok(out)
}

fn fail_on_problems(w: &Walk<'_>) -> Result<()> {
    match w.problems.first() {
        None => Ok(()),
        Some(p) => Err(Error::Missing(format!(
            "remote gc stopped, nothing deleted: {} problem(s) marking; first: {} ({}): {}",
            w.problems.len(),
            p.path,
            p.object.as_deref().unwrap_or("-"),
            p.error
        ))),
    }
}

/// Add the delta bases of every copy of every id in `ids`, transitively.
fn add_bases(cat: &Catalog, ids: &mut HashSet<ObjectId>) {
    let mut queue: VecDeque<ObjectId> = ids.iter().copied().collect();
    while let Some(id) = queue.pop_front() {
        for at in cat.by_id.get(&id).into_iter().flatten() {
            if let Some(b) = cat.entry(*at).base
                && ids.insert(b)
            {
                queue.push_back(b);
            }
        }
    }
}

/// Keep every pack holding a reached id, then everything the objects of kept
/// packs depend on (walking their nodes), until nothing changes.
fn pack_closure(
    cat: &Catalog,
    w: &mut Walk<'_>,
    reached: &HashSet<ObjectId>,
    kept: &mut HashSet<u32>,
) -> Result<()> {
    let mut live: HashSet<ObjectId> = reached.clone();
    let mut frontier: Vec<ObjectId> = live.iter().copied().collect();
    while !frontier.is_empty() {
        let mut new_packs = Vec::new();
        for id in frontier.drain(..) {
            for at in cat.by_id.get(&id).into_iter().flatten() {
                if kept.insert(at.0) {
                    new_packs.push(at.0);
                }
            }
        }
        let before: HashSet<ObjectId> = w.reached().copied().collect();
        let mut more: HashSet<ObjectId> = HashSet::new();
        for p in new_packs {
            for e in &cat.packs[p as usize].entries {
                if live.contains(&e.id) {
                    continue;
                }
                if e.kind == Kind::Node {
                    w.any_node("pack closure", e.id.node());
                } else {
                    more.insert(e.id);
                }
            }
        }
        fail_on_problems(w)?;
        more.extend(w.reached().filter(|id| !before.contains(*id)).copied());
        add_bases(cat, &mut more);
        for id in more {
            if live.insert(id) {
                frontier.push(id);
            }
        }
    }
    Ok(())
}

/// Download and verify `logs` (segment hashes, hex); push the checkpoints and
/// workspace roots their operation records and messages name.
fn named_by_logs(
    client: &Client,
    logs: &[String],
    checkpoints: &mut Vec<String>,
    roots: &mut Vec<String>,
) -> Result<()> {
    crate::remote::pull::import::each_segment(client, logs, &mut |k, seg| {
        for e in seg.entries {
            match e {
                SegEntry::Op { seq, v } => {
                    let bytes = serde_json::to_vec(&v).expect("a JSON value serializes");
                    let op = crate::oplog::Operation::decode(&format!("{k}#{seq}"), &bytes)?;
                    checkpoints.extend(op.checkpoints().map(|c| c.to_hex()));
                    roots.extend([op.before.workspace.to_hex(), op.after.workspace.to_hex()]);
                }
                SegEntry::Msg { tag, seq, v } => {
                    let bytes = serde_json::to_vec(&v).expect("a JSON value serializes");
                    let owner = format!("{k}#{}{seq}", tag as char);
                    let m = crate::messages::Message::decode(&owner, &bytes)?;
                    checkpoints.extend(m.checkpoint.map(|c| c.to_hex()));
                    roots.push(m.workspace.to_hex());
                }
                SegEntry::Attach { .. } | SegEntry::Touched { .. } => {}
            }
        }
        Ok(())
    })?;
    roots.retain(|r| !r.is_empty());
    Ok(())
}

/// The checkpoint records reachable from `required` and `optional` through
/// parents (local copies used when present, else read from the remote and
/// verified). A required one (or any ancestor) that is nowhere fails; an
/// optional head that is nowhere is skipped.
pub fn checkpoints(
    store: &dyn ObjectStore,
    client: &Client,
    required: &[String],
    optional: &[String],
) -> Result<HashMap<String, Checkpoint>> {
    let mut found: HashMap<String, Checkpoint> = HashMap::new();
    let mut level: Vec<(String, bool)> = required
        .iter()
        .map(|h| (h.clone(), true))
        .chain(optional.iter().map(|h| (h.clone(), false)))
        .collect();
    while !level.is_empty() {
        let mut remote: BTreeMap<String, bool> = BTreeMap::new();
        let mut next: Vec<(String, bool)> = Vec::new();
        for (hex, must) in level.drain(..) {
            if found.contains_key(&hex) {
                continue;
            }
            let id = CheckpointId::from_hex(&hex)
                .ok_or_else(|| Error::corrupt("remote gc", format!("bad checkpoint {hex:?}")))?;
            match store.meta_get(&crate::meta::checkpoint_key(&id))? {
                Some(b) => {
                    let c = Checkpoint::decode(&hex, &b)?;
                    next.extend(c.parents.iter().map(|p| (p.to_hex(), true)));
                    found.insert(hex, c);
                }
                None => *remote.entry(hex).or_default() |= must,
            }
        }
        let keys: Vec<String> = remote.keys().map(|h| layout::checkpoint_key(h)).collect();
        for ((hex, must), got) in remote
            .into_iter()
            .zip(client.get_many(&keys, layout::Body::Checkpoint)?)
        {
            let Some(got) = got else {
                if must {
                    return Err(Error::Missing(format!(
                        "remote gc stopped, nothing deleted: checkpoint {hex} is needed but \
                         neither local nor on remote {}",
                        client.name()
                    )));
                }
                continue;
            };
            let c = Checkpoint::decode(&hex, &got.bytes)?;
            if c.id.to_hex() != hex || !c.id_matches() {
                return Err(Error::corrupt(
                    format!("remote checkpoint {hex}"),
                    "its id is not the hash of its record",
                ));
            }
            next.extend(c.parents.iter().map(|p| (p.to_hex(), true)));
            found.insert(hex, c);
        }
        level = next;
    }
    Ok(found)
}

/// Reads tree nodes for the marking walk: local store first, else the remote
/// copy (any pack, condemned ones included), the pack's node records fetched
/// together and verified; kept in memory.
struct RemoteNodes<'a> {
    store: &'a dyn ObjectStore,
    client: &'a Client,
    cat: &'a Catalog,
    cache: Mutex<HashMap<ObjectId, Arc<Vec<u8>>>>,
    /// (nodes read, bytes read) from the remote.
    stats: Mutex<(u64, u64)>,
}

impl<'a> RemoteNodes<'a> {
    fn new(store: &'a dyn ObjectStore, client: &'a Client, cat: &'a Catalog) -> RemoteNodes<'a> {
        RemoteNodes {
            store,
            client,
            cat,
            cache: Mutex::new(HashMap::new()),
            stats: Mutex::new((0, 0)),
        }
    }

    fn read(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>> {
        if let Some(v) = self.cache.lock().unwrap().get(id) {
            return Ok(v.clone());
        }
        if self.store.contains(id)? {
            return self.store.get(kind, id);
        }
        let Some(at) = self.cat.by_id.get(id).and_then(|v| v.first()) else {
            return Err(Error::Missing(format!(
                "tree node {} is neither local nor on remote {}",
                id.short(),
                self.client.name()
            )));
        };
        self.fetch_pack(at.0)?;
        self.cache.lock().unwrap().get(id).cloned().ok_or_else(|| {
            Error::corrupt(format!("remote object {}", id.to_hex()), "not in its pack")
        })
    }

    /// Fetch the node records of pack `p` that are neither cached nor local.
    fn fetch_pack(&self, p: u32) -> Result<()> {
        let idx = &self.cat.packs[p as usize];
        let mut want: Vec<IdxEntry> = {
            let cache = self.cache.lock().unwrap();
            idx.entries
                .iter()
                .filter(|e| e.kind == Kind::Node && !cache.contains_key(&e.id))
                .filter(|e| !self.store.contains(&e.id).unwrap_or(false))
                .copied()
                .collect()
        };
        want.sort_by_key(|e| e.offset);
        let mut i = 0;
        while i < want.len() {
            let start = want[i].offset;
            let mut j = i + 1;
            while j < want.len() && want[j].range().end - start <= MAX_RANGE {
                j += 1;
            }
            let records = lazy::read_records(self.client, &idx.pack_hash, &want[i..j])?;
            let bytes = want[j - 1].range().end - start;
            let base_of = |d: &IdxEntry, b: &ObjectId| match self.cache.lock().unwrap().get(b) {
                Some(v) => Ok(v.clone()),
                None => self.store.get(d.kind, b),
            };
            let decoded = lazy::decode_batch(self.client.name(), records, &base_of);
            let mut cache = self.cache.lock().unwrap();
            let mut n = 0;
            for (e, raw) in decoded {
                cache.insert(e.id, Arc::new(raw?));
                n += 1;
            }
            let mut s = self.stats.lock().unwrap();
            s.0 += n;
            s.1 += bytes;
            i = j;
        }
        Ok(())
    }
}
