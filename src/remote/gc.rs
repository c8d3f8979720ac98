//! Remote gc (`treefork remote gc`): delete what no remote ref reaches, in two
//! phases with a grace period, one gc at a time (see docs/design.md, "Remote
//! tier: gc").
//!
//! Owns: the order of a run ([`gc`]): take `gc/lock` (`lock`); LIST `packs/`,
//! `checkpoints/`, `logs/`; refresh the remote index and catalogue every pack
//! (condemned ones included); read every ref (strictly); mark (`mark`); then
//! - no `gc/condemned`: phase 1, write it (the dead packs, checkpoint records and
//!   log segments, with the time);
//! - `gc/condemned` older than the grace: phase 2, delete what it names that is
//!   STILL dead (a pack's `.idx` first, then the pack), then rewrite it with what
//!   is newly dead (a new phase 1 for those) or delete it;
//! - `gc/condemned` younger than the grace: wait (nothing changes).
//!
//! Packs without an `.idx` older than the grace (a killed push's leftovers) are
//! deleted in any phase. `dry_run` takes no lock and writes nothing.
//!
//! Invariants: nothing is deleted that the mark of THIS run found live, nor
//! anything that was not condemned at least `grace` earlier; a pack is dead only
//! when no object in it is live and no kept pack depends on it (`mark`'s pack
//! closure), so the remote's closure invariant survives every deletion. Pushers
//! never build on condemned packs (`RemoteIndex` hides them), so a pack condemned
//! in phase 1 can only become live again through a push that read the index
//! before phase 1: safe provided such a push finishes within the grace period.

pub mod lock;
pub mod mark;

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::PackHash;
use crate::remote::Remote;
use crate::remote::client::{Client, Meta, Put, PutIf};
use crate::remote::layout::{self, PackObject};
use crate::remote::refval::GcCondemned;
use crate::store::ObjectStore;

/// The default grace period between condemning and deleting (24 h).
pub const DEFAULT_GRACE_SECS: u64 = 24 * 3600;

/// What to do.
#[derive(Debug, Clone, Copy)]
pub struct GcRequest {
    /// Report only: no lock, no write, no delete.
    pub dry_run: bool,
    /// Seconds between condemning and deleting.
    pub grace_secs: u64,
}

impl Default for GcRequest {
    fn default() -> Self {
        GcRequest {
            dry_run: false,
            grace_secs: DEFAULT_GRACE_SECS,
        }
    }
}

/// What a remote gc did (or, dry, would do): the answer to `remote_gc`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct GcReport {
    /// The remote.
    pub remote: String,
    /// Nothing was changed.
    pub dry_run: bool,
    /// `condemn` (phase 1), `delete` (phase 2), `wait` (condemned, grace not
    /// over) or `clean` (nothing dead).
    pub phase: String,
    /// Refs marked from.
    pub refs: usize,
    /// Packs deleted (orphans included).
    pub packs_deleted: usize,
    /// Their bytes.
    pub bytes_deleted: u64,
    /// Checkpoint records deleted.
    pub checkpoints_deleted: usize,
    /// Log segments deleted.
    pub logs_deleted: usize,
    /// Packs without an `.idx` deleted (older than the grace).
    pub orphans_deleted: usize,
    /// Packs now condemned (in `gc/condemned` after this run).
    pub condemned: usize,
    /// Their bytes.
    pub condemned_bytes: u64,
    /// Checkpoint records now condemned.
    pub condemned_checkpoints: usize,
    /// Log segments now condemned.
    pub condemned_logs: usize,
    /// Condemned things found live again (kept, no longer condemned).
    pub resurrected: usize,
    /// Seconds until the condemned things may be deleted (`wait`).
    pub wait_secs: u64,
    /// Packs kept.
    pub live_packs: usize,
    /// Their bytes.
    pub live_bytes: u64,
    /// Bytes of objects no ref reaches inside kept packs (repacking would free
    /// them).
    pub dead_bytes_in_live_packs: u64,
    /// Live checkpoint records.
    pub live_checkpoints: usize,
    /// Live objects.
    pub live_objects: usize,
    /// Packs whose `.idx` could not be read (kept, reported).
    pub unreadable: usize,
    /// Tree nodes read from the remote while marking.
    pub nodes_read: u64,
    /// Wall time.
    pub seconds: f64,
}

/// A LIST of the remote's content-named objects.
#[derive(Default)]
struct Listing {
    packs: HashMap<PackHash, Meta>,
    idx: HashMap<PackHash, Meta>,
    checkpoints: HashSet<String>,
    logs: HashSet<String>,
}

fn list(c: &Client) -> Result<Listing> {
    let mut l = Listing::default();
    for m in c.list(layout::PACKS_DIR)? {
        match layout::parse_pack_object(&m.key) {
            Some(PackObject::Pack(h)) => drop(l.packs.insert(h, m)),
            Some(PackObject::Idx(h)) => drop(l.idx.insert(h, m)),
            None => {}
        }
    }
    for m in c.list(layout::CHECKPOINTS_DIR)? {
        l.checkpoints
            .extend(layout::parse_checkpoint_key(&m.key).map(|h| layout::hex32(&h)));
    }
    for m in c.list(layout::LOGS_DIR)? {
        l.logs
            .extend(layout::parse_log_key(&m.key).map(|h| layout::hex32(&h)));
    }
    Ok(l)
}

/// What is dead in this run's mark.
#[derive(Default, Debug, Clone)]
struct Dead {
    packs: HashSet<String>,
    checkpoints: HashSet<String>,
    logs: HashSet<String>,
}

impl Dead {
    fn len(&self) -> usize {
        self.packs.len() + self.checkpoints.len() + self.logs.len()
    }

    fn to_condemned(&self, time: i64) -> GcCondemned {
        let sorted = |s: &HashSet<String>| {
            let mut v: Vec<String> = s.iter().cloned().collect();
            v.sort();
            v
        };
        GcCondemned {
            version: 1,
            time,
            packs: sorted(&self.packs),
            logs: sorted(&self.logs),
            checkpoints: sorted(&self.checkpoints),
        }
    }
}

/// Run a remote gc on `remote` (`store`: local copies of nodes and checkpoint
/// records are used when present; nothing is written to it).
pub fn gc(store: &dyn ObjectStore, remote: &Remote, req: GcRequest) -> Result<GcReport> {
    let t0 = Instant::now();
    let c = &remote.client;
    let now = crate::clock::unix_secs();
    let conditional = remote.config.conditional_writes;
    let _lock = if req.dry_run {
        None
    } else {
        Some(lock::acquire(c, conditional, now)?)
    };
    let listing = list(c)?;
    remote.index.refresh(c)?;
    let mut rep = GcReport {
        remote: remote.config.name.clone(),
        dry_run: req.dry_run,
        ..GcReport::default()
    };
    let mut idxs = Vec::new();
    for h in listing.idx.keys() {
        match remote.index.idx_of(h)? {
            Some(idx) => idxs.push(idx),
            None => rep.unreadable += 1,
        }
    }
    let cat = mark::Catalog::new(idxs);
    let prev = match c.get(layout::GC_CONDEMNED, layout::Body::Gc)? {
        Some(g) => Some((GcCondemned::decode(&g.bytes)?, g.etag)),
        None => None,
    };
    // Refs are read AFTER the listings: a push that lands meanwhile names only
    // objects that are listed (and so marked) or that this run never saw.
    let refs = mark::list_refs(c)?;
    rep.refs = refs.len();
    let marked = mark::mark(store, c, &cat, &refs)?;
    let dead = dead(&listing, &cat, &marked, &mut rep);
    let pack_len = |h: &str| -> u64 {
        layout::parse_pack_hash(h)
            .and_then(|h| listing.packs.get(&h))
            .map_or(0, |m| m.size)
    };
    let grace = req.grace_secs as i64;
    let (next, delete) = phase(
        prev.as_ref().map(|p| &p.0),
        &dead,
        &listing,
        now,
        grace,
        &mut rep,
    );
    rep.packs_deleted = delete.packs.len();
    rep.bytes_deleted = delete.packs.iter().map(|h| pack_len(h)).sum();
    rep.checkpoints_deleted = delete.checkpoints.len();
    rep.logs_deleted = delete.logs.len();
    rep.condemned = next.packs.len();
    rep.condemned_bytes = next.packs.iter().map(|h| pack_len(h)).sum();
    rep.condemned_checkpoints = next.checkpoints.len();
    rep.condemned_logs = next.logs.len();
    let orphans = orphans(&listing, now, grace);
    rep.orphans_deleted = orphans.len();
    rep.packs_deleted += orphans.len();
    rep.bytes_deleted += orphans.iter().map(|(_, m)| m.size).sum::<u64>();
    if !req.dry_run {
        if rep.phase != "wait" {
            write_condemned(c, conditional, prev.map(|p| p.1), &next, now)?;
        }
        apply(c, &delete, &orphans)?;
    }
    rep.nodes_read = marked.nodes_read;
    rep.seconds = t0.elapsed().as_secs_f64();
    Ok(rep)
}

/// Decide the phase (see the module docs): what `gc/condemned` names after this
/// run, and what to delete now. Sets `rep.phase`, `resurrected`, `wait_secs`.
fn phase(
    prev: Option<&GcCondemned>,
    dead: &Dead,
    listing: &Listing,
    now: i64,
    grace: i64,
    rep: &mut GcReport,
) -> (Dead, Dead) {
    let mut next = dead.clone();
    let mut delete = Dead::default();
    match prev {
        None if dead.len() == 0 => rep.phase = "clean".into(),
        None => rep.phase = "condemn".into(),
        Some(p) if now - p.time >= grace => {
            rep.phase = "delete".into();
            let old = |v: &[String]| v.iter().cloned().collect::<HashSet<String>>();
            let (op, oc, ol) = (old(&p.packs), old(&p.checkpoints), old(&p.logs));
            delete.packs = dead.packs.intersection(&op).cloned().collect();
            delete.checkpoints = dead.checkpoints.intersection(&oc).cloned().collect();
            delete.logs = dead.logs.intersection(&ol).cloned().collect();
            rep.resurrected = [
                (&op, &dead.packs),
                (&oc, &dead.checkpoints),
                (&ol, &dead.logs),
            ]
            .iter()
            .map(|(o, d)| {
                o.iter()
                    .filter(|h| !d.contains(*h) && listed(listing, h))
                    .count()
            })
            .sum();
            next.packs.retain(|h| !delete.packs.contains(h));
            next.checkpoints.retain(|h| !delete.checkpoints.contains(h));
            next.logs.retain(|h| !delete.logs.contains(h));
        }
        Some(p) => {
            rep.phase = "wait".into();
            rep.wait_secs = (p.time + grace - now).max(0) as u64;
            next = Dead {
                packs: p.packs.iter().cloned().collect(),
                checkpoints: p.checkpoints.iter().cloned().collect(),
                logs: p.logs.iter().cloned().collect(),
            };
        }
    }
    (next, delete)
}

fn listed(l: &Listing, h: &str) -> bool {
    l.checkpoints.contains(h)
        || l.logs.contains(h)
        || layout::parse_pack_hash(h).is_some_and(|p| l.idx.contains_key(&p))
}

/// What this run's mark leaves dead; fills the live figures of `rep`.
fn dead(l: &Listing, cat: &mark::Catalog, m: &mark::Marked, rep: &mut GcReport) -> Dead {
    let mut d = Dead::default();
    for (i, idx) in cat.packs.iter().enumerate() {
        let h = idx.pack_hash.to_hex();
        if m.packs.contains(&(i as u32)) {
            rep.live_packs += 1;
            rep.live_bytes += idx.pack_len;
            rep.dead_bytes_in_live_packs += idx
                .entries
                .iter()
                .filter(|e| !m.reached.contains(&e.id))
                .map(|e| e.range().end - e.range().start)
                .sum::<u64>();
        } else {
            d.packs.insert(h);
        }
    }
    d.checkpoints = l.checkpoints.difference(&m.checkpoints).cloned().collect();
    d.logs = l.logs.difference(&m.logs).cloned().collect();
    rep.live_checkpoints = l.checkpoints.intersection(&m.checkpoints).count();
    rep.live_objects = m.reached.len();
    d
}

/// Packs without an `.idx` whose last write is at least `grace` old.
fn orphans(l: &Listing, now: i64, grace: i64) -> Vec<(PackHash, Meta)> {
    let mut v: Vec<(PackHash, Meta)> = l
        .packs
        .iter()
        .filter(|(h, m)| !l.idx.contains_key(*h) && now - m.modified >= grace)
        .map(|(h, m)| (*h, m.clone()))
        .collect();
    v.sort_by_key(|(h, _)| *h);
    v
}

/// Write `gc/condemned` = `next` (time `now`), or delete it when `next` is empty.
/// `prev`: the one read (`Some(etag)`), if any.
fn write_condemned(
    c: &Client,
    conditional: bool,
    prev: Option<Option<String>>,
    next: &Dead,
    now: i64,
) -> Result<()> {
    if next.len() == 0 {
        return match prev {
            Some(_) => c.delete(layout::GC_CONDEMNED),
            None => Ok(()),
        };
    }
    let cond = match (conditional, prev) {
        (false, _) | (true, Some(None)) => PutIf::Always,
        (true, Some(Some(e))) => PutIf::Matches(e),
        (true, None) => PutIf::Absent,
    };
    match c.put(layout::GC_CONDEMNED, next.to_condemned(now).encode(), cond)? {
        Put::Written(_) => Ok(()),
        Put::Exists | Put::Moved => Err(Error::Conflict(format!(
            "remote {}: gc/condemned changed under the gc lock (another gc?); nothing deleted",
            c.name()
        ))),
    }
}

/// Delete `d` (each pack's `.idx` before the pack, so a half-done deletion
/// leaves an orphan pack, never an index without its pack) and the orphans.
fn apply(c: &Client, d: &Dead, orphans: &[(PackHash, Meta)]) -> Result<()> {
    let mut packs: Vec<&String> = d.packs.iter().collect();
    packs.sort();
    for h in packs {
        let Some(h) = layout::parse_pack_hash(h) else {
            continue;
        };
        c.delete(&layout::idx_key(&h))?;
        c.delete(&layout::pack_key(&h))?;
    }
    for (h, _) in orphans {
        c.delete(&layout::pack_key(h))?;
    }
    for h in &d.checkpoints {
        c.delete(&layout::checkpoint_key(h))?;
    }
    for h in &d.logs {
        c.delete(&layout::log_key(h))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
