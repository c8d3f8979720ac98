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
//! reads) and reads the records through its [`crate::store::MetaStore`].

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::json;

use crate::error::Result;
use crate::id::NodeId;
use crate::meta::{self, MetaOp};
use crate::reach::{self, ChunkCheck, Problem, Walk};
use crate::store::{Kind as ObjKind, Loc, Packs, pack};

/// Key prefix of records moved aside by a repair (`l/` + the original key).
pub use crate::meta::LOST_PREFIX;

/// What fsck found (and did).
#[derive(Debug, Default, Serialize)]
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
    /// Records in packs no index entry names (garbage for gc, or what a repair
    /// indexes).
    pub unindexed_records: u64,
    /// Torn pack tails (informational): "pack N at offset O: reason".
    pub torn_tails: Vec<String>,
    /// Problems: anything here means the store is damaged.
    pub problems: Vec<Problem>,
    /// What a repair changed.
    pub repaired: Vec<String>,
}

impl FsckReport {
    /// No problems found.
    pub fn clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verify the store; with `repair`, fix what can be fixed without losing data (the
/// caller guarantees no session is mounted). `progress(phase, done, total)`.
pub fn fsck(
    store: &dyn Packs,
    repair: bool,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<FsckReport> {
    let mut rep = FsckReport::default();
    // 1. Packs. Records of packs a writer is still appending to may be newer than
    // our read; those index entries are checked by reading them instead.
    let protected = store.protected_packs();
    let packs = store.packs()?;
    let mut at: HashMap<(u32, u64), pack::RecordHeader> = HashMap::new();
    let mut scanned_len: HashMap<u32, u64> = HashMap::new();
    let mut valid_copies: HashMap<[u8; 32], Loc> = HashMap::new();
    let mut deltas: Vec<(pack::RecordHeader, Vec<u8>, Loc)> = Vec::new();
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
        scanned_len.insert(*n, image.len() as u64);
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
                    deltas.push((r.header, payload.to_vec(), loc));
                } else if pack::decode_payload(&r.header, payload).is_ok() {
                    valid_copies.entry(r.header.id).or_insert(loc);
                }
            }
            at.insert((*n, r.offset), r.header);
        }
    }
    // The base each delta copy in `valid_copies` was verified against: indexing the
    // delta also points the base's entry at that whole copy.
    let mut verified_base: HashMap<[u8; 32], [u8; 32]> = HashMap::new();
    for (h, payload, loc) in deltas {
        let Some(b) = pack::delta_base(&h, &payload) else {
            continue;
        };
        let ok = valid_copies
            .get(&b)
            .filter(|bloc| bloc.codec != pack::Codec::Delta && bloc.kind == h.kind)
            .and_then(|bloc| store.read_whole_at(&b, bloc).ok())
            .is_some_and(|base| pack::decode_payload_with(&h, &payload, Some(&base)).is_ok());
        if ok && !valid_copies.contains_key(&h.id) {
            valid_copies.insert(h.id, loc);
            verified_base.insert(h.id, b);
        }
    }
    // 2. Index ↔ packs.
    progress("index", 0, 1);
    let index = store.index()?;
    rep.index_entries = index.len() as u64;
    let mut indexed: HashSet<(u32, u64)> = HashSet::new();
    let mut bad_entries: Vec<([u8; 32], Loc)> = Vec::new();
    for (id, loc) in &index {
        indexed.insert((loc.pack, loc.offset));
        let ok = match at.get(&(loc.pack, loc.offset)) {
            Some(h) => h.id == *id && h.kind == loc.kind && h.stored_len == loc.stored_len,
            // Written after we read that pack (or the pack is newer): read it.
            None if loc.offset >= scanned_len.get(&loc.pack).copied().unwrap_or(0) => {
                store.read_verified(loc.kind, id).is_ok()
            }
            None => false,
        };
        if !ok {
            bad_entries.push((*id, *loc));
            rep.problems.push(Problem::record(
                "index",
                Some(id),
                format!(
                    "index entry names pack {} offset {}, where no matching record is",
                    loc.pack, loc.offset
                ),
            ));
        }
    }
    rep.unindexed_records = at.keys().filter(|k| !indexed.contains(k)).count() as u64;

    // 3. Repair the index before walking, so the walk sees the repaired store.
    if repair {
        let have: HashSet<[u8; 32]> = index.iter().map(|(id, _)| *id).collect();
        let bad: HashSet<[u8; 32]> = bad_entries.iter().map(|(id, _)| *id).collect();
        let mut ops = Vec::new();
        let mut put: HashSet<[u8; 32]> = HashSet::new();
        for (id, loc) in &valid_copies {
            if (!have.contains(id) || bad.contains(id)) && put.insert(*id) {
                ops.push(MetaOp::Put(meta::object_key(id), loc.encode()));
                // A delta reads its base through the index: make that entry the
                // whole copy the delta was verified against (one level, always).
                if let Some(b) = verified_base.get(id)
                    && put.insert(*b)
                {
                    ops.push(MetaOp::Put(meta::object_key(b), valid_copies[b].encode()));
                }
            }
        }
        let fixed: HashSet<String> = bad
            .iter()
            .filter(|id| valid_copies.contains_key(*id))
            .map(|id| crate::id::hex(id))
            .collect();
        if !ops.is_empty() {
            rep.repaired.push(format!(
                "index: {} entries written from verified pack records ({} replaced a bad entry)",
                ops.len(),
                fixed.len()
            ));
            store.commit(ops)?;
        }
        rep.problems.retain(|p| {
            p.owner != "index" || !p.object.as_ref().is_some_and(|o| fixed.contains(o))
        });
    }

    // 4. Records and everything they reach.
    let mut roots = reach::roots(store.meta())?;
    let tree_roots = roots.tree_roots();
    let read = |k: ObjKind, id: &[u8; 32]| store.read_verified(k, id);
    let mut walk = Walk::new(&read, ChunkCheck::Verify);
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
    rep.objects_verified = (walk.nodes.len() + walk.chunks.len()) as u64;
    rep.bytes_verified = walk.bytes_verified;
    rep.problems.extend(roots.problems.iter().cloned());
    rep.problems.extend(walk.problems);

    // 5. Move aside what cannot be used.
    if repair {
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
        let broken =
            |hex: &str| NodeId::from_hex(hex).is_none_or(|id| root_ok.get(&id) == Some(&false));
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
                    meta::checkpoint_key(&id.0),
                    serde_json::to_value(c).unwrap(),
                    format!("checkpoint {}", id.to_hex()),
                    "its root node is missing or damaged",
                );
            }
        }
        for (name, c) in &roots.branches {
            let exists = crate::id::CheckpointId::from_hex(c)
                .is_some_and(|id| roots.checkpoints.contains_key(&id));
            if !exists {
                aside(
                    meta::ref_key(name),
                    json!({"checkpoint": c}),
                    format!("branch {name}"),
                    "it names a checkpoint that does not exist",
                );
            }
        }
        if !ops.is_empty() {
            store.commit(ops)?;
        }
        // What is left: a fresh check of the repaired store.
        let after = fsck(store, false, progress)?;
        rep.problems = after.problems;
        rep.unindexed_records = after.unindexed_records;
        rep.index_entries = after.index_entries;
    }
    progress("done", 1, 1);
    Ok(rep)
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

    fn loc_of(s: &PackStore, id: &[u8; 32]) -> Loc {
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
        let xid = s.put_based(ObjKind::Chunk, &x, Some(&wid)).unwrap();
        s.commit(vec![]).unwrap();
        let x_delta = loc_of(&s, &xid);
        assert_eq!(x_delta.codec, pack::Codec::Delta);
        let xkey = meta::object_key(&xid);
        s.commit(vec![MetaOp::Delete(xkey.clone())]).unwrap();
        s.put(ObjKind::Chunk, &x).unwrap();
        let yid = s.put_based(ObjKind::Chunk, &y, Some(&xid)).unwrap();
        s.commit(vec![]).unwrap();
        assert_ne!(loc_of(&s, &xid).codec, pack::Codec::Delta);
        assert_eq!(loc_of(&s, &yid).codec, pack::Codec::Delta);
        s.commit(vec![
            MetaOp::Put(xkey, x_delta.encode()),
            MetaOp::Delete(meta::object_key(&yid)),
        ])
        .unwrap();
        drop(s);

        let s = PackStore::open_for_repair(d.path()).unwrap();
        let rep = fsck(&s, true, &mut |_, _, _| {}).unwrap();
        assert!(!rep.repaired.is_empty(), "{rep:?}");
        assert_ne!(loc_of(&s, &xid).codec, pack::Codec::Delta);
        assert_eq!(&**s.read_verified(ObjKind::Chunk, &yid).unwrap(), &y);
        assert_eq!(&**s.read_verified(ObjKind::Chunk, &xid).unwrap(), &x);
        assert_eq!(&**s.read_verified(ObjKind::Chunk, &wid).unwrap(), &w);
    }
}
