//! Mounting and unmounting sessions (the `Host` implementation through which
//! session ops reach the daemon is `host`'s).
//!
//! A mount claims the session name in the mount table first (Mounting), resolves
//! and checks the mountpoint once, creates the session if needed, mounts through the
//! checked descriptor, then goes Live. An unmount moves the session to Closing
//! before its flushes and to Gone only after the last one returned, so it stays a gc
//! root and owns its name throughout. An unmount whose flush finds the store full
//! is refused ([`Error::StoreFull`]): the session stays mounted with everything
//! it holds. A failed mount removes a session record only
//! if it created it (the name was claimed meanwhile, so nobody else could have).

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Daemon;
use super::agent_socket::{self, SocketFile};
use super::mountpoint::{self, MountDir, MountFor};
use super::server::SocketCtx;
use super::serving::{Server, join_bounded};
use super::table::{Claim, Mounted, State};
use crate::control::{self, AgentSocket, Role};
use crate::error::{Error, Result};
use crate::fs::TreeforkFs;
use crate::fs::outside::{MountId, MountRef};
use crate::fs::ring::Transport;
use crate::ops::Host;
use crate::session::{self, Session, SessionRecord};
use crate::store::ObjectStore;

/// How a session to mount is obtained.
pub(super) enum Source<'a> {
    /// Its record (existing, or just written by a fork).
    Record(Box<SessionRecord>),
    /// Created now, imported from a host directory.
    Import(&'a Path),
    /// Created now, empty.
    Empty,
}

impl Daemon {
    /// Mount session `name` at `mp` (creating it, from `from` or empty, if absent).
    pub(crate) fn mount(
        &self,
        name: &str,
        mp: &Path,
        from: Option<&Path>,
        agent: Option<AgentSocket>,
        transport: Transport,
        events: &mut dyn FnMut(Value),
    ) -> Result<crate::verbs::mount::Mounted> {
        session::validate_session_name(name)?;
        let mut claim = self.table.claim(name, Some(mp))?;
        let source = match (session::load_record(&**self.store(), name)?, from) {
            (Some(_), Some(_)) => {
                return Err(Error::Conflict(format!(
                    "session {name} already exists; --from only applies when creating a session"
                )));
            }
            (Some(r), None) => Source::Record(Box::new(r)),
            (None, Some(dir)) => Source::Import(dir),
            (None, None) => Source::Empty,
        };
        let creating = !matches!(source, Source::Record(_));
        // A mount that names no agent socket serves the one the session was last
        // mounted with (a remount, a resume after eviction).
        let agent = match agent {
            None if !creating => self.remembered_agent(name),
            a => a,
        };
        let dir = mountpoint::open_mountpoint(mp, MountFor::User, false, &|| {
            self.dead_mount_of_ours(mp)
        })?;
        let r = self.mount_dir(&mut claim, dir, source, agent, transport, events);
        if r.is_err() && creating {
            // Created under our claim (if it got that far): nobody else's record.
            let key = crate::meta::session_key(name);
            if let Err(e) = self.store.commit(vec![crate::meta::MetaOp::Delete(key)]) {
                log::error!("mount {name}: cannot remove the record of the failed mount: {e}");
            }
        }
        r
    }

    /// The agent socket session `name` was last mounted with, if any (its info's
    /// `agent_socket`).
    fn remembered_agent(&self, name: &str) -> Option<AgentSocket> {
        match crate::lifecycle::load(&**self.store(), name) {
            Ok(i) => i?.agent_socket.map(|b| AgentSocket {
                path: b.path,
                uid: b.uid,
            }),
            Err(e) => {
                log::warn!("session {name}: unreadable info, no agent socket restored: {e}");
                None
            }
        }
    }

    /// The id of the mount registered at `mp` for this store if this (live, lock
    /// holding) daemon does not serve it: a leftover of a daemon that died.
    pub(crate) fn dead_mount_of_ours(&self, mp: &Path) -> Option<MountId> {
        if self.table.has_mountpoint(mp) {
            return None;
        }
        control::find_mount(mp)
            .filter(|r| r.mountpoint == mp && r.store == self.store_dir)
            .and_then(|r| r.mount_id)
    }

    /// The transport serving session `name`'s mount (Live), if it is mounted.
    pub(crate) fn transport_of(&self, name: &str) -> Option<crate::fs::ring::InUse> {
        match self.table.lock().get(name) {
            Some(e) => match &e.state {
                State::Live(m) => Some(m.transport),
                _ => None,
            },
            None => None,
        }
    }

    /// Where session `name` is mounted (Live), if it is.
    pub(crate) fn mounted_at(&self, name: &str) -> Option<PathBuf> {
        match self.table.lock().get(name) {
            Some(e) if matches!(e.state, State::Live(_)) => e.mountpoint.clone(),
            _ => None,
        }
    }

    /// Mount a claimed session on a checked directory, serving it on its session
    /// socket and, when `agent` is given, on an agent socket.
    pub(super) fn mount_dir(
        &self,
        claim: &mut Claim<'_>,
        dir: MountDir,
        source: Source<'_>,
        agent: Option<AgentSocket>,
        transport: Transport,
        events: &mut dyn FnMut(Value),
    ) -> Result<crate::verbs::mount::Mounted> {
        let _publishing = self.publish.read().unwrap_or_else(|p| p.into_inner());
        // The descriptors it will hold, reserved before anything is made (a
        // mount the daemon cannot serve is refused here, leaving nothing).
        let _fds = self.hold_fds(transport, agent.is_some())?;
        // Bound first, so a bad agent socket leaves nothing created or mounted
        // (its file goes when it is dropped, on any failure below).
        let agent_listener = match &agent {
            Some(a) => Some(agent_socket::bind(a)?),
            None => None,
        };
        self.mount_served(
            claim,
            &dir,
            source,
            agent.as_ref(),
            agent_listener,
            transport,
            events,
        )
    }

    /// The session record to mount: `source`'s, or a new one (imported or empty).
    fn session_record(
        &self,
        name: &str,
        dir: &MountDir,
        source: Source<'_>,
        events: &mut dyn FnMut(Value),
    ) -> Result<(SessionRecord, Option<u64>)> {
        let store = &*self.store;
        match source {
            Source::Record(r) => Ok((*r, None)),
            Source::Import(from) => {
                let mut last = Instant::now();
                let imported = crate::import::import_dir(store, from, &mut |done, total| {
                    if last.elapsed() > Duration::from_millis(100) || done == total {
                        last = Instant::now();
                        events(json!({"event": "progress", "done": done, "total": total}));
                    }
                })?;
                // The session and its info (with the git facts of `from`) in one
                // commit: a session created now always has its info record.
                let origin = crate::lifecycle::detect_origin(from, &imported.root.to_hex())?;
                let rec =
                    session::new_record(name, imported.root, imported.bytes, imported.inodes)?;
                let mut info = crate::lifecycle::SessionInfo::new(name, Some(origin));
                store.commit(vec![session::record_op(&rec), info.op()])?;
                // An import frees most of what it allocated; give it back.
                // SAFETY: malloc_trim only returns free heap pages to the kernel.
                unsafe {
                    libc::malloc_trim(0);
                }
                Ok((rec, Some(imported.skipped as u64)))
            }
            Source::Empty => {
                let (uid, gid) = dir.owner()?;
                let root = session::empty_root(store, uid, gid)?;
                let rec = session::new_record(name, root, 0, 1)?;
                let mut info = crate::lifecycle::SessionInfo::new(name, None);
                store.commit(vec![session::record_op(&rec), info.op()])?;
                Ok((rec, None))
            }
        }
    }

    /// Open the session, mount it, serve its sockets, register the mount and go
    /// Live.
    #[allow(clippy::too_many_arguments)] // the mount request's parts, passed through
    fn mount_served(
        &self,
        claim: &mut Claim<'_>,
        dir: &MountDir,
        source: Source<'_>,
        agent: Option<&AgentSocket>,
        agent_listener: Option<(UnixListener, SocketFile)>,
        transport: Transport,
        events: &mut dyn FnMut(Value),
    ) -> Result<crate::verbs::mount::Mounted> {
        let name = claim.name().to_string();
        let mp = dir.path().to_path_buf();
        let (rec, skipped) = self.session_record(&name, dir, source, events)?;
        let t0 = Instant::now();
        let store: Arc<dyn ObjectStore> = self.store.clone();
        let session = Arc::new(Session::open(store, rec)?);
        session.join_budget();
        let t_open = t0.elapsed();
        let Spawned {
            bg,
            kernel,
            mount,
            rings,
            in_use,
        } = self.spawn_fuse(&name, dir, session.clone(), transport)?;
        let t_mount = t0.elapsed();
        let (ctl_path, listener) = match session_listener(&mp) {
            Ok(x) => x,
            Err(e) => {
                if let Err(u) = mount.umount() {
                    log::error!("{}: cannot unmount the failed mount: {u}", mp.display());
                }
                return Err(e);
            }
        };
        let (ctl_fd, agent_ctl) = self.serve_sockets(&name, listener, agent, agent_listener);
        self.register(&name, &mount, &ctl_path, agent);
        claim.go_live(
            &mp,
            Mounted {
                mount: Arc::new(mount),
                kernel,
                session,
                bg: Some(bg),
                rings,
                transport: in_use,
                ctl_fd,
                ctl_path,
                agent_ctl,
                last_auto_ms: Arc::new(AtomicU64::new(crate::clock::unix_ms())),
            },
        );
        self.on_mounted(&name, agent);
        log::info!(
            "mounted session {name} at {} (open {t_open:?}, fuse mount {:?}, socket+registry {:?})",
            mp.display(),
            t_mount - t_open,
            t0.elapsed() - t_mount
        );
        Ok(crate::verbs::mount::Mounted {
            session: name.to_string(),
            mountpoint: mp.to_path_buf(),
            agent_socket: agent.map(|a| a.path.clone()),
            // Sockets and device nodes of the imported directory (see import.rs).
            skipped,
            untrusted_origin: None,
        })
    }

    /// Accept connections on a new mount's session socket (role User) and, when
    /// given, its agent socket (role Agent), both bound to session `name`. Returns
    /// the session socket's fd and the agent socket's fd and file.
    fn serve_sockets(
        &self,
        name: &str,
        listener: UnixListener,
        agent: Option<&AgentSocket>,
        agent_listener: Option<(UnixListener, SocketFile)>,
    ) -> (RawFd, Option<(RawFd, SocketFile)>) {
        let ctl_fd = listener.as_raw_fd();
        let (agent_listener, file) = agent_listener.unzip();
        let agent_ctl = agent_listener
            .as_ref()
            .zip(file)
            .map(|(l, f)| (l.as_raw_fd(), f));
        if let Some(me) = self.me.get().and_then(|w| w.upgrade()) {
            let ctx = SocketCtx {
                bound: Some(name.to_string()),
                role: Role::User,
                extra_uid: None,
                conns: AtomicUsize::new(0),
            };
            me.clone().accept_shared(listener, ctx);
            if let (Some(l), Some(a)) = (agent_listener, agent) {
                let ctx = SocketCtx {
                    bound: Some(name.to_string()),
                    role: Role::Agent,
                    extra_uid: a.uid,
                    conns: AtomicUsize::new(0),
                };
                me.accept_shared(l, ctx);
            }
        }
        (ctl_fd, agent_ctl)
    }

    /// Record the mount in the registry (a failure is only logged: the mount works,
    /// only finding it from its path does not).
    fn register(&self, name: &str, m: &MountRef, ctl_path: &Path, agent: Option<&AgentSocket>) {
        if let Err(e) = control::register_mount(&control::MountRecord {
            mountpoint: m.path().to_path_buf(),
            store: self.store_dir.clone(),
            session: name.to_string(),
            socket: Some(ctl_path.to_path_buf()),
            agent_socket: agent.map(|a| a.path.clone()),
            mount_id: Some(m.id()),
        }) {
            log::warn!("cannot register mount {}: {e}", m.path().display());
        }
    }

    /// Mount `session` on `dir` (through its descriptor), identify the new mount,
    /// and serve it in the background over `transport` (see `transport.rs`).
    fn spawn_fuse(
        &self,
        name: &str,
        dir: &MountDir,
        session: Arc<Session>,
        transport: Transport,
    ) -> Result<Spawned> {
        let notifier = Arc::new(std::sync::OnceLock::new());
        // The core the transports share (each holds a clone of the Arc).
        let core = TreeforkFs::new(session, notifier.clone());
        // The ring's queues are prepared before INIT, which offers the ring only
        // when they all were.
        let prepared = super::transport::plan(name, transport, &core)?;
        let dev = mountpoint::mount_fuse(dir, &format!("treefork:{name}"))?;
        // Its id, read before it is served (a statx asking for the id alone sends
        // the server nothing). Should that fail, dropping `dev` aborts the
        // connection: a dead mount is left, reported, for the user to detach.
        let mount = dir.identify_mount().inspect_err(|e| {
            log::error!(
                "{}: cannot identify the new mount: {e}",
                dir.path().display()
            );
        })?;
        // A second descriptor of the connection, for notifications.
        let dev2 = match dev.try_clone() {
            Ok(d) => d,
            Err(e) => {
                detach(&mount);
                return Err(Error::io("/dev/fuse", e));
            }
        };
        // A third for the ring's commands, taken only if INIT negotiated it.
        let dev3 = || dev2.try_clone();
        let bg = match super::serving::serve(name, dev, &core, prepared.is_some()) {
            Ok(bg) => bg,
            Err(e) => {
                if let Some(p) = prepared {
                    p.abandon();
                }
                detach(&mount);
                return Err(e);
            }
        };
        let (rings, in_use) = match super::transport::start(name, transport, prepared, &core, dev3)
        {
            Ok(r) => r,
            Err(failed) => {
                let super::transport::Failed { error: e, rings } = *failed;
                detach(&mount);
                if let Some(r) = rings {
                    r.join_bounded(name, JOIN_WAIT);
                }
                join_bounded(name, bg, JOIN_WAIT);
                return Err(e);
            }
        };
        let kernel = crate::fs::KernelCache::new(dev2);
        let _ = notifier.set(kernel.clone());
        Ok(Spawned {
            bg,
            kernel,
            mount,
            rings,
            in_use,
        })
    }

    /// Flush and unmount the session at `mp`. It is Closing (a gc root owning its
    /// name) from before the first flush until after the last one.
    pub(crate) fn unmount(&self, mp: &Path) -> Result<()> {
        // A recorded command still running is finalized as abandoned first.
        if let Some(t) = Host::live(self).into_iter().find(|t| t.mountpoint == mp) {
            crate::ops::exec::unmounting(&t);
            crate::ops::messages::drain(&t);
        }
        let (name, mut entry) = self.table.begin_close(mp).map_err(|e| match e {
            Error::NotFound(_) => match crate::lifecycle::manage::evicted_at(&**self.store(), mp) {
                Some(why) => Error::NotFound(why),
                None => e,
            },
            e => e,
        })?;
        // A full store: refused (the flush cannot save what programs wrote), the
        // workspace stays mounted and nothing is lost; the error says what to do.
        let full = |e: Error| {
            e.when_full(
                &format!(
                    "unmount of {} refused: the writes not yet saved do not fit; nothing was lost and the workspace stays mounted",
                    mp.display()
                ),
                || crate::store::space::measure(self.store().dir()),
            )
        };
        let r = entry.session.flush().map_err(full).and_then(|_| {
            umount_patiently(&entry.mount).map_err(|e| {
                if e.raw_os_error() == Some(libc::EBUSY) {
                    Error::Conflict(format!(
                        "{} is busy (a process has files open or its cwd there); nothing was lost, retry once it is closed",
                        mp.display()
                    ))
                } else {
                    log::error!("session {name}: unmount of {} refused: {e}", mp.display());
                    crate::fs::outside::mount_error(mp, e)
                }
            })
        });
        if let Err(e) = r {
            self.table.abort_close(&name, entry);
            return Err(e);
        }
        let r = self.close_unmounted(mp, &mut entry, JOIN_WAIT);
        self.table.finish_close(&name);
        r?;
        log::info!("unmounted session {name} from {}", mp.display());
        Ok(())
    }

    /// After the kernel let go of `mp`: stop serving and flush one last time. The
    /// FUSE loop is waited for `join_wait` at most: one that has not ended by then
    /// (its mount is still referenced, e.g. detached lazily while files are open,
    /// or was not ours to unmount) is reported and left running on its own thread,
    /// so no unmount path blocks the daemon's main loop.
    fn close_unmounted(&self, mp: &Path, entry: &mut Mounted, join_wait: Duration) -> Result<()> {
        control::unregister_mount(mp);
        entry.close_control();
        if let Some(bg) = entry.bg.take() {
            join_bounded(entry.session.name(), bg, join_wait);
        }
        // The kernel ended the ring's entries with the connection.
        if let Some(r) = entry.rings.take() {
            r.join_bounded(entry.session.name(), join_wait);
        }
        let r = entry.session.flush().map(|_| ());
        if r.is_ok() {
            self.on_unmounted(entry.session.name());
        }
        r
    }

    /// Finish mounts whose FUSE session ended (unmounted from outside).
    pub(crate) fn reap(&self) {
        let done: Vec<PathBuf> = self
            .table
            .lock()
            .values()
            .filter(|e| match &e.state {
                State::Live(m) => m.bg.as_ref().is_some_and(Server::is_finished),
                _ => false,
            })
            .filter_map(|e| e.mountpoint.clone())
            .collect();
        for mp in done {
            let Ok((name, mut entry)) = self.table.begin_close(&mp) else {
                continue;
            };
            log::info!("session {name} at {} was unmounted", mp.display());
            if let Err(e) = self.close_unmounted(&mp, &mut entry, JOIN_WAIT) {
                log::error!("session {name}: flush after unmount failed: {e}");
            }
            self.table.finish_close(&name);
        }
    }

    /// Unmount everything (lazily where a mount is busy).
    pub(crate) fn shutdown(&self) {
        for mp in self.table.live_mountpoints() {
            if let Err(e) = self.unmount(&mp) {
                log::warn!("{}: {e}; detaching lazily", mp.display());
                let Ok((name, mut entry)) = self.table.begin_close(&mp) else {
                    continue;
                };
                let _ = entry.session.flush();
                // Through the mount's identity: a path that no longer names it is
                // left alone (and its FUSE loop, still mounted, is not waited for).
                let wait = if detach(&entry.mount) {
                    JOIN_WAIT
                } else {
                    Duration::ZERO
                };
                if let Err(e) = self.close_unmounted(&mp, &mut entry, wait) {
                    log::error!("session {name}: last flush failed: {e}");
                }
                self.table.finish_close(&name);
            }
        }
    }
}

/// A mount being served: what `spawn_fuse` hands to the mount table.
struct Spawned {
    bg: Server,
    kernel: crate::fs::KernelCache,
    mount: MountRef,
    /// The io_uring queues, when INIT negotiated them.
    rings: Option<crate::fs::ring::Rings>,
    /// The transport serving the mount.
    in_use: crate::fs::ring::InUse,
}

/// How long an unmount waits for the FUSE loop of the unmounted session to end.
const JOIN_WAIT: Duration = Duration::from_secs(10);

/// Detach `m` lazily (verified by its id); whether it was.
fn detach(m: &MountRef) -> bool {
    match m.detach() {
        Ok(()) => true,
        Err(e) => {
            log::error!("{}: lazy detach refused: {e}", m.path().display());
            false
        }
    }
}

/// Bind the session socket of the mount at `mp` (mode 0600).
fn session_listener(mp: &Path) -> Result<(PathBuf, UnixListener)> {
    let ctl_path = control::session_socket(mp)?;
    let _ = std::fs::remove_file(&ctl_path);
    let listener = UnixListener::bind(&ctl_path).map_err(|e| Error::io(&ctl_path, e))?;
    std::fs::set_permissions(&ctl_path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io(&ctl_path, e))?;
    Ok((ctl_path, listener))
}

/// Unmount `mp`, retrying EBUSY for up to 2 s: a reference that lives only a moment
/// (a process that just closed its last file there is still exiting; a short-lived
/// child of another program inherited a descriptor) must not fail an unmount that
/// a second later succeeds. A mount still busy after that is reported busy.
fn umount_patiently(m: &MountRef) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match m.umount() {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 20 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            r => {
                if tries > 0 {
                    log::info!("unmount of {} was busy {tries} times", m.path().display());
                }
                return r;
            }
        }
    }
}
