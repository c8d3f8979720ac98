//! The store-wide verbs served without a daemon: when no daemon serves a store,
//! the CLI runs a store verb in its own process, under the store lock, through the
//! verb table ([`crate::verbs::run`]) on this host, so its handler and its answer
//! are the daemon's. [`Offline::serves`] names the verbs it serves; the rest need a
//! running daemon.
//!
//! Invariants: no session is mounted (every session is read from its record: `live`
//! is empty and `target` finds none); the caller holds the store lock for the
//! host's whole life. Offline `gc` does the daemon's retention work too (operation
//! records, `auto/` refs, sessions discarded longer than the default retention) and
//! reports it under the same keys.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};

use crate::control::{AgentSocket, MountFor};
use crate::error::{Error, Result};
use crate::lifecycle::{manage, retention};
use crate::ops::{Host, Target};
use crate::remote::held::{self, Held};
use crate::remote::trim::{TrimReport, TrimRequest};
use crate::session::SessionRecord;
use crate::store::{ObjectStore, PackStore, RebuildReport};
use crate::verbs::fsck::Checked;
use crate::verbs::gc::Collected;
use crate::verbs::mount::Mounted;
use crate::verbs::ping::Pong;
use crate::verbs::session_discard::Discarded;
use crate::verbs::session_sweep::Swept;
use crate::verbs::shutdown::Stopping;
use crate::verbs::umount::Unmounted;
use crate::verbs::{self, Mount, Request, Server, needs_daemon};

/// A store no daemon serves, opened by the caller under the store lock.
pub struct Offline {
    store: Arc<PackStore>,
    names: Mutex<()>,
    /// What opening the store for a repair rebuilt (reported by `fsck`).
    rebuilt: Mutex<Option<RebuildReport>>,
}

impl Offline {
    /// The host of the open store `store` (its lock held by the caller).
    pub fn new(store: PackStore) -> Offline {
        Offline {
            store: Arc::new(store),
            names: Mutex::new(()),
            rebuilt: Mutex::new(None),
        }
    }

    /// The host of a store opened for repair, whose metadata database that open
    /// rebuilt (`rebuilt`, reported by the `fsck` it serves).
    pub fn repaired(store: PackStore, rebuilt: Option<RebuildReport>) -> Offline {
        let o = Offline::new(store);
        *o.rebuilt.lock().unwrap() = rebuilt;
        o
    }

    /// Whether `op` is served without a daemon.
    pub fn serves(op: &Request) -> bool {
        matches!(
            op,
            Request::Sessions(_)
                | Request::Gc(_)
                | Request::Fsck(_)
                | Request::SessionRm(_)
                | Request::SessionShow(verbs::SessionShow { name: Some(_) })
                | Request::SessionExtend(_)
                | Request::SessionDiscard(_)
                | Request::SessionSweep(_)
                | Request::Limits(_)
                | Request::RemoteAdd(_)
                | Request::RemoteList(_)
                | Request::RemoteRm(_)
                | Request::RemoteTrust(_)
                | Request::RemoteGc(_)
                | Request::Push(_)
                | Request::StoreTrim(_)
        )
    }

    /// Run `op` as the user of this process would on the daemon; its answer
    /// without `ok`. Event lines (progress) go to `events`.
    pub fn run(&self, op: Request, events: &mut dyn FnMut(Value)) -> Result<Value> {
        if !Offline::serves(&op) {
            return Err(needs_daemon(op.name()));
        }
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let actor = crate::oplog::Actor::peer("user", uid, std::process::id());
        verbs::run(self, MountFor::User, &actor, None, None, op, events)
    }
}

impl Host for Offline {
    type Dir = PathBuf;
    type Claim<'a> = ();

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    fn target(&self, name: Option<&str>) -> Result<Target> {
        Err(Error::NotFound(match name {
            Some(n) => format!("session {n} is not mounted"),
            None => "no session is mounted: name one to push".to_string(),
        }))
    }

    fn live(&self) -> Vec<Target> {
        Vec::new()
    }

    fn name_lock(&self) -> MutexGuard<'_, ()> {
        self.names.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every name is free: nothing mounts while the store lock is held.
    fn claim(&self, _name: &str) -> Result<()> {
        Ok(())
    }

    fn open_mountpoint(&self, _path: &Path, _who: MountFor) -> Result<PathBuf> {
        Err(needs_daemon("mount"))
    }

    fn mount_claimed(
        &self,
        _claim: &mut (),
        _dir: PathBuf,
        _rec: SessionRecord,
        _agent: Option<AgentSocket>,
    ) -> Result<Mounted> {
        Err(needs_daemon("mount"))
    }

    fn unmount_session(&self, _mp: &Path) -> Result<()> {
        Err(needs_daemon("umount"))
    }

    fn remove_session(&self, name: &str) -> Result<()> {
        retention::remove_session(&*self.store, name)
    }

    /// Nothing reads lazily after the one verb this process runs.
    fn remotes_changed(&self) -> Result<()> {
        Ok(())
    }
}

/// Each phase's progress as the daemon's event line.
fn progress(events: &mut dyn FnMut(Value)) -> impl FnMut(&str, u64, u64) + '_ {
    |phase, done, total| {
        events(json!({"event": "progress", "phase": phase, "done": done, "total": total}))
    }
}

impl Server for Offline {
    fn ping(&self, _session: Option<&str>) -> Result<Pong> {
        Err(needs_daemon("ping"))
    }

    fn mount(&self, _req: Mount, _events: &mut dyn FnMut(Value)) -> Result<Mounted> {
        Err(needs_daemon("mount"))
    }

    fn umount(&self, _mountpoint: &Path) -> Result<Unmounted> {
        Err(needs_daemon("umount"))
    }

    fn shutdown(&self) -> Result<Stopping> {
        Err(needs_daemon("shutdown"))
    }

    fn gc(&self, dry_run: bool, events: &mut dyn FnMut(Value)) -> Result<Collected> {
        let discard = super::sweep::DEFAULT_DISCARD_SECS;
        let live = &crate::gc::Offline;
        super::maintenance::collect(
            self,
            &self.store,
            live,
            discard,
            dry_run,
            &mut progress(events),
        )
    }

    fn fsck(&self, repair: bool, events: &mut dyn FnMut(Value)) -> Result<Checked> {
        let held = Held::of(&*self.store)?;
        let boundary = held::boundary(&held);
        let mut r = crate::fsck::fsck(&*self.store, boundary, repair, &mut progress(events))?;
        r.rebuilt = self.rebuilt.lock().unwrap().take();
        Ok(Checked::new(r))
    }

    fn session_show(
        &self,
        name: Option<&str>,
        _bound: Option<&str>,
    ) -> Result<manage::SessionShown> {
        let name = name.ok_or_else(|| needs_daemon("session_show"))?;
        manage::show(&*self.store, name, None)
    }

    fn session_discard(&self, name: &str) -> Result<Discarded> {
        manage::discard(&*self.store, name)?;
        Ok(Discarded {
            session: name.to_string(),
            discarded: true,
            unmounted: None,
            forks_removed: Vec::new(),
        })
    }

    /// Nothing is mounted, so nothing is evicted; expiry is marked by the daemon.
    fn sweep(&self) -> Result<Swept> {
        Ok(Swept::default())
    }

    fn store_trim(&self, req: TrimRequest, events: &mut dyn FnMut(Value)) -> Result<TrimReport> {
        crate::remote::serve::store_trim::run(&*self.store, &crate::gc::Offline, req, events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offline host answers store verbs as the daemon's handlers do (a stored
    /// session listed stopped, then removed; gc's retention keys) and refuses the
    /// rest, whether the daemon serves them itself or through `ops::Host`.
    #[test]
    fn serves_store_verbs_and_refuses_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackStore::open(dir.path()).unwrap();
        let root = crate::session::empty_root(&store, 0, 0).unwrap();
        crate::session::create_record(&store, "s", root, 0, 0).unwrap();
        let h = Offline::new(store);
        let mut events = Vec::new();
        let mut run = |op: Request| h.run(op, &mut |e| events.push(e));

        let v = run(Request::Sessions(verbs::Sessions {})).unwrap();
        assert_eq!(v["sessions"][0]["name"], "s");
        assert_eq!(v["sessions"][0]["state"], "stopped");
        assert_eq!(v["sessions"][0]["mountpoint"], Value::Null);
        let v = run(Request::SessionRm(verbs::SessionRm { name: "s".into() })).unwrap();
        assert_eq!(v, json!({"removed": "s"}));
        let v = run(Request::Sessions(verbs::Sessions {})).unwrap();
        assert_eq!(v["sessions"], json!([]));
        let v = run(Request::Gc(verbs::Gc { dry_run: false })).unwrap();
        assert_eq!(v["operations_pruned"], 0);
        assert_eq!(v["gc"]["dry_run"], false);

        let ping = run(Request::Ping(verbs::Ping {})).unwrap_err();
        assert_eq!(ping.to_string(), "ping needs a running treefork daemon");
        let pull = Request::Pull(verbs::Pull {
            remote: None,
            refs: vec![],
        });
        let e = run(pull).unwrap_err();
        assert_eq!(e.to_string(), "pull needs a running treefork daemon");
        let unnamed = Request::SessionShow(verbs::SessionShow { name: None });
        assert!(!Offline::serves(&unnamed));
        // gc's phases, as the daemon's event lines.
        assert!(!events.is_empty());
        for e in &events {
            assert_eq!(e["event"], "progress", "{e}");
            assert!(e["phase"].is_string() && e["total"].is_u64(), "{e}");
        }
    }
}
