//! Session lifecycle served by the daemon: the access clock, eviction sweeps,
//! `session show/extend/discard/sweep`, the info upkeep at mount and unmount, and
//! the lifecycle part of `gc` (discarded sessions past retention, `auto/...` refs).
//!
//! Access clock: every FUSE request and op bumps its session's access counter
//! (one relaxed increment); the service loop looks at the counters once a second
//! and keeps the last time each changed in memory, and persists `last_access`
//! at most once a minute per session. Sweeps use the newer of the two.
//!
//! Eviction ([`Daemon::sweep`], every [`SWEEP_ENV`] interval, default 5 min): a
//! mounted session whose policy says it expired (`lifecycle::manage::expiry`) gets
//! `syncfs` + a checkpoint recorded as an operation of kind `evict` (trigger
//! `evict`), then an unmount, then state `expired`. A busy mount (open files, a
//! cwd inside, a recorded command running) is never forced: `evict_blocked` says
//! why and the next sweep retries (checkpointing again only if something changed).
//! An unmounted session past its policy is only marked `expired`. A session
//! whose policy names a remote (`policy.evict_to`) is pushed between the
//! checkpoint and the unmount (`crate::remote::evict`); a failed push keeps it
//! mounted with `evict_blocked` saying why (retried next sweep).
//!
//! Settings (daemon environment): [`SWEEP_ENV`] (a duration), [`DISCARD_ENV`]
//! (how long a discarded session is kept before `gc` removes it, default 7 days).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use super::Daemon;
use crate::error::{Error, Result};
use crate::lifecycle::manage::{self, PolicyChange};
use crate::lifecycle::{self, State};
use crate::ops::{Host, Target};
use crate::verbs::session_discard::Discarded;
use crate::verbs::session_sweep::{Swept, SweptBusy, SweptEvicted, SweptExpired};

/// Environment variable: the sweep interval (e.g. `5m`, `30s`).
pub const SWEEP_ENV: &str = "TREEFORK_SWEEP_INTERVAL";
/// Environment variable: discarded sessions' retention before `gc` removes them.
pub const DISCARD_ENV: &str = "TREEFORK_DISCARD_RETENTION";
/// Default sweep interval (seed 003).
pub const DEFAULT_SWEEP: Duration = Duration::from_secs(300);
/// Default retention of discarded sessions.
pub const DEFAULT_DISCARD_SECS: u64 = 7 * 86_400;
/// `last_access` is persisted at most this often per session.
const ACCESS_PERSIST_SECS: i64 = 60;
/// Info meta key: the pid of the daemon that has the session mounted (cleared at
/// a clean unmount; still set at the next mount means the daemon died).
const MOUNTED_BY: &str = "mounted_by";

fn env_duration(var: &str) -> Option<u64> {
    let v = std::env::var(var).ok()?;
    match lifecycle::parse_duration(&v) {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("{var}: {e}; using the default");
            None
        }
    }
}

/// The daemon's lifecycle state.
pub struct Upkeep {
    /// Session name → (access count last seen, unix s it last changed, unix s
    /// last persisted).
    looks: Mutex<HashMap<String, (u64, i64, i64)>>,
    last_look: Mutex<Instant>,
    last_sweep: Mutex<Instant>,
    interval: Duration,
    pub(crate) discard_secs: u64,
}

impl Default for Upkeep {
    fn default() -> Upkeep {
        Upkeep {
            looks: Mutex::default(),
            last_look: Mutex::new(Instant::now()),
            last_sweep: Mutex::new(Instant::now()),
            interval: env_duration(SWEEP_ENV)
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_SWEEP)
                .max(Duration::from_secs(1)),
            discard_secs: env_duration(DISCARD_ENV).unwrap_or(DEFAULT_DISCARD_SECS),
        }
    }
}

fn relock<G>(r: std::sync::LockResult<G>) -> G {
    r.unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Daemon {
    /// Called by the service loop: the access clock once a second, a sweep once
    /// per interval.
    pub(crate) fn upkeep_tick(&self) {
        {
            let mut l = relock(self.upkeep.last_look.lock());
            if l.elapsed() < Duration::from_secs(1) {
                return;
            }
            *l = Instant::now();
        }
        self.access_clock();
        let due = {
            let mut l = relock(self.upkeep.last_sweep.lock());
            let due = l.elapsed() >= self.upkeep.interval;
            if due {
                *l = Instant::now();
            }
            due
        };
        if due && let Err(e) = self.sweep() {
            log::error!("eviction sweep failed: {e}");
        }
    }

    /// Note which sessions were accessed; persist `last_access` at most once a
    /// minute each.
    fn access_clock(&self) {
        let now = crate::clock::unix_secs();
        let mut persist = Vec::new();
        {
            let mut looks = relock(self.upkeep.looks.lock());
            for t in Host::live(self) {
                let n = t.session.accesses();
                let e = looks
                    .entry(t.session.name().to_string())
                    .or_insert((n, now, now));
                if e.0 != n {
                    e.0 = n;
                    e.1 = now;
                }
                if e.1 > e.2 && now - e.2 >= ACCESS_PERSIST_SECS {
                    e.2 = now;
                    persist.push((t.session.name().to_string(), e.1));
                }
            }
        }
        for (name, at) in persist {
            let r = manage::update(&**self.store(), &name, &mut |i| {
                let newer = at > i.last_access;
                i.last_access = i.last_access.max(at);
                Ok(newer)
            });
            if let Err(e) = r {
                log::warn!("session {name}: cannot persist its last access: {e}");
            }
        }
    }

    /// The last access of a mounted session as this daemon knows it.
    fn last_access_seen(&self, name: &str) -> Option<i64> {
        relock(self.upkeep.looks.lock()).get(name).map(|e| e.1)
    }

    /// Info upkeep when a session goes live: a recovery when the daemon that had
    /// it mounted died, an expired (or discarded) session resumes as active, and
    /// the agent socket it is served on is remembered (a later mount brings it
    /// back).
    pub(crate) fn on_mounted(&self, name: &str, agent: Option<&crate::control::AgentSocket>) {
        let me = std::process::id();
        let now = crate::clock::unix_secs();
        relock(self.upkeep.looks.lock()).remove(name);
        let r = manage::update(&**self.store(), name, &mut |i| {
            if i.meta.contains_key(MOUNTED_BY) {
                i.metrics.recoveries += 1;
            }
            i.meta.insert(MOUNTED_BY.into(), json!(me));
            if matches!(i.state, State::Expired | State::Discarded) {
                i.state = State::Active;
            }
            i.last_access = now;
            i.evict_blocked = None;
            if let Some(a) = agent {
                i.agent_socket = Some(lifecycle::AgentBinding {
                    path: a.path.clone(),
                    uid: a.uid,
                });
            }
            Ok(true)
        });
        if let Err(e) = r {
            log::warn!("session {name}: cannot update its info at mount: {e}");
        }
    }

    /// Info upkeep after a clean unmount.
    pub(crate) fn on_unmounted(&self, name: &str) {
        let r = manage::update(&**self.store(), name, &mut |i| {
            Ok(i.meta.remove(MOUNTED_BY).is_some())
        });
        if let Err(e) = r {
            log::warn!("session {name}: cannot update its info at unmount: {e}");
        }
    }

    /// Apply `mount` flags to a session's info.
    pub(crate) fn apply_policy(&self, name: &str, change: &PolicyChange) -> Result<()> {
        if change.is_empty() {
            return Ok(());
        }
        let now = crate::clock::unix_secs();
        manage::update(&**self.store(), name, &mut |i| {
            change.apply(i, now)?;
            Ok(true)
        })
        .map(drop)
    }

    /// `session show`.
    pub(crate) fn session_show(
        &self,
        name: Option<&str>,
        bound: Option<&str>,
    ) -> Result<manage::SessionShown> {
        let name = match (name, bound) {
            (Some(n), Some(b)) if n != b => {
                return Err(Error::Forbidden(format!(
                    "this socket serves session {b}; it may only show that one"
                )));
            }
            (Some(n), _) | (None, Some(n)) => n,
            (None, None) => {
                return Err(Error::Invalid(
                    "which session? name it (`session show NAME`)".into(),
                ));
            }
        };
        let mp = self.mounted_at(name);
        // A mounted session is flushed first, so the touched count includes what
        // programs wrote and did not sync yet.
        if let Ok(t) = crate::ops::Host::target(self, Some(name)) {
            crate::ops::syncfs_at(&t.mount)?;
            t.session.flush()?;
        }
        let mut v = manage::show(&**self.store(), name, mp.as_deref())?;
        v.transport = self.transport_of(name).map(|t| t.name().to_string());
        if let Some(t) = self.last_access_seen(name) {
            v.idle = crate::clock::unix_secs().saturating_sub(t).max(0);
        }
        Ok(v)
    }

    /// `session discard`: unmount (refused while busy), then state `discarded`.
    pub(crate) fn session_discard(&self, name: &str) -> Result<Discarded> {
        if crate::session::load_record(&**self.store(), name)?.is_none() {
            return Err(Error::NotFound(format!("no session named {name}")));
        }
        let unmounted = match self.mounted_at(name) {
            Some(mp) => {
                self.unmount(&mp)?;
                Some(mp)
            }
            None => None,
        };
        // Owning the name keeps a mount of it out while the state changes.
        let _claim = self.table.claim(name, None)?;
        manage::discard(&**self.store(), name)?;
        Ok(Discarded {
            session: name.to_string(),
            discarded: true,
            unmounted,
            forks_removed: Vec::new(),
        })
    }

    /// One eviction sweep over every session; returns what was evicted, what was
    /// busy, and what was only marked expired.
    pub(crate) fn sweep(&self) -> Result<Swept> {
        let store = self.store().clone();
        let now = crate::clock::unix_secs();
        let live: HashMap<String, Target> = Host::live(self)
            .into_iter()
            .map(|t| (t.session.name().to_string(), t))
            .collect();
        let mut swept = Swept::default();
        for rec in crate::session::list_records(&*store)? {
            let name = rec.name;
            let mut info = manage::load_or_legacy(&*store, &name, rec.created);
            if let Some(seen) = self.last_access_seen(&name) {
                info.last_access = info.last_access.max(seen);
            }
            let Some(why) = manage::expiry(&info, now) else {
                continue;
            };
            if let Some(t) = live.get(&name)
                && why == manage::UNTIL_PROMOTE
                && changed_since_promote(t, &info)
            {
                // Changed after its promote: not everything is promoted any more.
                continue;
            }
            match live.get(&name) {
                None => {
                    manage::update(&*store, &name, &mut |i| {
                        let go = matches!(i.state, State::Active | State::Promoted);
                        if go {
                            i.state = State::Expired;
                            i.evicted = Some(lifecycle::Evicted {
                                why: why.clone(),
                                time: now,
                                mountpoint: None,
                                checkpoint: None,
                            });
                        }
                        Ok(go)
                    })?;
                    swept.expired.push(SweptExpired {
                        session: name,
                        reason: why,
                    });
                }
                Some(t) => match self.evict(t, &info, &why) {
                    Ok(ckpt) => {
                        log::info!("session {name}: evicted ({why})");
                        swept.evicted.push(SweptEvicted {
                            session: name,
                            reason: why,
                            checkpoint: ckpt,
                        });
                    }
                    Err(e) => {
                        let msg = e.to_string();
                        log::info!("session {name}: not evicted ({why}): {msg}");
                        manage::update(&*store, &name, &mut |i| {
                            i.evict_blocked = Some(msg.clone());
                            Ok(true)
                        })?;
                        swept.busy.push(SweptBusy {
                            session: name,
                            reason: why,
                            blocked: msg,
                        });
                    }
                },
            }
        }
        self.sweep_forks(&live, &mut swept)?;
        Ok(swept)
    }

    /// Remove the unmounted experiment forks whose source is gone, discarded or
    /// expired (this sweep may just have expired it).
    fn sweep_forks(&self, live: &HashMap<String, Target>, swept: &mut Swept) -> Result<()> {
        for (name, why) in crate::ops::experiment::left::stranded(&**self.store())? {
            if live.contains_key(&name) {
                continue;
            }
            match Host::remove_session(self, &name) {
                Ok(()) => {
                    log::info!("session {name}: experiment fork removed ({why})");
                    swept.forks_removed.push(SweptExpired {
                        session: name,
                        reason: why,
                    });
                }
                Err(e) => log::info!("session {name}: experiment fork stays ({why}): {e}"),
            }
        }
        Ok(())
    }

    /// Evict a mounted session: syncfs + checkpoint (operation `evict`), unmount,
    /// state `expired`. Returns the checkpoint taken, if one was.
    fn evict(
        &self,
        t: &Target,
        info: &lifecycle::SessionInfo,
        why: &str,
    ) -> Result<Option<String>> {
        let s = &t.session;
        if crate::ops::command_running(s) {
            return Err(Error::Conflict("a recorded command is running".into()));
        }
        let ckpt = {
            // The daemon's own triggers (automatic and git-commit checkpoints) hold
            // the lock for moments: wait that long, not for a user's operation.
            let _g = lock_within(&s.op_lock, OP_LOCK_WAIT)
                .ok_or_else(|| Error::Conflict("an operation is running".into()))?;
            crate::ops::syncfs_at(&t.mount)?;
            // Saved once; again on a retry only if something changed meanwhile.
            if info.evict_blocked.is_none() || s.has_changes()? || s.record().head.is_none() {
                Some(crate::ops::evict_checkpoint(s, why)?.id.to_hex())
            } else {
                None
            }
        };
        let pushed = match &info.policy.evict_to {
            Some(remote) => Some(crate::remote::evict::push_before_evict(self, s, remote)?),
            None => None,
        };
        self.unmount(&t.mountpoint)?;
        if let (Some(remote), Some(state)) = (&info.policy.evict_to, pushed) {
            crate::remote::evict::push_after_unmount(self, s.name(), remote, state);
        }
        let evicted = lifecycle::Evicted {
            why: why.to_string(),
            time: crate::clock::unix_secs(),
            mountpoint: Some(t.mountpoint.display().to_string()),
            checkpoint: ckpt.clone().or_else(|| s.record().head.map(|h| h.to_hex())),
        };
        manage::update(&**self.store(), s.name(), &mut |i| {
            i.state = State::Expired;
            i.evict_blocked = None;
            i.evicted = Some(evicted.clone());
            Ok(true)
        })?;
        Ok(ckpt)
    }
}

/// Whether live session `t` changed since its last promote (its tree, `.git/`
/// aside, is not the one promoted): until-promote then waits for the next promote. A promote
/// recorded before the promoted tree was kept counts as unchanged.
fn changed_since_promote(t: &Target, info: &lifecycle::SessionInfo) -> bool {
    let Some(promoted) = info
        .promoted
        .as_ref()
        .and_then(|p| p.root.as_deref())
        .and_then(crate::id::NodeId::from_hex)
    else {
        return false;
    };
    let s = &t.session;
    let now = crate::ops::syncfs_at(&t.mount).and_then(|_| s.flush());
    let Ok(root) = now else {
        return true;
    };
    // The workspace's own `.git` changes with any git command (and with the
    // promote commit taken in): never promoted, so not a change that counts.
    let mut changed = false;
    let walked = crate::diff::diff_walk(&**s.store(), promoted, root, &mut |e| {
        changed = e.path != b".git" && !e.path.starts_with(b".git/");
        !changed
    });
    walked.is_err() || changed
}

/// How long an eviction waits for a session's operation lock.
const OP_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// `m` locked, polling for at most `wait` (a poisoned lock is taken: the sweep only
/// checkpoints, which is consistent whatever the holder left).
fn lock_within(
    m: &std::sync::Mutex<()>,
    wait: std::time::Duration,
) -> Option<std::sync::MutexGuard<'_, ()>> {
    let end = std::time::Instant::now() + wait;
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < end => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

#[cfg(test)]
mod lock_within_tests {
    use super::lock_within;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    #[test]
    fn waits_for_a_short_holder_and_gives_up_on_a_long_one() {
        let m = Arc::new(Mutex::new(()));
        let held = m.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            let _g = held.lock().unwrap();
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
        });
        rx.recv().unwrap();
        assert!(lock_within(&m, Duration::from_secs(5)).is_some());
        h.join().unwrap();
        let _g = m.lock().unwrap();
        assert!(lock_within(&m, Duration::from_millis(30)).is_none());
    }
}
