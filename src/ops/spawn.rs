//! One way to make sessions ([`Spawn`]): fork, continue, experiment runs and bisect
//! candidates all claim the new names, build the records, commit them in ONE
//! batch (the caller's: the source's operation record goes in it too), mount, and
//! take everything back when anything fails.
//!
//! Order, each step failing without leaving anything another request won:
//! [`Spawn::claim`] owns each new name store-wide (`Host::claim`), refuses an
//! existing record and resolves and checks its mountpoint once; the caller builds
//! each record and says where it came from, a typed [`Origin`] ([`Spawn::set`]:
//! the one writer of a record's origin, which also puts the new session in its
//! source's lineage), and commits [`Spawn::ops`] in its batch, then says
//! so ([`Spawn::committed`]); [`Spawn::mount`] mounts each through its checked
//! descriptor.
//!
//! Invariants: a `Spawn` dropped before [`Spawn::mount`] returned `Ok` takes back
//! what it made: the sessions it mounted are unmounted and removed, the committed
//! records of the others deleted (with what the caller's batch gave them: info,
//! touched paths, messages, grants, operation records) while their claims are
//! still held, so nobody else can have taken the names meanwhile. A rollback that
//! fails is logged at error level naming the session, never dropped silently.
//! The claims are released last.
//!
//! The other way round, [`Removing`] takes sessions an op made earlier (an
//! experiment's forks) out in the op's own batch: unmounted and claimed first,
//! deleted by the batch, released after it.

use std::path::{Path, PathBuf};

use super::Host;
use super::views::Mounted;
use crate::control::{AgentSocket, MountFor};
use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::refs::origin::Origin;
use crate::session::{self, SessionRecord};
use crate::store::ObjectStore;

/// One new session being made.
struct New<'h, H: Host + 'h> {
    name: String,
    mountpoint: PathBuf,
    claim: H::Claim<'h>,
    dir: Option<H::Dir>,
    rec: Option<SessionRecord>,
    agent: Option<AgentSocket>,
}

/// New sessions being made by one op (see the module docs).
pub(crate) struct Spawn<'h, H: Host> {
    h: &'h H,
    /// The op, for messages (`fork`, `continue`, `experiment`, `bisect`).
    what: &'static str,
    new: Vec<New<'h, H>>,
    committed: bool,
    /// Names mounted so far, with their mountpoints.
    mounted: Vec<(String, PathBuf)>,
    done: bool,
}

impl<'h, H: Host> Spawn<'h, H> {
    /// Nothing made yet.
    pub fn new(h: &'h H, what: &'static str) -> Spawn<'h, H> {
        Spawn {
            h,
            what,
            new: Vec::new(),
            committed: false,
            mounted: Vec::new(),
            done: false,
        }
    }

    /// Own the new session `name` (refused when the name is taken or has a
    /// record) and resolve its mountpoint for `who` (created when missing).
    /// Returns its index.
    pub fn claim(&mut self, name: &str, mountpoint: &Path, who: MountFor) -> Result<usize> {
        session::validate_session_name(name)?;
        let claim = self
            .h
            .claim(name)
            .map_err(|e| Error::Conflict(format!("session {name} already exists ({e})")))?;
        if session::load_record(&*self.h.store(), name)?.is_some() {
            return Err(Error::Conflict(format!("session {name} already exists")));
        }
        let dir = self.h.open_mountpoint(mountpoint, who)?;
        self.new.push(New {
            name: name.to_string(),
            mountpoint: mountpoint.to_path_buf(),
            claim,
            dir: Some(dir),
            rec: None,
            agent: None,
        });
        Ok(self.new.len() - 1)
    }

    /// The record of new session `i`, where it came from (written into the
    /// record: the only place an origin is written) and the agent socket to
    /// serve it on.
    pub fn set(
        &mut self,
        i: usize,
        mut rec: SessionRecord,
        origin: Origin,
        agent: Option<AgentSocket>,
    ) {
        rec.origin = Some(origin);
        self.new[i].rec = Some(rec);
        self.new[i].agent = agent;
    }

    /// The ops writing every new record, each guarded by its absence, and its
    /// place in its origin's lineage: for the caller's batch (which adds what
    /// else the new sessions are given).
    pub fn ops(&self) -> Result<Vec<MetaOp>> {
        let mut ops = Vec::new();
        for n in &self.new {
            let rec = n.rec.as_ref().ok_or_else(|| {
                Error::Invalid(format!("{}: session {} has no record", self.what, n.name))
            })?;
            ops.push(MetaOp::Expect(meta::session_key(&n.name), None));
            ops.push(session::record_op(rec));
            if let Some(parent) = rec.origin.as_ref().and_then(Origin::lineage) {
                ops.push(crate::visibility::lineage_op(parent, &n.name));
            }
        }
        Ok(ops)
    }

    /// The caller's batch holding [`ops`](Self::ops) is committed.
    pub fn committed(&mut self) {
        self.committed = true;
    }

    /// Mount every new session; on failure everything is taken back (see the
    /// module docs) and the mount's error returned.
    pub fn mount(mut self) -> Result<Vec<Mounted>> {
        if !self.committed {
            return Err(Error::Invalid(format!(
                "{}: mounting sessions whose records were not committed",
                self.what
            )));
        }
        let mut out = Vec::new();
        for i in 0..self.new.len() {
            let n = &mut self.new[i];
            let (Some(dir), Some(rec)) = (n.dir.take(), n.rec.clone()) else {
                continue;
            };
            let m = self
                .h
                .mount_claimed(&mut n.claim, dir, rec, n.agent.take())?;
            self.mounted.push((n.name.clone(), n.mountpoint.clone()));
            out.push(m);
        }
        self.done = true;
        Ok(out)
    }

    /// Take back what was made (see the module docs).
    fn roll_back(&mut self) {
        if !self.committed {
            return;
        }
        let store = self.h.store();
        for n in &self.new {
            match self.mounted.iter().find(|(m, _)| *m == n.name) {
                Some((_, mp)) => {
                    let r = self
                        .h
                        .unmount_session(mp)
                        .and_then(|_| self.h.remove_session(&n.name));
                    if let Err(e) = r {
                        log::error!(
                            "{} {}: cannot take back the new session ({e}); \
                             `treefork session rm {}` removes it",
                            self.what,
                            n.name,
                            n.name
                        );
                    }
                }
                None => {
                    remove_unmounted(&*store, self.what, &n.name);
                }
            }
        }
    }
}

impl<H: Host> Drop for Spawn<'_, H> {
    fn drop(&mut self) {
        if !self.done {
            self.roll_back();
        }
        // The claims drop after this (with `new`).
    }
}

/// Sessions an op made earlier and removes in its own batch (an experiment's
/// forks at its end or adopt): each is unmounted and then claimed
/// ([`Removing::take`]), so nobody mounts or makes it again before the batch;
/// [`Removing::ops`] delete it (its record guarded by its value as read) in the
/// op's batch; the claims are released when this drops, after the commit.
pub(crate) struct Removing<'h, H: Host> {
    h: &'h H,
    /// The op, for messages (`experiment`, `bisect`).
    what: &'static str,
    /// Each session taken: its name, its claim and its record as read under
    /// the claim (the batch's guard).
    taken: Vec<(String, H::Claim<'h>, Vec<u8>)>,
}

/// What a session must be for an op to remove it ([`Removing::take`]): e.g. a
/// fork of this very experiment (its origin and canonical name).
pub(crate) type Ours<'a> = &'a dyn Fn(&SessionRecord) -> bool;

impl<'h, H: Host> Removing<'h, H> {
    /// Nothing taken yet.
    pub fn new(h: &'h H, what: &'static str) -> Removing<'h, H> {
        Removing {
            h,
            what,
            taken: Vec::new(),
        }
    }

    /// Take session `name`, which must be `ours` (checked on its record before
    /// anything is done, and again on the record read once its name is owned,
    /// whose bytes then guard the batch: a session replaced under that name
    /// meanwhile is refused, never removed): unmount it when it is mounted (its
    /// mountpoint directory removed through the descriptor of its parent kept
    /// since it was mounted: never by a path), then own its name. A session that
    /// is not ours, or cannot be unmounted or claimed, is not taken (the error
    /// says why).
    pub fn take(&mut self, name: &str, ours: Ours<'_>) -> Result<()> {
        let store = self.h.store();
        let check = |raw: Option<&[u8]>| -> Result<()> {
            let rec = match raw {
                Some(v) => SessionRecord::decode(name, v)?,
                None => return Err(Error::NotFound(format!("session {name} is gone"))),
            };
            if ours(&rec) {
                Ok(())
            } else {
                Err(Error::Conflict(format!(
                    "session {name} is not one of this {}'s sessions: not removed",
                    self.what
                )))
            }
        };
        let key = meta::session_key(name);
        check(store.meta_get(&key)?.as_deref())?;
        unmount(self.h, name)?;
        let claim = self.h.claim(name)?;
        let raw = store.meta_get(&key)?;
        check(raw.as_deref())?;
        let raw = raw.unwrap_or_default();
        self.taken.push((name.to_string(), claim, raw));
        Ok(())
    }

    /// The sessions taken, by name.
    pub fn names(&self) -> Vec<String> {
        self.taken.iter().map(|(n, _, _)| n.clone()).collect()
    }

    /// The ops deleting every session taken: record (guarded), info, touched
    /// paths, messages, grants and operation records.
    pub fn ops(&self) -> Result<Vec<MetaOp>> {
        let store = self.h.store();
        let mut ops = Vec::new();
        for (name, _, raw) in &self.taken {
            let key = meta::session_key(name);
            ops.push(MetaOp::Expect(key.clone(), Some(raw.clone())));
            ops.extend(crate::lifecycle::manage::removal_ops(&*store, name)?);
            ops.push(MetaOp::Delete(key));
        }
        Ok(ops)
    }
}

/// Unmount session `name` if it is mounted, and remove its (empty) mountpoint
/// through the descriptor of the mountpoint's parent kept since it was mounted.
pub(crate) fn unmount<H: Host>(h: &H, name: &str) -> Result<()> {
    if let Ok(ft) = h.target(Some(name)) {
        let mp: PathBuf = ft.mountpoint.clone();
        let entry = ft.mount.entry();
        drop(ft);
        h.unmount_session(&mp)?;
        if let Some(e) = entry
            && let Err(err) = e.remove_dir(true)
        {
            log::warn!(
                "session {name}: cannot remove its mountpoint {}: {err}",
                e.path().display()
            );
        }
    }
    Ok(())
}

/// The ops deleting session `name` (not mounted) and everything it has: its
/// record, guarded by its value now, and its info, touched paths, messages,
/// grants and operation records.
fn removal_ops(store: &dyn ObjectStore, name: &str) -> Result<Vec<MetaOp>> {
    let key = meta::session_key(name);
    let mut ops = vec![MetaOp::Expect(key.clone(), store.meta_get(&key)?)];
    ops.extend(crate::lifecycle::manage::removal_ops(store, name)?);
    ops.push(MetaOp::Delete(key));
    Ok(ops)
}

/// Delete everything the new session `name` (never mounted) was given: its
/// record, info, touched paths, messages, grants and operation records, in one
/// batch. `what` names the op, for the log. Returns whether it was removed: a
/// failure is logged at error level, naming what is left behind (`session rm`
/// removes it), and the caller answers its own error.
pub(crate) fn remove_unmounted(store: &dyn ObjectStore, what: &str, name: &str) -> bool {
    let r = removal_ops(store, name).and_then(|ops| store.commit(ops));
    match r {
        Ok(()) => true,
        Err(e) => {
            log::error!(
                "{what} {name}: the new session did not mount and its records could not be \
                 removed ({e}); `treefork session rm {name}` removes them"
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::memhost::MemHost;

    fn is_fork(r: &SessionRecord) -> bool {
        r.origin.as_ref().is_some_and(|o| o.source() == "src")
    }

    /// Make session `name` (live on the host), then unmount it so only its
    /// record stays, with `origin`.
    fn stored(h: &MemHost, name: &str, origin: Option<Origin>) {
        let t = h.create(name).unwrap();
        let mp = t.mountpoint.clone();
        drop(t);
        h.unmount_session(&mp).unwrap();
        let store = h.store();
        let mut rec = session::load_record(&*store, name).unwrap().unwrap();
        rec.origin = origin;
        store.commit(vec![session::record_op(&rec)]).unwrap();
    }

    #[test]
    fn removing_takes_only_its_own_sessions_and_guards_the_record_it_checked() {
        let h = MemHost::new();
        let fork = Origin::Fork {
            source: "src".into(),
        };
        stored(&h, "mine", Some(fork));
        stored(&h, "theirs", None);
        let mut r = Removing::new(&h, "experiment");
        // A session that is not ours (a name a record merely gave) is refused.
        let e = r.take("theirs", &is_fork).unwrap_err();
        assert!(matches!(e, Error::Conflict(_)), "{e}");
        assert!(e.to_string().contains("theirs"), "{e}");
        r.take("mine", &is_fork).unwrap();
        assert_eq!(r.names(), ["mine"]);
        // Its name is owned until the batch: nobody mounts or makes it meanwhile.
        assert!(h.claim("mine").is_err());
        let ops = r.ops().unwrap();
        // A record replaced meanwhile fails the batch: never removed unseen.
        let store = h.store();
        let mut rec = session::load_record(&*store, "mine").unwrap().unwrap();
        rec.bytes += 1;
        store.commit(vec![session::record_op(&rec)]).unwrap();
        assert!(store.commit(ops).is_err());
        assert!(session::load_record(&*store, "mine").unwrap().is_some());
        // As read, it is removed, and the claim goes with the Removing.
        drop(r);
        let mut r = Removing::new(&h, "experiment");
        r.take("mine", &is_fork).unwrap();
        store.commit(r.ops().unwrap()).unwrap();
        drop(r);
        assert!(session::load_record(&*store, "mine").unwrap().is_none());
        assert!(session::load_record(&*store, "theirs").unwrap().is_some());
        assert!(h.claim("mine").is_ok());
    }
}
