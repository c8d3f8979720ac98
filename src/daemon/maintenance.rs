//! Store-wide maintenance served by the daemon: gc, fsck, store trim and session
//! removal. The gc with its retention pass ([`collect`]) is shared with the
//! offline host (`super::offline`).
//!
//! gc and fsck are serialized by the daemon's maintenance lock. gc counts as roots
//! every session the mount table holds Live or Closing ([`crate::gc::Live`]): a
//! session being unmounted stays a root until its last flush is committed. A
//! `session rm` claims the name in the mount table first, so it never races a mount,
//! a fork or an unmount of the same session.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Daemon;
use crate::error::{Error, Result};
use crate::lifecycle::retention::{self, Pruned};
use crate::ops::Host;
use crate::remote::held::{self, Held};
use crate::store::PackStore;
use crate::verbs::fsck::Checked;
use crate::verbs::gc::Collected;
use crate::verbs::session_rm::SessionRemoved;

/// Progress events at most every 100 ms (and at the end of each phase).
fn progress(events: &mut dyn FnMut(Value)) -> impl FnMut(&str, u64, u64) + '_ {
    let mut last = Instant::now();
    move |phase, done, total| {
        if last.elapsed() > Duration::from_millis(100) || done == total {
            last = Instant::now();
            events(json!({"event": "progress", "phase": phase, "done": done, "total": total}));
        }
    }
}

impl Daemon {
    pub(crate) fn gc(&self, dry_run: bool, events: &mut dyn FnMut(Value)) -> Result<Collected> {
        let _m = self
            .maintenance
            .try_lock()
            .map_err(|_| Error::Conflict("a gc or fsck is already running on this store".into()))?;
        let discard = self.upkeep.discard_secs;
        collect(
            self,
            &self.store,
            self,
            discard,
            dry_run,
            &mut progress(events),
        )
    }

    pub(crate) fn fsck(&self, repair: bool, events: &mut dyn FnMut(Value)) -> Result<Checked> {
        if repair {
            return Err(Error::Conflict(format!(
                "fsck --repair needs the store offline: unmount its {} mounted session(s) first",
                self.table.live_mountpoints().len()
            )));
        }
        let _m = self
            .maintenance
            .try_lock()
            .map_err(|_| Error::Conflict("a gc or fsck is already running on this store".into()))?;
        let held = Held::of(&*self.store)?;
        let rep = crate::fsck::fsck(
            &*self.store,
            held::boundary(&held),
            false,
            &mut progress(events),
        )?;
        Ok(Checked::new(rep))
    }

    /// `store trim` (see `crate::remote::trim`): serialized with gc and fsck.
    pub(crate) fn store_trim(
        &self,
        req: crate::remote::trim::TrimRequest,
        events: &mut dyn FnMut(Value),
    ) -> Result<crate::remote::trim::TrimReport> {
        let _m = self
            .maintenance
            .try_lock()
            .map_err(|_| Error::Conflict("a gc or fsck is already running on this store".into()))?;
        crate::remote::serve::store_trim::run(&*self.store, self, req, events)
    }

    pub(crate) fn session_rm(&self, name: &str) -> Result<SessionRemoved> {
        // Owning the name keeps mounts, forks and unmounts of it out meanwhile.
        let _claim = self
            .table
            .claim(name, None)
            .map_err(|e| match self.mounted_at(name) {
                Some(p) => Error::Conflict(format!(
                    "session {name} is mounted at {}; unmount it first",
                    p.display()
                )),
                None => e,
            })?;
        retention::remove_session(&*self.store, name)?;
        Ok(SessionRemoved {
            removed: name.to_string(),
            forks_removed: Vec::new(),
        })
    }
}

/// A gc of `store` with the retention pass before it (operation records, `auto/`
/// refs, sessions discarded longer than `discard_secs` ago, removed through `h`),
/// whoever serves the store: `live` names what its mounted sessions hold.
pub(super) fn collect<H: Host>(
    h: &H,
    store: &PackStore,
    live: &dyn crate::gc::Live,
    discard_secs: u64,
    dry_run: bool,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Collected> {
    let pruned = if dry_run {
        Pruned::default()
    } else {
        let now = crate::clock::unix_secs();
        retention::run(store, discard_secs, now, &mut |name| h.remove_session(name))?
    };
    let held = Held::of(store)?;
    let gc = crate::gc::gc(store, live, held::boundary(&held), dry_run, progress)?;
    Ok(Collected {
        gc,
        operations_pruned: pruned.operations,
        discarded_removed: pruned.sessions,
        auto_refs_dropped: pruned.auto_refs,
    })
}

impl crate::gc::Live for Daemon {
    fn barrier(&self) {
        drop(self.publish.write().unwrap_or_else(|p| p.into_inner()));
        for s in self.table.gc_sessions() {
            s.flush_barrier();
        }
    }

    fn live_ids(&self) -> Vec<(String, Vec<crate::id::NodeId>, Vec<crate::id::ChunkId>)> {
        self.table
            .gc_sessions()
            .into_iter()
            .map(|s| {
                let (n, c) = s.live_ids();
                (s.name().to_string(), n, c)
            })
            .collect()
    }
}
