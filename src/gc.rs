//! Garbage collection: mark from every root, sweep the index, repack mostly-dead packs.
//!
//! Owns: the gc protocol. Safe while sessions are mounted and written:
//! 1. [`Packs::gc_begin`] — from now on every `put` (dedup hits too) is guarded;
//! 2. [`Live::barrier`] — waits for every put that started before (1) to be published
//!    in a live inode table or a committed root (sessions seal and flush under their
//!    flush lock; imports under the daemon's import lock);
//! 3. mark: every mounted session's live ids ([`crate::session::Session::live_ids`],
//!    read before and again after the durable roots: roots pinned by operations in
//!    flight move from a live table to an operation record), and the durable roots
//!    ([`crate::reach::roots`]), walked to every node and chunk;
//! 4. sweep: one pass under the guard lock drops index entries neither marked nor
//!    guarded, plus the records of dead checkpoints;
//! 5. repack: packs no writer can still add to whose live records fill less than
//!    half of them are copied forward (verified, within the recovery tier of the
//!    space reserve, `crate::store::space`) and deleted; fully dead ones are
//!    deleted first, so a gc of a full store frees space before it needs any.
//!    A pack's size counts every byte in it, indexed or not: records a failed
//!    write or a crash left without an index entry are garbage like dead ones.
//!
//! gc takes the store as [`Packs`] (the object store plus its index and packs) and
//! reads the roots through its [`crate::store::MetaStore`]; the walk is iterative.
//! What a remote holds (the walk's boundary, [`HeldElsewhere`]) comes from the
//! caller: gc never imports the remote tier.
//!
//! Invariant: an object reachable from any root, any live table or any put since (1)
//! keeps its index entry; a pack is deleted only after the index names none of its
//! records (new locations committed first). A gc that finds a damaged record or an
//! unreadable reachable node refuses to sweep (it could not know what that node
//! references) and says to run `treefork fsck`.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::{ChunkId, NodeId, ObjectId};
use crate::meta::{self, MetaOp};
use crate::reach::{self, ChunkCheck, HeldElsewhere, Walk};
use crate::store::{Kind as ObjKind, Loc, Packs};

/// What a gc needs from whoever serves mounted sessions.
pub trait Live {
    /// Return once every put that started before it was called is published (in a
    /// live table or a committed root).
    fn barrier(&self);
    /// For each mounted session: (name, node ids, chunk ids) its live table holds.
    fn live_ids(&self) -> Vec<(String, Vec<NodeId>, Vec<ChunkId>)>;
}

/// No mounted sessions (a gc run by the CLI on a store no daemon serves).
pub struct Offline;

impl Live for Offline {
    fn barrier(&self) {}
    fn live_ids(&self) -> Vec<(String, Vec<NodeId>, Vec<ChunkId>)> {
        Vec::new()
    }
}

/// Result of a gc.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct GcReport {
    /// Nothing was changed.
    pub dry_run: bool,
    /// Index entries before.
    pub objects_before: u64,
    /// Objects reachable (nodes + chunks marked).
    pub objects_live: u64,
    /// Objects dropped from the index (or that would be, in a dry run).
    pub objects_reclaimed: u64,
    /// Their bytes in the packs.
    pub bytes_reclaimed: u64,
    /// Pack bytes no index entry names when the gc began: records a failed write
    /// or a crash left unindexed (and the open pack's uncommitted puts). Garbage
    /// to the repack, which judges a pack by its size on disk; `fsck` counts the
    /// same records as "unindexed".
    pub bytes_unindexed: u64,
    /// Checkpoint records dropped (checkpoints of removed sessions no root names).
    pub checkpoints_reclaimed: u64,
    /// Packs deleted because nothing in them was live.
    pub packs_deleted: u64,
    /// Packs rewritten because they were mostly garbage.
    pub packs_repacked: u64,
    /// Live bytes copied by repacking.
    pub bytes_copied: u64,
    /// Pack bytes on disk before.
    pub disk_before: u64,
    /// Pack bytes on disk after (estimated in a dry run).
    pub disk_after: u64,
    /// Mounted sessions whose live tables were marked.
    pub mounted_sessions: u64,
    /// Reachable objects not stored locally but held by a configured remote
    /// (trimmed or never hydrated): not read, not a problem.
    pub remote_held: u64,
    /// Wall time in milliseconds.
    pub elapsed_ms: u64,
}

struct GuardEnd<'a>(&'a dyn Packs);
impl Drop for GuardEnd<'_> {
    fn drop(&mut self) {
        self.0.gc_end();
    }
}

/// A pack is rewritten when its live records fill less than this fraction of it.
pub const REPACK_LIVE_FRACTION: f64 = 0.5;

/// Run a gc. `held`: the objects a remote holds and the store does not (see
/// [`HeldElsewhere`]; `None` when no remote is configured). `progress(phase, done,
/// total)` is called now and then.
///
/// The protocol steps of the module docs, in order: the guard (1) and the barrier
/// (2) here, then `mark` (3), `sweep` (4) and, once the guard is released, `repack`
/// (5).
pub fn gc(
    store: &dyn Packs,
    live: &dyn Live,
    held: Option<&dyn HeldElsewhere>,
    dry_run: bool,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<GcReport> {
    let t0 = Instant::now();
    let mut rep = GcReport {
        dry_run,
        ..GcReport::default()
    };
    collect(store, live, &mut rep, progress, &mut |rep, progress| {
        mark(store, live, held, rep, progress)
    })?;
    rep.elapsed_ms = t0.elapsed().as_millis() as u64;
    log_report(&rep);
    Ok(rep)
}

/// Chooses what a collection keeps, once the guard is up and the barrier passed.
pub(crate) type MarkFn<'a> =
    &'a mut dyn FnMut(&mut GcReport, &mut dyn FnMut(&str, u64, u64)) -> Result<Marked>;

/// The protocol of [`gc`] with the mark step given by the caller (`store trim`
/// keeps less than every root reaches): guard (1), barrier (2), `mark` (3),
/// sweep (4), repack (5). Sets `disk_before`; `rep.dry_run` says whether
/// anything changes.
pub(crate) fn collect(
    store: &dyn Packs,
    live: &dyn Live,
    rep: &mut GcReport,
    progress: &mut dyn FnMut(&str, u64, u64),
    mark: MarkFn<'_>,
) -> Result<()> {
    rep.disk_before = store.packs()?.iter().map(|(_, n)| n).sum();
    store.gc_begin();
    let end = GuardEnd(store);
    live.barrier();
    let marked = mark(rep, progress)?;
    let dry_index = sweep(store, marked, rep.dry_run, rep, progress)?;
    drop(end);
    repack(store, dry_index, rep, progress)
}

/// Index entries: (object id, where its record is).
type Index = Vec<(ObjectId, Loc)>;

/// What the mark step found live, and the checkpoint records it found dead.
pub(crate) struct Marked {
    /// Every node and chunk reached.
    objects: HashSet<ObjectId>,
    /// Deletions of the records of checkpoints that are not live.
    dead_checkpoints: Vec<MetaOp>,
}

impl Marked {
    /// Keep exactly `objects` (plus what the sweep always keeps: guarded puts
    /// and the delta bases of kept objects); no record is dropped.
    pub(crate) fn keep(objects: HashSet<ObjectId>) -> Marked {
        Marked {
            objects,
            dead_checkpoints: Vec::new(),
        }
    }
}

/// Step 3, mark: walk the durable roots and every mounted session's live ids to
/// every node and chunk. Refuses (with the first problem) when a record is damaged
/// or a reachable node unreadable.
fn mark(
    store: &dyn Packs,
    live: &dyn Live,
    held: Option<&dyn HeldElsewhere>,
    rep: &mut GcReport,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Marked> {
    progress("mark", 0, 0);
    // The live tables are read before the durable roots as well as after: a root
    // an operation pinned and named in a record committed after the durable scan
    // may be unpinned by the second read (see `Session::pin_roots`).
    let early = live.live_ids();
    let roots = reach::roots(store.meta())?;
    let tree_roots = roots.tree_roots();
    if !roots.problems.is_empty() {
        return Err(refuse(&roots.problems));
    }
    // Objects a remote holds and the store does not are the walk's boundary; with
    // a remote configured, reads are local only (a gc never hydrates).
    let on_remote = |id: &ObjectId| held.is_some_and(|h| h.is_held(id));
    let read = |k: ObjKind, id: &ObjectId| {
        if held.is_some() && !store.contains(id)? {
            return Err(Error::Missing(format!(
                "{k:?} object {} (on no remote either)",
                id.short()
            )));
        }
        store.get(k, id)
    };
    let mut walk = Walk::new(&read, ChunkCheck::Mark);
    if held.is_some() {
        walk = walk.with_boundary(&on_remote);
    }
    let total = tree_roots.len() as u64;
    for (i, (owner, id)) in tree_roots.into_iter().enumerate() {
        walk.root(&owner, id);
        progress("mark", i as u64 + 1, total);
    }
    let sessions = live.live_ids();
    rep.mounted_sessions = sessions.len() as u64;
    for (name, nodes, chunks) in early.into_iter().chain(sessions) {
        let owner = format!("session {name} (mounted)");
        for n in nodes {
            walk.any_node(&owner, n);
        }
        for c in chunks {
            walk.chunk(&owner, "(live)", c);
        }
    }
    if !walk.problems.is_empty() {
        return Err(refuse(&walk.problems));
    }
    let objects: HashSet<ObjectId> = walk.reached().copied().collect();
    rep.objects_live = objects.len() as u64;
    rep.remote_held = walk.at_boundary.len() as u64;
    let dead_checkpoints: Vec<MetaOp> = roots
        .checkpoints
        .keys()
        .filter(|id| !roots.live.contains(id))
        .map(|id| MetaOp::Delete(meta::checkpoint_key(id)))
        .collect();
    rep.checkpoints_reclaimed = dead_checkpoints.len() as u64;
    Ok(Marked {
        objects,
        dead_checkpoints,
    })
}

/// Step 4, sweep: one pass under the guard lock drops the index entries neither
/// marked nor guarded, and the dead checkpoint records. A dry run changes nothing
/// and returns the index as the sweep would leave it (`None` after a real sweep:
/// the repack reads the index itself).
fn sweep(
    store: &dyn Packs,
    marked: Marked,
    dry_run: bool,
    rep: &mut GcReport,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Option<Index>> {
    progress("sweep", 0, 1);
    let index_before = store.index()?;
    rep.objects_before = index_before.len() as u64;
    let packs = store.packs()?;
    let indexed: u64 = index_before.iter().map(|(_, l)| l.record_len()).sum();
    let headers = packs.len() as u64 * crate::store::pack::PACK_HEADER_LEN;
    let on_disk: u64 = packs.iter().map(|(_, n)| n).sum();
    rep.bytes_unindexed = on_disk.saturating_sub(headers + indexed);
    let dry_index = if dry_run {
        let d = store.unreachable(&marked.objects)?;
        rep.objects_reclaimed = d.len() as u64;
        rep.bytes_reclaimed = d.iter().map(|(_, l)| l.record_len()).sum();
        let dead: HashSet<ObjectId> = d.into_iter().map(|(id, _)| id).collect();
        Some(
            index_before
                .into_iter()
                .filter(|(id, _)| !dead.contains(id))
                .collect(),
        )
    } else {
        let (n, bytes) = store.sweep(&marked.objects, marked.dead_checkpoints)?;
        rep.objects_reclaimed = n;
        rep.bytes_reclaimed = bytes;
        None
    };
    progress("sweep", 1, 1);
    Ok(dry_index)
}

/// Step 5, repack: delete the packs nothing live is in and copy forward the live
/// records of those less than [`REPACK_LIVE_FRACTION`] live. A dry run (given the
/// index as its sweep would have left it) only counts. Sets `disk_after`.
fn repack(
    store: &dyn Packs,
    dry_index: Option<Index>,
    rep: &mut GcReport,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<()> {
    let dry_run = dry_index.is_some();
    // List the packs, close the open pack, then decide which packs are protected
    // and only then read the index: a listed, unprotected pack gains no entries from
    // then on, so the index read below lists every live record in it (a pack
    // created after the listing is not a candidate).
    let packs = store.packs()?;
    store.close_pack();
    let protected = store.protected_packs();
    let index = match dry_index {
        Some(index) => index,
        None => store.index()?,
    };
    let mut by_pack: HashMap<u32, Vec<(ObjectId, Loc)>> = HashMap::new();
    for (id, loc) in index {
        by_pack.entry(loc.pack).or_default().push((id, loc));
    }
    let (mut candidates, mut disk_after) = repack_candidates(packs, &protected, &by_pack);
    // Bounded extra space (a full store must be collectable): the packs nothing
    // live is in go first, then the rest one at a time, fewest live bytes first;
    // each repack commits and deletes its pack before the next copies anything.
    candidates.sort_by_key(|n| {
        by_pack
            .get(n)
            .map_or(0, |v| v.iter().map(|(_, l)| l.record_len()).sum::<u64>())
    });
    let total = candidates.len() as u64;
    for (i, n) in candidates.into_iter().enumerate() {
        let live = by_pack.remove(&n).unwrap_or_default();
        let live_bytes: u64 = live.iter().map(|(_, l)| l.record_len()).sum();
        disk_after += live_bytes;
        if live.is_empty() {
            rep.packs_deleted += 1;
            if !dry_run {
                store.delete_pack(n)?;
            }
        } else {
            rep.packs_repacked += 1;
            rep.bytes_copied += live_bytes;
            if !dry_run {
                store.repack(n, &live)?;
            }
        }
        progress("repack", i as u64 + 1, total);
    }
    rep.disk_after = if dry_run {
        disk_after
    } else {
        store.packs()?.iter().map(|(_, n)| n).sum()
    };
    Ok(())
}

/// The packs to repack or delete: not protected, and less than
/// [`REPACK_LIVE_FRACTION`] of their size live. Also returns the size of the packs
/// kept as they are.
fn repack_candidates(
    packs: Vec<(u32, u64)>,
    protected: &HashSet<u32>,
    by_pack: &HashMap<u32, Vec<(ObjectId, Loc)>>,
) -> (Vec<u32>, u64) {
    let mut kept = 0u64;
    let candidates = packs
        .into_iter()
        .filter(|(n, size)| {
            let keep = protected.contains(n) || {
                let live: u64 = by_pack
                    .get(n)
                    .map_or(0, |v| v.iter().map(|(_, l)| l.record_len()).sum());
                live as f64 >= *size as f64 * REPACK_LIVE_FRACTION
            };
            if keep {
                kept += size;
            }
            !keep
        })
        .map(|(n, _)| n)
        .collect();
    (candidates, kept)
}

fn log_report(rep: &GcReport) {
    log::info!(
        "gc{}: {} of {} objects reclaimed ({} bytes), {} checkpoints, packs deleted {} repacked {}, disk {} -> {} bytes in {} ms",
        if rep.dry_run { " (dry run)" } else { "" },
        rep.objects_reclaimed,
        rep.objects_before,
        rep.bytes_reclaimed,
        rep.checkpoints_reclaimed,
        rep.packs_deleted,
        rep.packs_repacked,
        rep.disk_before,
        rep.disk_after,
        rep.elapsed_ms
    );
}

fn refuse(problems: &[reach::Problem]) -> Error {
    let first = &problems[0];
    Error::Conflict(format!(
        "gc refused: {} damaged or unreadable record(s)/object(s), e.g. {} {}{}: {} — run `treefork fsck`",
        problems.len(),
        first.owner,
        first.path,
        first
            .object
            .as_deref()
            .map(|o| format!(" (object {})", &o[..12.min(o.len())]))
            .unwrap_or_default(),
        first.error
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reach::tests::{deep_chain, on_small_stack};
    use crate::store::{ObjectStore, PackStore};

    /// One mounted session whose live table holds `nodes`.
    struct OneLive(Vec<NodeId>);

    impl Live for OneLive {
        fn barrier(&self) {}
        fn live_ids(&self) -> Vec<(String, Vec<NodeId>, Vec<ChunkId>)> {
            vec![("deep".into(), self.0.clone(), vec![])]
        }
    }

    /// Issue 44: records appended and never indexed (a crash before the commit)
    /// are counted and reclaimed by the next gc, and fsck then finds none.
    #[test]
    fn records_a_crash_left_unindexed_are_reclaimed() {
        let d = tempfile::tempdir().unwrap();
        {
            let s = PackStore::open(d.path()).unwrap();
            s.put(ObjKind::Chunk, &vec![7u8; 100_000]).unwrap();
            s.put(ObjKind::Chunk, b"never committed").unwrap();
            // Dropped without a commit: the records are in the pack, unindexed.
        }
        let s = PackStore::open(d.path()).unwrap();
        let f = crate::fsck::fsck(&s, None, false, &mut |_, _, _| {}).unwrap();
        assert!(f.clean(), "{:?}", f.problems);
        let rep = gc(&s, &Offline, None, false, &mut |_, _, _| {}).unwrap();
        assert!(rep.bytes_unindexed > 0, "{rep:?}");
        assert_eq!(rep.packs_deleted, 1, "{rep:?}");
        assert_eq!(s.packs().unwrap(), vec![]);
    }

    #[test]
    fn gc_and_fsck_of_a_10000_deep_tree_do_not_recurse() {
        let d = tempfile::tempdir().unwrap();
        let s = PackStore::open(d.path()).unwrap();
        let (root, bottom) = deep_chain(&s, 10_000);
        let garbage = s.put(ObjKind::Chunk, b"unreferenced").unwrap();
        s.commit(vec![]).unwrap();
        let rep = on_small_stack(|| {
            let rep = gc(&s, &OneLive(vec![root]), None, false, &mut |_, _, _| {}).unwrap();
            let f = crate::fsck::fsck(&s, None, false, &mut |_, _, _| {}).unwrap();
            assert!(f.clean(), "{:?}", f.problems);
            rep
        });
        assert_eq!(rep.objects_live, 10_002);
        assert_eq!(rep.objects_reclaimed, 1);
        assert!(!s.contains(&garbage).unwrap());
        assert!(s.contains(&bottom).unwrap());
    }
}
