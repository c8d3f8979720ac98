//! `store trim`: drop local copies of objects a remote holds (verified present)
//! and no kept session needs; they come back lazily when read.
//!
//! Owns: the choice of what a trim keeps and the proof that what it drops is on a
//! remote. Order:
//! 1. every configured remote's index is refreshed (LIST `packs/`, new `.idx`);
//! 2. for every local object a remote's index lists, the remote pack holding it
//!    (and, for a remote delta, its base's pack) is checked with `HEAD`: it must
//!    exist with the length its `.idx` says. An object whose remote copy is not
//!    verified this way, or is only in condemned packs, is kept;
//! 3. then gc's protocol ([`crate::gc`]: guard, barrier, mark, sweep, repack) with
//!    this mark: KEEP every object reachable (locally) from mounted sessions'
//!    workspace and base roots and their live inode tables; with `--older-than D`
//!    also from the workspace, base and HEAD trees of sessions accessed within
//!    D; with `--keep-sessions` also from every session's workspace and base;
//!    and every local object not verified in (2). Everything else that is local
//!    is dropped from the index, and mostly-dead packs are rewritten or deleted,
//!    so the space really comes back.
//!
//! Invariants: an object is dropped only if a remote pack that was verified
//! present in this run holds it (the sweep still keeps the delta base of
//! anything kept, and every put made since the guard began); walks never
//! hydrate (objects already not local and held remotely are their boundary).
//! Dropping is always safe for the data (the remote copy is read back lazily,
//! verified); what the keep rules protect is speed and offline use.
//!
//! Assumption: a trimmed store depends on its remotes for what it dropped. A
//! remote gc deletes only what no remote ref reaches, so do not remove remote
//! refs (branches, sessions) whose history a trimmed local session still names
//! without `hydrate`-ing it first.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::held::Held;
use super::index::RemoteIndex;
use super::{Remote, layout, registry};
use crate::error::{Error, Result};
use crate::gc::{self, GcReport, Live, Marked};
use crate::id::{NodeId, ObjectId, PackHash};
use crate::reach::{ChunkCheck, Walk};
use crate::store::{Kind, Packs};

/// What to keep.
#[derive(Debug, Clone, Default)]
pub struct TrimRequest {
    /// Keep what sessions accessed within this many seconds reach.
    pub older_than: Option<u64>,
    /// Keep every session's current workspace (trim only history).
    pub keep_sessions: bool,
    /// Report only.
    pub dry_run: bool,
}

/// What a trim did: the answer to `store_trim`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TrimReport {
    /// Nothing was changed.
    pub dry_run: bool,
    /// The remotes consulted.
    pub remotes: Vec<String>,
    /// Local copies dropped (or that would be).
    pub objects: u64,
    /// Their stored bytes.
    pub bytes: u64,
    /// Local objects a remote holds, verified present.
    pub remote_verified: u64,
    /// Local objects kept because no remote holds them (verified).
    pub not_on_remote: u64,
    /// Objects the kept sessions reach.
    pub kept_reachable: u64,
    /// Sessions whose trees were kept (mounted, recent, or all).
    pub sessions_kept: Vec<String>,
    /// Remote packs checked with `HEAD`.
    pub packs_checked: u64,
    /// Remote packs that failed the check (missing or another length).
    pub packs_failed: u64,
    /// Local packs deleted / rewritten.
    pub packs_deleted: u64,
    /// Local packs rewritten.
    pub packs_repacked: u64,
    /// Pack bytes on disk before.
    pub store_before: u64,
    /// Pack bytes on disk after (estimated in a dry run).
    pub store_after: u64,
    /// Wall time.
    pub seconds: f64,
}

/// One remote with the packs verified present.
struct Verified {
    index: std::sync::Arc<RemoteIndex>,
    packs: HashSet<PackHash>,
}

impl Verified {
    /// Whether this remote holds `id` in a verified pack (a delta: its base too).
    fn holds(&self, id: &ObjectId) -> bool {
        let Some(e) = self.index.get(id) else {
            return false;
        };
        self.packs.contains(&e.pack)
            && e.base.is_none_or(|b| {
                self.index
                    .get(&b)
                    .is_some_and(|be| self.packs.contains(&be.pack))
            })
    }
}

/// Refresh every configured remote and `HEAD` the packs holding local objects.
fn verify(
    store: &dyn Packs,
    rep: &mut TrimReport,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<Verified>> {
    let configs = registry::list(store)?;
    if configs.is_empty() {
        return Err(Error::Invalid(
            "store trim: no remote is configured, so nothing here is held elsewhere".into(),
        ));
    }
    let local = store.index()?;
    let mut out = Vec::new();
    for c in configs {
        let remote: Remote = super::open(store, &c.name)?;
        remote.index.refresh(&remote.client)?;
        let lens: HashMap<PackHash, u64> = remote
            .index
            .packs()
            .into_iter()
            .map(|p| (p.hash, p.len))
            .collect();
        let mut used: HashSet<PackHash> = HashSet::new();
        for (id, _) in &local {
            if let Some(e) = remote.index.get(id) {
                used.insert(e.pack);
                if let Some(be) = e.base.and_then(|b| remote.index.get(&b)) {
                    used.insert(be.pack);
                }
            }
        }
        let total = used.len() as u64;
        let mut packs = HashSet::new();
        for (i, h) in used.into_iter().enumerate() {
            progress("verify", i as u64, total);
            rep.packs_checked += 1;
            let meta = remote.client.head(&layout::pack_key(&h))?;
            match meta {
                Some(m) if Some(&m.size) == lens.get(&h) => {
                    packs.insert(h);
                }
                other => {
                    rep.packs_failed += 1;
                    log::warn!(
                        "remote {}: pack {} {}: its objects are kept locally",
                        c.name,
                        h.to_hex(),
                        if other.is_some() {
                            "has another length than its index says"
                        } else {
                            "is missing"
                        }
                    );
                }
            }
        }
        progress("verify", total, total);
        rep.remotes.push(c.name.clone());
        out.push(Verified {
            index: remote.index.clone(),
            packs,
        });
    }
    Ok(out)
}

/// A tree root with the owner to name in problems.
type Owned = (String, NodeId);

/// The tree roots a trim keeps, and the sessions they belong to. `mounted`:
/// the names of the mounted sessions.
fn keep_roots(
    store: &dyn Packs,
    mounted: &HashSet<String>,
    req: &TrimRequest,
    now: i64,
) -> Result<(Vec<Owned>, Vec<String>)> {
    let mut roots = Vec::new();
    let mut names = Vec::new();
    for rec in crate::session::list_records(store)? {
        let recent = match req.older_than {
            None => false,
            Some(d) => {
                // The access clock, else (no info record) the last flush; an info
                // record that does not read is the error (taken as old, the
                // session's data would be trimmed).
                let info = crate::lifecycle::load(store, &rec.name)?;
                let last = info.map_or(rec.updated, |i| i.last_access.max(rec.updated));
                now.saturating_sub(last) < d as i64
            }
        };
        if !(mounted.contains(&rec.name) || recent || req.keep_sessions) {
            continue;
        }
        let owner = format!("session {}", rec.name);
        let mut ids: Vec<NodeId> = vec![rec.root, rec.base];
        if recent && let Some(h) = rec.head {
            match crate::refs::load(store, &h).map(|c| c.root) {
                Ok(r) => ids.push(r),
                Err(e) => log::warn!("trim: session {}: HEAD unreadable: {e}", rec.name),
            }
        }
        roots.extend(ids.into_iter().map(|id| (owner.clone(), id)));
        names.push(rec.name);
    }
    Ok((roots, names))
}

/// Step 3's mark: what the kept sessions reach locally, plus every local object
/// no verified remote pack holds.
fn mark(
    store: &dyn Packs,
    live: &dyn Live,
    verified: &[Verified],
    req: &TrimRequest,
    now: i64,
    rep: &mut TrimReport,
) -> Result<Marked> {
    let live_ids = live.live_ids();
    let mounted: HashSet<String> = live_ids.iter().map(|(n, _, _)| n.clone()).collect();
    let (roots, names) = keep_roots(store, &mounted, req, now)?;
    rep.sessions_kept = names;
    let held = Held::of(store)?;
    let on_remote = |id: &ObjectId| held.as_ref().is_some_and(|h| h.is_held(id));
    let read = |k: Kind, id: &ObjectId| {
        if !store.contains(id)? {
            return Err(Error::Missing(format!("{k:?} object")));
        }
        store.get(k, id)
    };
    let mut walk = Walk::new(&read, ChunkCheck::Mark).with_boundary(&on_remote);
    for (owner, id) in roots {
        walk.root(&owner, id);
    }
    for (name, nodes, chunks) in live_ids {
        let owner = format!("session {name} (mounted)");
        for n in nodes {
            walk.any_node(&owner, n);
        }
        for c in chunks {
            walk.chunk(&owner, "(live)", c);
        }
    }
    for p in walk.problems.iter().take(5) {
        log::warn!(
            "trim: {} {}: {} (kept what is reachable)",
            p.owner,
            p.path,
            p.error
        );
    }
    let mut keep: HashSet<ObjectId> = walk.reached().copied().collect();
    rep.kept_reachable = keep.len() as u64;
    for (id, _) in store.index()? {
        if verified.iter().any(|v| v.holds(&id)) {
            rep.remote_verified += 1;
        } else {
            rep.not_on_remote += 1;
            keep.insert(id);
        }
    }
    Ok(Marked::keep(keep))
}

/// Trim `store` (see the module docs). `live`: the mounted sessions (the daemon;
/// [`gc::Offline`] when none); `now`: unix seconds.
pub fn trim(
    store: &dyn Packs,
    live: &dyn Live,
    req: &TrimRequest,
    now: i64,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<TrimReport> {
    let t0 = Instant::now();
    let mut rep = TrimReport {
        dry_run: req.dry_run,
        ..TrimReport::default()
    };
    let verified = verify(store, &mut rep, progress)?;
    let mut g = GcReport {
        dry_run: req.dry_run,
        ..GcReport::default()
    };
    gc::collect(store, live, &mut g, progress, &mut |_, _| {
        mark(store, live, &verified, req, now, &mut rep)
    })?;
    rep.objects = g.objects_reclaimed;
    rep.bytes = g.bytes_reclaimed;
    rep.packs_deleted = g.packs_deleted;
    rep.packs_repacked = g.packs_repacked;
    rep.store_before = g.disk_before;
    rep.store_after = g.disk_after;
    rep.seconds = t0.elapsed().as_secs_f64();
    log::info!(
        "store trim{}: {} objects ({} bytes) dropped, store {} -> {} bytes",
        if rep.dry_run { " (dry run)" } else { "" },
        rep.objects,
        rep.bytes,
        rep.store_before,
        rep.store_after
    );
    Ok(rep)
}

#[cfg(test)]
#[path = "trim_tests.rs"]
mod tests;
