//! The mount table: every session name the daemon owns, as an explicit state machine.
//!
//! ```text
//!   claim ──► Mounting ──go_live──► Live ──begin_close──► Closing ──finish_close──► Gone
//!                │                    ▲                      │
//!                └─ dropped ─► Gone   └──── abort_close ─────┘
//! ```
//!
//! - **Mounting**: the name is claimed (a mount, a fork or `--from` import creating
//!   it, or a `session rm` removing it); nothing is served yet.
//! - **Live**: mounted and served; ops find it here.
//! - **Closing**: being unmounted; its last flushes are running. It is still a gc
//!   root ([`MountTable::gc_sessions`]) and still owns its name: a `mount` of it
//!   waits until it is Gone ([`MountTable::claim`]), a `session rm` is refused.
//! - **Gone**: removed from the table, only after its last flush returned.
//!
//! Invariants: one entry per session name and per mountpoint; a name is in the table
//! from the moment anyone starts creating, mounting or removing it until its last
//! flush is committed, so check-then-write on session names never races.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::session::Session;

/// What the daemon holds for a live mount.
pub(crate) struct Mounted {
    pub(crate) session: Arc<Session>,
    /// The mount, as identified when it was made: every syncfs and unmount goes
    /// through it, never through the path.
    pub(crate) mount: Arc<crate::fs::outside::MountRef>,
    pub(crate) bg: Option<super::serving::Server>,
    /// The io_uring queues serving the mount (joined with `bg` at the unmount).
    pub(crate) rings: Option<crate::fs::ring::Rings>,
    /// The transport serving the mount.
    pub(crate) transport: crate::fs::ring::InUse,
    /// Sends kernel cache invalidations for this mount.
    pub(crate) kernel: crate::fs::KernelCache,
    /// The session socket's listening fd (shut down to stop its acceptor).
    pub(crate) ctl_fd: i32,
    pub(crate) ctl_path: PathBuf,
    /// The agent socket's listening fd and file (removed when dropped), if the
    /// session has one.
    pub(crate) agent_ctl: Option<(i32, super::agent_socket::SocketFile)>,
    /// Unix ms of the last automatic checkpoint.
    pub(crate) last_auto_ms: Arc<AtomicU64>,
}

impl Mounted {
    pub(crate) fn close_control(&self) {
        // SAFETY: shutting down our own listening socket wakes its blocked accept().
        unsafe { libc::shutdown(self.ctl_fd, libc::SHUT_RDWR) };
        let _ = std::fs::remove_file(&self.ctl_path);
        // The agent socket's file goes with the entry (`SocketFile`'s drop).
        if let Some((fd, _)) = &self.agent_ctl {
            // SAFETY: as above.
            unsafe { libc::shutdown(*fd, libc::SHUT_RDWR) };
        }
    }
}

/// The state of one session name.
pub(crate) enum State {
    /// Claimed: being created, mounted or removed.
    Mounting,
    /// Mounted and served.
    Live(Box<Mounted>),
    /// Being unmounted: still a gc root, still owns its name.
    Closing(Arc<Session>),
}

/// One owned session name.
pub(crate) struct Entry {
    /// Where it is (or is being) mounted, if anywhere.
    pub(crate) mountpoint: Option<PathBuf>,
    pub(crate) state: State,
}

/// How long a `mount` waits for an unmount of the same session to finish.
const CLOSING_WAIT: Duration = Duration::from_secs(60);

/// The table (see the module docs).
#[derive(Default)]
pub(crate) struct MountTable {
    map: Mutex<HashMap<String, Entry>>,
    changed: Condvar,
}

/// A claimed session name; released (Gone) on drop unless it went live.
pub struct Claim<'a> {
    table: &'a MountTable,
    name: String,
    live: bool,
}

impl Claim<'_> {
    /// The claimed name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Mounting → Live at `mp`.
    pub(crate) fn go_live(&mut self, mp: &Path, m: Mounted) {
        let mut map = self.table.lock();
        let e = map.get_mut(&self.name).expect("claimed entry");
        e.mountpoint = Some(mp.to_path_buf());
        e.state = State::Live(Box::new(m));
        self.live = true;
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.live {
            let mut map = self.table.lock();
            if matches!(
                map.get(&self.name),
                Some(Entry {
                    state: State::Mounting,
                    ..
                })
            ) {
                map.remove(&self.name);
            }
            drop(map);
            self.table.changed.notify_all();
        }
    }
}

impl MountTable {
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claim `name` (to be mounted at `mp`, if given): waits while it is Closing
    /// (an unmount finishing its flushes), then refuses it if anyone owns it.
    pub(crate) fn claim(&self, name: &str, mp: Option<&Path>) -> Result<Claim<'_>> {
        let deadline = Instant::now() + CLOSING_WAIT;
        let mut map = self.lock();
        loop {
            match map.get(name) {
                Some(Entry {
                    state: State::Closing(_),
                    ..
                }) if Instant::now() < deadline => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    map = self
                        .changed
                        .wait_timeout(map, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                Some(e) => return Err(owned(name, e)),
                None => break,
            }
        }
        if let Some(mp) = mp
            && let Some((other, _)) = map
                .iter()
                .find(|(_, e)| e.mountpoint.as_deref() == Some(mp))
        {
            return Err(Error::Conflict(format!(
                "{} is already a mount point (of session {other})",
                mp.display()
            )));
        }
        map.insert(
            name.to_string(),
            Entry {
                mountpoint: mp.map(Path::to_path_buf),
                state: State::Mounting,
            },
        );
        Ok(Claim {
            table: self,
            name: name.to_string(),
            live: false,
        })
    }

    /// Live → Closing for the mount at `mp`: returns its name and what was served.
    pub(crate) fn begin_close(&self, mp: &Path) -> Result<(String, Mounted)> {
        let mut map = self.lock();
        let name = map
            .iter()
            .find(|(_, e)| e.mountpoint.as_deref() == Some(mp) && matches!(e.state, State::Live(_)))
            .map(|(n, _)| n.clone())
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "{} is not a treefork mount of this store",
                    mp.display()
                ))
            })?;
        let e = map.get_mut(&name).expect("found");
        let State::Live(m) = std::mem::replace(&mut e.state, State::Mounting) else {
            unreachable!("checked Live")
        };
        e.state = State::Closing(m.session.clone());
        Ok((name, *m))
    }

    /// Closing → Live again (the unmount failed; nothing changed).
    pub(crate) fn abort_close(&self, name: &str, m: Mounted) {
        let mut map = self.lock();
        if let Some(e) = map.get_mut(name) {
            e.state = State::Live(Box::new(m));
        }
        drop(map);
        self.changed.notify_all();
    }

    /// Closing → Gone: the last flush returned.
    pub(crate) fn finish_close(&self, name: &str) {
        let mut map = self.lock();
        if matches!(
            map.get(name),
            Some(Entry {
                state: State::Closing(_),
                ..
            })
        ) {
            map.remove(name);
        }
        drop(map);
        self.changed.notify_all();
    }

    /// Sessions gc must count as roots: Live and Closing.
    pub(crate) fn gc_sessions(&self) -> Vec<Arc<Session>> {
        self.lock()
            .values()
            .filter_map(|e| match &e.state {
                State::Live(m) => Some(m.session.clone()),
                State::Closing(s) => Some(s.clone()),
                State::Mounting => None,
            })
            .collect()
    }

    /// Mountpoints of the Live mounts.
    pub(crate) fn live_mountpoints(&self) -> Vec<PathBuf> {
        self.lock()
            .values()
            .filter(|e| matches!(e.state, State::Live(_)))
            .filter_map(|e| e.mountpoint.clone())
            .collect()
    }

    /// Whether nothing at all is owned (no mount in any state).
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Whether a mount this daemon made (Live or Closing) is at `mp`; a claim still
    /// Mounting there has mounted nothing yet.
    pub(crate) fn has_mountpoint(&self, mp: &Path) -> bool {
        self.lock()
            .values()
            .any(|e| e.mountpoint.as_deref() == Some(mp) && !matches!(e.state, State::Mounting))
    }
}

fn owned(name: &str, e: &Entry) -> Error {
    let at = e
        .mountpoint
        .as_ref()
        .map(|p| format!(" at {}", p.display()))
        .unwrap_or_default();
    Error::Conflict(match e.state {
        State::Live(_) => format!("session {name} is already mounted{at}"),
        State::Mounting => format!("session {name} is being created, mounted or removed{at}"),
        State::Closing(_) => format!("session {name} is still being unmounted{at}; retry"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_has_one_owner() {
        let t = MountTable::default();
        let a = t.claim("s", Some(Path::new("/a"))).unwrap();
        assert!(t.claim("s", None).is_err());
        assert!(t.claim("x", Some(Path::new("/a"))).is_err());
        drop(a);
        let _b = t.claim("s", None).unwrap();
    }
}
