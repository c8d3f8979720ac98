//! Store verification and repair (`treefork fsck [--repair]`).
//!
//! Owns: the checks that the store is whole —
//! - every pack's records parse (a torn tail, left by a crash while appending, is
//!   reported as information: nothing indexed can be in it);
//! - every index entry names a record with the same id, kind and length;
//! - every session, branch and checkpoint record parses and names what exists;
//! - every object reachable from them is readable and hashes to its id (chunks are
//!   read uncached, so this reads the whole live store);
//!
//! With `repair` (only with the store offline), the fixes that never lose data:
//! - the index is rebuilt from the packs: each record whose payload verifies (a
//!   delta against a verified whole record) and whose id the index lacks (or names
//!   a bad record for) is indexed;
//! - a record that names something unreadable or missing (a session whose root is
//!   gone, a branch to a missing checkpoint, ...) is *moved aside* to the `l/`
//!   prefix with the reason, never deleted.
//!
//! Problems are reported with the owner (session/checkpoint/branch), the path inside
//! the tree and the object id, so a damaged chunk names the file it belongs to.
//!
//! fsck takes the store as [`crate::store::Packs`] (pack images, index, verified
//! reads) and reads the records through its [`crate::store::MetaStore`]; what a
//! remote holds (the walk's boundary, [`HeldElsewhere`]) comes from the caller:
//! fsck never imports the remote tier.

use std::collections::{HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::Result;
use crate::id::{NodeId, ObjectId};
use crate::meta::{self, MetaOp};
use crate::reach::{self, ChunkCheck, HeldElsewhere, Problem, Walk};
use crate::store::{Kind as ObjKind, Loc, Packs, pack};

/// Key prefix of records moved aside by a repair (`l/` + the original key).
pub use crate::meta::LOST_PREFIX;

/// What fsck found (and did).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct FsckReport {
    /// Pack files scanned.
    pub packs: u64,
    /// Records found in them.
    pub records: u64,
    /// Index entries.
    pub index_entries: u64,
    /// Reachable objects read and verified.
    pub objects_verified: u64,
    /// Bytes of chunk data verified.
    pub bytes_verified: u64,
    /// Reachable objects not stored locally but held by a configured remote
    /// (trimmed or never hydrated; they come back lazily): not read, not problems.
    pub remote_held: u64,
    /// Records in packs no index entry names (garbage for gc, or what a repair
    /// indexes).
    pub unindexed_records: u64,
    /// Torn pack tails (informational): "pack N at offset O: reason".
    pub torn_tails: Vec<String>,
    /// Problems: anything here means the store is damaged.
    pub problems: Vec<Problem>,
    /// What a repair changed.
    pub repaired: Vec<String>,
    /// The metadata database failed its check at open and the repair rebuilt it:
    /// from what, what came back and what did not (`None`: it was sound).
    pub rebuilt: Option<crate::store::RebuildReport>,
}

impl FsckReport {
    /// No problems found.
    pub fn clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verify the store; with `repair`, fix what can be fixed without losing data (the
/// caller guarantees no session is mounted). `held`: the objects a remote holds and
/// the store does not (see [`HeldElsewhere`]; `None` when no remote is configured).
/// `progress(phase, done, total)`.
///
/// The phases, in order (one function each, below): `scan_packs`, `verify_deltas`
/// (repair only), `check_index`, `repair_index` (repair only), `walk_roots`, and with
/// `repair` `move_aside` followed by a fresh check of the repaired store.
pub fn fsck(
    store: &dyn Packs,
    held: Option<&dyn HeldElsewhere>,
    repair: bool,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<FsckReport> {
    let mut rep = FsckReport::default();
    let mut scan = scan_packs(store, repair, &mut rep, progress)?;
    verify_deltas(store, &mut scan);
    let index = check_index(store, &scan, &mut rep, progress)?;
    if repair {
        repair_index(store, &scan, &index, &mut rep)?;
    }
    let walked = walk_roots(store, held, &mut rep, progress)?;
    if repair {
        move_aside(store, &walked, &mut rep)?;
        // What is left: a fresh check of the repaired store.
        let after = fsck(store, held, false, progress)?;
        rep.problems = after.problems;
        rep.unindexed_records = after.unindexed_records;
        rep.index_entries = after.index_entries;
    }
    progress("done", 1, 1);
    Ok(rep)
}

/// What the pack scan learned.
#[derive(Default)]
struct PackScan {
    /// Every record's header, by (pack, offset).
    at: HashMap<(u32, u64), pack::RecordHeader>,
    /// How many bytes of each pack were read.
    scanned_len: HashMap<u32, u64>,
    /// Repair only: a location whose payload verifies, for each id.
    valid_copies: HashMap<ObjectId, Loc>,
    /// Repair only: delta records, verified by [`verify_deltas`] once every whole
    /// record (a possible base) is known.
    deltas: Vec<(pack::RecordHeader, Vec<u8>, Loc)>,
    /// The base each delta copy in `valid_copies` was verified against: indexing the
    /// delta also points the base's entry at that whole copy.
    verified_base: HashMap<ObjectId, ObjectId>,
}

/// Phase 1: scan every pack's records. Records of packs a writer is still
/// appending to may be newer than our read; those index entries are checked by
/// reading them instead (see [`check_index`]). A torn tail of an unprotected pack is
/// reported as information.
fn scan_packs(
    store: &dyn Packs,
    repair: bool,
    rep: &mut FsckReport,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<PackScan> {
    let protected = store.protected_packs();
    let packs = store.packs()?;
    let mut scan = PackScan::default();
    let total = packs.len() as u64;
    for (i, (n, _)) in packs.iter().enumerate() {
        progress("packs", i as u64, total);
        let image = store.read_pack(*n)?;
        let (recs, err) = pack::scan(&image);
        rep.packs += 1;
        rep.records += recs.len() as u64;
        if let Some((off, e)) = err
            && !protected.contains(n)
        {
            rep.torn_tails
                .push(format!("pack {n} at offset {off}: {e}"));
        }
        scan.scanned_len.insert(*n, image.len() as u64);
        for r in recs {
            if repair {
                let start = r.offset as usize + pack::RECORD_HEADER_LEN;
                let payload = &image[start..start + r.header.stored_len as usize];
                let loc = Loc {
                    kind: r.header.kind,
                    codec: r.header.codec,
                    pack: *n,
                    offset: r.offset,
                    stored_len: r.header.stored_len,
                    raw_len: r.header.raw_len,
                };
                if r.header.codec == pack::Codec::Delta {
                    // Verified once every whole record (its possible base) is known.
                    scan.deltas.push((r.header, payload.to_vec(), loc));
                } else if pack::decode_payload(&r.header, payload).is_ok() {
                    scan.valid_copies.entry(r.header.id).or_insert(loc);
                }
            }
            scan.at.insert((*n, r.offset), r.header);
        }
    }
    Ok(scan)
}

/// Phase 1b (repair only; without repair no deltas are collected): a delta record
/// is a valid copy when it decodes against a verified whole copy of its base of the
/// same kind (one level: a delta whose base has no verified whole copy is not
/// indexed).
fn verify_deltas(store: &dyn Packs, scan: &mut PackScan) {
    for (h, payload, loc) in std::mem::take(&mut scan.deltas) {
        let Some(b) = pack::delta_base(&h, &payload) else {
            continue;
        };
        let ok = scan
            .valid_copies
            .get(&b)
            .filter(|bloc| bloc.codec != pack::Codec::Delta && bloc.kind == h.kind)
            .and_then(|bloc| store.read_whole_at(&b, bloc).ok())
            .is_some_and(|base| pack::decode_payload_with(&h, &payload, Some(&base)).is_ok());
        if ok && !scan.valid_copies.contains_key(&h.id) {
            scan.valid_copies.insert(h.id, loc);
            scan.verified_base.insert(h.id, b);
        }
    }
}

/// The index as [`check_index`] read it.
struct IndexCheck {
    /// Every index entry.
    index: Vec<(ObjectId, Loc)>,
    /// Ids whose entry names no matching record.
    bad: HashSet<ObjectId>,
}

/// Phase 2: index ↔ packs. Every index entry must name a scanned record with the
/// same id, kind and length (an entry past the scanned end of its pack, written
/// after the scan, is checked by reading it). Counts the records no entry names.
fn check_index(
    store: &dyn Packs,
    scan: &PackScan,
    rep: &mut FsckReport,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<IndexCheck> {
    progress("index", 0, 1);
    let index = store.index()?;
    rep.index_entries = index.len() as u64;
    let mut indexed: HashSet<(u32, u64)> = HashSet::new();
    let mut bad: HashSet<ObjectId> = HashSet::new();
    for (id, loc) in &index {
        indexed.insert((loc.pack, loc.offset));
        let ok = match scan.at.get(&(loc.pack, loc.offset)) {
            Some(h) => h.id == *id && h.kind == loc.kind && h.stored_len == loc.stored_len,
            // Written after we read that pack (or the pack is newer): read it.
            None if loc.offset >= scan.scanned_len.get(&loc.pack).copied().unwrap_or(0) => {
                store.read_verified(loc.kind, id).is_ok()
            }
            None => false,
        };
        if !ok {
            bad.insert(*id);
            rep.problems.push(Problem::record(
                "index",
                Some(&id.0),
                format!(
                    "index entry names pack {} offset {}, where no matching record is",
                    loc.pack, loc.offset
                ),
            ));
        }
    }
    rep.unindexed_records = scan.at.keys().filter(|k| !indexed.contains(k)).count() as u64;
    Ok(IndexCheck { index, bad })
}

/// Phase 3 (repair only): index every verified copy whose id the index lacks or
/// names a bad record for, before the walk, so the walk sees the repaired store.
/// The index problems a repaired entry answers are dropped from the report.
fn repair_index(
    store: &dyn Packs,
    scan: &PackScan,
    checked: &IndexCheck,
    rep: &mut FsckReport,
) -> Result<()> {
    let have: HashSet<ObjectId> = checked.index.iter().map(|(id, _)| *id).collect();
    let bad = &checked.bad;
    let mut ops = Vec::new();
    let mut put: HashSet<ObjectId> = HashSet::new();
    for (id, loc) in &scan.valid_copies {
        if (!have.contains(id) || bad.contains(id)) && put.insert(*id) {
            ops.push(MetaOp::Put(meta::object_key(id), loc.encode()));
            // A delta reads its base through the index: make that entry the
            // whole copy the delta was verified against (one level, always).
            if let Some(b) = scan.verified_base.get(id)
                && put.insert(*b)
            {
                ops.push(MetaOp::Put(
                    meta::object_key(b),
                    scan.valid_copies[b].encode(),
                ));
            }
        }
    }
    let fixed: HashSet<String> = bad
        .iter()
        .filter(|id| scan.valid_copies.contains_key(*id))
        .map(|id| id.to_hex())
        .collect();
    if !ops.is_empty() {
        rep.repaired.push(format!(
            "index: {} entries written from verified pack records ({} replaced a bad entry)",
            ops.len(),
            fixed.len()
        ));
        store.commit(ops)?;
    }
    rep.problems
        .retain(|p| p.owner != "index" || !p.object.as_ref().is_some_and(|o| fixed.contains(o)));
    Ok(())
}

/// The roots [`walk_roots`] walked, and whether each tree root itself was readable.
struct Walked {
    roots: reach::Roots,
    root_ok: HashMap<NodeId, bool>,
}

/// Phase 4: read every session, branch and checkpoint record and walk everything
/// they reach, reading and verifying every node and chunk (uncached).
fn walk_roots(
    store: &dyn Packs,
    held: Option<&dyn HeldElsewhere>,
    rep: &mut FsckReport,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Walked> {
    let roots = reach::roots(store.meta())?;
    let tree_roots = roots.tree_roots();
    let read = |k: ObjKind, id: &ObjectId| store.read_verified(k, id);
    // Objects a remote holds and the store does not (trimmed, never hydrated):
    // counted, not read, not problems.
    let on_remote = |id: &ObjectId| held.is_some_and(|h| h.is_held(id));
    let mut walk = Walk::new(&read, ChunkCheck::Verify);
    if held.is_some() {
        walk = walk.with_boundary(&on_remote);
    }
    let total = tree_roots.len() as u64;
    let mut root_ok: HashMap<NodeId, bool> = HashMap::new();
    for (i, (owner, id)) in tree_roots.into_iter().enumerate() {
        progress("objects", i as u64, total);
        let before = walk.problems.len();
        walk.root(&owner, id);
        let root_broken = walk.problems[before..]
            .iter()
            .any(|p| p.path == "/" && p.object.as_deref() == Some(&id.to_hex()));
        root_ok.entry(id).or_insert(!root_broken);
    }
    rep.remote_held = walk.at_boundary.len() as u64;
    rep.objects_verified = (walk.nodes.len() + walk.chunks.len()) as u64 - rep.remote_held;
    rep.bytes_verified = walk.bytes_verified;
    rep.problems.extend(roots.problems.iter().cloned());
    rep.problems.extend(walk.problems);
    Ok(Walked { roots, root_ok })
}

/// Phase 5 (repair only): move aside (to the `l/` prefix, with the reason) every
/// record that cannot be used: a session or live checkpoint whose root node is
/// missing or damaged, a branch naming a checkpoint that does not exist.
fn move_aside(store: &dyn Packs, walked: &Walked, rep: &mut FsckReport) -> Result<()> {
    let Walked { roots, root_ok } = walked;
    let mut ops = Vec::new();
    let mut aside = |key: Vec<u8>, value: serde_json::Value, what: String, why: &str| {
        let lost = meta::lost_key(&key);
        ops.push(MetaOp::Put(
            lost,
            serde_json::to_vec(&json!({"reason": why, "record": value})).unwrap(),
        ));
        ops.push(MetaOp::Delete(key));
        rep.repaired.push(format!("moved {what} aside: {why}"));
    };
    let broken = |id: &NodeId| root_ok.get(id) == Some(&false);
    for s in &roots.sessions {
        if broken(&s.root) {
            aside(
                meta::session_key(&s.name),
                serde_json::to_value(s).unwrap(),
                format!("session {}", s.name),
                "its root node is missing or damaged",
            );
        }
    }
    for (id, c) in &roots.checkpoints {
        if roots.live.contains(id) && broken(&c.root) {
            aside(
                meta::checkpoint_key(id),
                serde_json::to_value(c).unwrap(),
                format!("checkpoint {}", id.to_hex()),
                "its root node is missing or damaged",
            );
        }
    }
    for (name, c) in &roots.branches {
        let exists = roots.checkpoints.contains_key(c);
        if !exists {
            aside(
                meta::ref_key(name),
                json!({"checkpoint": c}),
                format!("branch {}", crate::refs::names::display(name, None)),
                "it names a checkpoint that does not exist",
            );
        }
    }
    if !ops.is_empty() {
        store.commit(ops)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ObjectStore, PackStore};

    fn text(seed: u32, n: u32) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("let v{i} = {};\n", i.wrapping_mul(seed) % 7919).into_bytes())
            .collect()
    }

    fn loc_of(s: &PackStore, id: &ObjectId) -> Loc {
        s.index()
            .unwrap()
            .into_iter()
            .find(|(i, _)| i == id)
            .unwrap()
            .1
    }

    #[test]
    fn repair_indexes_a_delta_with_its_base_whole() {
        // Object x exists twice in the packs: as a delta (of w) and whole; y is a
        // delta of the whole x. The index has lost y and names x's delta copy.
        // Re-indexing y must also point x at its whole copy.
        let d = tempfile::tempdir().unwrap();
        let s = PackStore::open(d.path()).unwrap();
        let w = text(5, 3000);
        let mut x = w.clone();
        x.splice(900..900, b"// x\n".iter().copied());
        let mut y = x.clone();
        y.splice(30_000..30_000, b"// y\n".iter().copied());
        let wid = s.put(ObjKind::Chunk, &w).unwrap();
        let xid = s.put_based(ObjKind::Chunk, &x, Some(wid)).unwrap();
        s.commit(vec![]).unwrap();
        let x_delta = loc_of(&s, &xid);
        assert_eq!(x_delta.codec, pack::Codec::Delta);
        let xkey = meta::object_key(&xid);
        s.commit(vec![MetaOp::Delete(xkey.clone())]).unwrap();
        s.put(ObjKind::Chunk, &x).unwrap();
        let yid = s.put_based(ObjKind::Chunk, &y, Some(xid)).unwrap();
        s.commit(vec![]).unwrap();
        assert_ne!(loc_of(&s, &xid).codec, pack::Codec::Delta);
        assert_eq!(loc_of(&s, &yid).codec, pack::Codec::Delta);
        s.commit(vec![
            MetaOp::Put(xkey, x_delta.encode()),
            MetaOp::Delete(meta::object_key(&yid)),
        ])
        .unwrap();
        drop(s);

        let (s, _) = PackStore::open_for_repair(d.path()).unwrap();
        let rep = fsck(&s, None, true, &mut |_, _, _| {}).unwrap();
        assert!(!rep.repaired.is_empty(), "{rep:?}");
        assert_ne!(loc_of(&s, &xid).codec, pack::Codec::Delta);
        assert_eq!(&**s.read_verified(ObjKind::Chunk, &yid).unwrap(), &y);
        assert_eq!(&**s.read_verified(ObjKind::Chunk, &xid).unwrap(), &x);
        assert_eq!(&**s.read_verified(ObjKind::Chunk, &wid).unwrap(), &w);
    }
}
