//! Store-wide maintenance served by the daemon: gc, fsck, session removal, and the
//! session list.
//!
//! gc and fsck are serialized by the daemon's maintenance lock. gc counts as roots
//! every session the mount table holds Live or Closing ([`crate::gc::Live`]): a
//! session being unmounted stays a root until its last flush is committed. A
//! `session rm` claims the name in the mount table first, so it never races a mount,
//! a fork or an unmount of the same session.

use crate::lifecycle::retention::{self, Pruned};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Daemon;
use crate::error::{Error, Result};
use crate::remote::held::{self, Held};
use crate::session::{self, Session};
use crate::verbs::fsck::Checked;
use crate::verbs::gc::Collected;
use crate::verbs::session_rm::SessionRemoved;
use crate::verbs::sessions::{SessionList, SessionRow};

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
        let pruned = if dry_run {
            Pruned::default()
        } else {
            let discard = self.upkeep.discard_secs;
            let now = crate::clock::unix_secs();
            retention::run(&*self.store, discard, now, &mut |name| {
                self.session_rm(name).map(drop)
            })?
        };
        let held = Held::of(&*self.store)?;
        let rep = crate::gc::gc(
            &*self.store,
            self,
            held::boundary(&held),
            dry_run,
            &mut progress(events),
        )?;
        Ok(Collected {
            gc: rep,
            operations_pruned: pruned.operations,
            discarded_removed: pruned.sessions,
            auto_refs_dropped: pruned.auto_refs,
        })
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
        crate::remote::ops::store_trim::run(&*self.store, self, req, events)
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
        })
    }

    pub(crate) fn sessions(&self) -> Result<SessionList> {
        let mounted: HashMap<String, (PathBuf, Arc<Session>)> = crate::ops::Host::live(self)
            .into_iter()
            .map(|t| (t.session.name().to_string(), (t.mountpoint, t.session)))
            .collect();
        let mut list = Vec::new();
        for r in session::list_records(&*self.store)? {
            let mp = mounted.get(&r.name).map(|(p, _)| p);
            let (bytes, inodes) = match mounted.get(&r.name) {
                Some((_, s)) => s.usage(),
                None => (r.bytes, r.inodes),
            };
            // Inodes in the mounted session's live table (eviction bounds it).
            let live = mounted.get(&r.name).map(|(_, s)| s.live_inodes());
            let life = crate::lifecycle::manage::row_fields(&*self.store, &r.name, r.created);
            list.push(SessionRow {
                state: if mp.is_some() { "mounted" } else { "stopped" }.into(),
                mountpoint: mp.cloned(),
                bytes,
                inodes,
                live_inodes: live,
                updated: r.updated,
                root: r.root.to_hex(),
                life,
                name: r.name,
            });
        }
        Ok(SessionList { sessions: list })
    }
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
