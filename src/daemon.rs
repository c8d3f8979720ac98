//! The store daemon: one process per store, serving every mounted session of it.
//!
//! Owns: the store lock, the open store, the control sockets (the store's, each
//! session's, and optional agent-role sockets: peer check, role check, rate bound,
//! connection cap), the table of mounts, periodic flushing, and orderly shutdown. One process per store because sled allows
//! one opener; it also lets every session share one object cache.
//!
//! Lifecycle: the CLI starts the daemon on first mount (or runs it in the foreground);
//! the daemon exits when its last mount goes away (umount request, external
//! `umount`, SIGTERM/SIGINT), flushing every session first.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::control::{self, Op, Role};
use crate::error::{Error, Result};
use crate::fs::TreeforkFs;
use crate::lock::StoreLock;
use crate::session::{self, Session};
use crate::store::{ObjectStore, PackStore};

/// How often dirty sessions are flushed in the background.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(5);

pub(crate) struct Mounted {
    pub(crate) session: Arc<Session>,
    bg: Option<fuser::BackgroundSession>,
    /// Sends kernel cache invalidations for this mount.
    pub(crate) notifier: fuser::Notifier,
    /// The session socket's listening fd (shut down to stop its acceptor).
    ctl_fd: i32,
    ctl_path: PathBuf,
    /// The agent socket's listening fd and path, if the session has one.
    agent_ctl: Option<(i32, PathBuf)>,
    /// Unix ms of the last automatic checkpoint.
    pub(crate) last_auto_ms: u64,
}

impl Mounted {
    fn close_control(&self) {
        // SAFETY: shutting down our own listening socket wakes its blocked accept().
        unsafe { libc::shutdown(self.ctl_fd, libc::SHUT_RDWR) };
        let _ = std::fs::remove_file(&self.ctl_path);
        if let Some((fd, path)) = &self.agent_ctl {
            // SAFETY: as above.
            unsafe { libc::shutdown(*fd, libc::SHUT_RDWR) };
            remove_socket_file(path);
        }
    }
}

/// An agent-role socket requested with a mount or fork.
#[derive(Debug, Clone)]
pub(crate) struct AgentSocket {
    /// Absolute path of the socket file.
    pub(crate) path: PathBuf,
    /// A uid allowed besides the daemon's and root; the socket file is chowned to it.
    pub(crate) uid: Option<u32>,
}

impl AgentSocket {
    /// From the `agent_socket`/`agent_uid` fields of a request.
    pub(crate) fn from_request(path: Option<PathBuf>, uid: Option<u32>) -> Result<Option<Self>> {
        match (path, uid) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(Error::Invalid(
                "agent_uid needs agent_socket (the socket it may use)".into(),
            )),
            (Some(path), uid) if path.is_absolute() => Ok(Some(AgentSocket { path, uid })),
            (Some(path), _) => Err(Error::Invalid(format!(
                "agent socket {} must be an absolute path",
                path.display()
            ))),
        }
    }
}

/// What one listening control socket serves.
struct SocketCtx {
    /// The session it is bound to (`None`: the store socket).
    bound: Option<String>,
    role: Role,
    /// A uid allowed besides the daemon's and root (agent sockets only).
    extra_uid: Option<u32>,
    /// Connections being served.
    conns: AtomicUsize,
}

/// Remove a socket file we created, only if it still is a socket (the directory
/// may belong to someone else, who may have replaced it).
fn remove_socket_file(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}

/// Bind an agent socket at a caller-chosen path, mode 0600, owned by `uid` when
/// given. A stale socket file (nobody answers) is replaced; anything else at the path
/// is refused, never removed. The mode and owner are set through an `O_PATH |
/// O_NOFOLLOW` descriptor checked to be the socket we just bound (a socket owned by
/// us), so a file swapped in meanwhile (e.g. a symlink to a system file, in a
/// directory the agent can write) is never chmod'ed or chown'ed.
fn bind_agent_socket(a: &AgentSocket) -> Result<UnixListener> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileTypeExt;
    let path = &a.path;
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(Error::Conflict(format!(
                    "agent socket {} is in use by a running server",
                    path.display()
                )));
            }
            let _ = std::fs::remove_file(path);
        }
        Ok(_) => {
            return Err(Error::Invalid(format!(
                "agent socket {} exists and is not a socket; refusing to replace it",
                path.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(path, e)),
    }
    let listener = UnixListener::bind(path).map_err(|e| Error::io(path, e))?;
    let secure = || -> Result<()> {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::Invalid("agent socket path contains NUL".into()))?;
        // SAFETY: valid C string; the fd is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(Error::io(path, std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let md = std::fs::File::from(fd.try_clone().map_err(|e| Error::io(path, e))?)
            .metadata()
            .map_err(|e| Error::io(path, e))?;
        // SAFETY: geteuid has no preconditions.
        if !md.file_type().is_socket() || md.uid() != unsafe { libc::geteuid() } {
            return Err(Error::Conflict(format!(
                "agent socket {} was replaced while it was being set up",
                path.display()
            )));
        }
        let via = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        std::fs::set_permissions(&via, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io(path, e))?;
        if let Some(uid) = a.uid {
            // SAFETY: valid fd and an empty C string with AT_EMPTY_PATH.
            let rc = unsafe {
                libc::fchownat(
                    fd.as_raw_fd(),
                    c"".as_ptr(),
                    uid,
                    u32::MAX,
                    libc::AT_EMPTY_PATH,
                )
            };
            if rc != 0 {
                return Err(Error::io(path, std::io::Error::last_os_error()));
            }
        }
        Ok(())
    };
    if let Err(e) = secure() {
        drop(listener);
        remove_socket_file(path);
        return Err(e);
    }
    Ok(listener)
}

/// A running daemon.
pub struct Daemon {
    store_dir: PathBuf,
    store: Arc<PackStore>,
    mounts: Mutex<HashMap<PathBuf, Mounted>>,
    socket: PathBuf,
    me: std::sync::OnceLock<std::sync::Weak<Daemon>>,
    stop: AtomicBool,
    /// Mount requests in progress (the daemon does not exit while one runs).
    pending: std::sync::atomic::AtomicUsize,
    /// Requests read from a control connection whose response is not written yet;
    /// the daemon waits for them before exiting (an `umount` that ends the daemon
    /// must still get its answer).
    unanswered: std::sync::atomic::AtomicUsize,
    /// Held shared while a session is being created or mounted (its puts are not
    /// yet reachable from a mounted session's table or a committed record); a gc
    /// takes it exclusively once, as part of its barrier.
    publish: std::sync::RwLock<()>,
    /// Serializes gc and fsck.
    maintenance: Mutex<()>,
    _lock: StoreLock,
}

/// Options of the daemon process.
pub struct DaemonOptions {
    /// Store directory (absolute).
    pub store: PathBuf,
    /// Mount to perform before serving (foreground mode).
    pub initial: Option<Op>,
}

/// Check a mountpoint: exists, is a directory, is empty, and is not already a mount.
/// A stale treefork/FUSE mount left by a killed daemon is detached first.
///
/// `ours_dead` says whether a mount found at `mp` is a dead mount of this daemon's
/// store (registered for the store, but not served by the live daemon holding the
/// store lock): the kernel may still answer `stat` from its cache for a second after
/// the daemon died, so the registry, not ENOTCONN alone, decides.
pub fn check_mountpoint(mp: &Path, ours_dead: &dyn Fn() -> bool) -> Result<()> {
    if is_mountpoint(mp) && ours_dead() {
        log::warn!(
            "{}: mount left by a dead daemon of this store; detaching it",
            mp.display()
        );
        detach(mp);
    }
    let md = match std::fs::metadata(mp) {
        Ok(m) => m,
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            log::warn!(
                "{}: stale FUSE mount (daemon died); detaching it",
                mp.display()
            );
            detach(mp);
            std::fs::metadata(mp).map_err(|e| Error::io(mp, e))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Invalid(format!(
                "mountpoint {} does not exist",
                mp.display()
            )));
        }
        Err(e) => return Err(Error::io(mp, e)),
    };
    if !md.is_dir() {
        return Err(Error::Invalid(format!(
            "mountpoint {} is not a directory",
            mp.display()
        )));
    }
    if is_mountpoint(mp) {
        return Err(Error::Conflict(format!(
            "{} is already a mount point",
            mp.display()
        )));
    }
    let mut rd = std::fs::read_dir(mp).map_err(|e| Error::io(mp, e))?;
    if rd.next().is_some() {
        return Err(Error::Invalid(format!(
            "mountpoint {} is not empty",
            mp.display()
        )));
    }
    Ok(())
}

/// Whether `p` is listed as a mount point in /proc/self/mountinfo.
pub fn is_mountpoint(p: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = p.to_string_lossy();
    info.lines().any(|l| {
        l.split(' ')
            .nth(4)
            .map(|m| unescape_mount(m) == want)
            .unwrap_or(false)
    })
}

fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Lazily detach whatever is mounted at `mp`.
pub fn detach(mp: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(mp.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: valid C string.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) == 0 }
}

fn umount(mp: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(mp.as_os_str().as_bytes())?;
    // SAFETY: valid C string.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The uid of the process at the other end of a Unix socket (SO_PEERCRED).
fn peer_uid(s: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred.uid)
}

impl Daemon {
    /// Take the store lock, open the store and bind the control socket.
    pub fn start(store_dir: &Path) -> Result<Arc<Daemon>> {
        let lock = StoreLock::acquire(store_dir)?;
        let store = Arc::new(PackStore::open(store_dir)?);
        let socket = control::daemon_socket(store_dir)?;
        // We hold the store lock, so any socket file left here is stale.
        let _ = std::fs::remove_file(&socket);
        let d = Arc::new(Daemon {
            me: std::sync::OnceLock::new(),
            store_dir: store_dir.to_path_buf(),
            store,
            mounts: Mutex::new(HashMap::new()),
            socket,
            stop: AtomicBool::new(false),
            pending: std::sync::atomic::AtomicUsize::new(0),
            unanswered: std::sync::atomic::AtomicUsize::new(0),
            publish: std::sync::RwLock::new(()),
            maintenance: Mutex::new(()),
            _lock: lock,
        });
        let _ = d.me.set(Arc::downgrade(&d));
        Ok(d)
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<PackStore> {
        &self.store
    }

    pub(crate) fn mounts(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Mounted>> {
        self.mounts.lock().unwrap()
    }

    /// Serve until the last mount is gone or a stop is requested.
    pub fn serve(self: &Arc<Self>, initial: Option<Op>) -> Result<()> {
        let listener = UnixListener::bind(&self.socket).map_err(|e| Error::io(&self.socket, e))?;
        std::fs::set_permissions(&self.socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io(&self.socket, e))?;
        log::info!(
            "daemon {} serving store {} on {}",
            std::process::id(),
            self.store_dir.display(),
            self.socket.display()
        );
        if let Some(op) = initial
            && let Err(e) = self.handle(op, &mut |_| {})
        {
            let _ = std::fs::remove_file(&self.socket);
            return Err(e);
        }
        let ctx = SocketCtx {
            bound: None,
            role: Role::User,
            extra_uid: None,
            conns: AtomicUsize::new(0),
        };
        self.clone().accept(listener, ctx, false);
        let started = Instant::now();
        let mut last_flush = Instant::now();
        let mut ever_mounted = initial_mounted(self);
        while !self.stop.load(Ordering::Relaxed) && !signal_received() {
            std::thread::sleep(Duration::from_millis(50));
            self.reap();
            {
                let m = self.mounts.lock().unwrap();
                ever_mounted |= !m.is_empty();
                let idle = m.is_empty() && self.pending.load(Ordering::SeqCst) == 0;
                if idle && (ever_mounted || started.elapsed() > Duration::from_secs(30)) {
                    // Decided under the mounts lock: a mount request arriving now sees
                    // `stop` and is told to retry with a new daemon.
                    self.stop.store(true, Ordering::SeqCst);
                    break;
                }
            }
            if last_flush.elapsed() >= FLUSH_INTERVAL {
                self.flush_all();
                last_flush = Instant::now();
            }
            crate::commands::auto_checkpoints(self);
        }
        self.shutdown();
        let _ = std::fs::remove_file(&self.socket);
        let t = Instant::now();
        while self.unanswered.load(Ordering::SeqCst) > 0 && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        log::info!("daemon {} exiting", std::process::id());
        Ok(())
    }

    fn flush_all(&self) {
        let sessions: Vec<Arc<Session>> = self
            .mounts
            .lock()
            .unwrap()
            .values()
            .map(|m| m.session.clone())
            .collect();
        for s in sessions {
            if let Err(e) = s.flush() {
                log::error!("session {}: background flush failed: {e}", s.name());
            }
        }
    }

    /// Forget mounts whose FUSE session ended (unmounted from outside).
    fn reap(&self) {
        let mut m = self.mounts.lock().unwrap();
        let done: Vec<PathBuf> = m
            .iter()
            .filter(|(_, v)| v.bg.as_ref().is_some_and(|b| b.guard.is_finished()))
            .map(|(k, _)| k.clone())
            .collect();
        for k in done {
            if let Some(mut v) = m.remove(&k) {
                control::unregister_mount(&k);
                v.close_control();
                log::info!(
                    "session {} at {} was unmounted",
                    v.session.name(),
                    k.display()
                );
                if let Err(e) = v.session.flush() {
                    log::error!(
                        "session {}: flush after unmount failed: {e}",
                        v.session.name()
                    );
                }
                if let Some(bg) = v.bg.take()
                    && let Err(e) = bg.join()
                {
                    log::error!(
                        "session {}: FUSE loop ended with an error: {e}",
                        v.session.name()
                    );
                }
            }
        }
    }

    fn shutdown(&self) {
        let all: Vec<PathBuf> = self.mounts.lock().unwrap().keys().cloned().collect();
        for mp in all {
            if let Err(e) = self.unmount(&mp) {
                log::warn!("{}: {e}; detaching lazily", mp.display());
                if let Some(mut m) = self.mounts.lock().unwrap().remove(&mp) {
                    let _ = m.session.flush();
                    m.close_control();
                    detach(&mp);
                    control::unregister_mount(&mp);
                    if let Some(bg) = m.bg.take() {
                        let _ = bg.join();
                    }
                }
            }
        }
    }

    fn unmount(&self, mp: &Path) -> Result<()> {
        let mut entry = self.mounts.lock().unwrap().remove(mp).ok_or_else(|| {
            Error::NotFound(format!(
                "{} is not a treefork mount of this store",
                mp.display()
            ))
        })?;
        let r = entry.session.flush().and_then(|_| {
            umount(mp).map_err(|e| {
                if e.raw_os_error() == Some(libc::EBUSY) {
                    Error::Conflict(format!(
                        "{} is busy (a process has files open or its cwd there); nothing was lost, retry once it is closed",
                        mp.display()
                    ))
                } else {
                    Error::io(mp, e)
                }
            })
        });
        if let Err(e) = r {
            self.mounts.lock().unwrap().insert(mp.to_path_buf(), entry);
            return Err(e);
        }
        control::unregister_mount(mp);
        entry.close_control();
        if let Some(bg) = entry.bg.take()
            && let Err(e) = bg.join()
        {
            log::error!(
                "session {}: FUSE loop ended with an error: {e}",
                entry.session.name()
            );
        }
        entry.session.flush()?;
        log::info!(
            "unmounted session {} from {}",
            entry.session.name(),
            mp.display()
        );
        Ok(())
    }

    pub(crate) fn mount(
        &self,
        name: &str,
        mp: &Path,
        from: Option<&Path>,
        agent: Option<AgentSocket>,
        events: &mut dyn FnMut(Value),
    ) -> Result<Value> {
        session::validate_session_name(name)?;
        if let Some(p) = self.mounted_at(name) {
            return Err(Error::Conflict(format!(
                "session {name} is already mounted at {}",
                p.display()
            )));
        }
        let rec = match session::load_record(&**self.store(), name)? {
            Some(r) if from.is_some() => {
                let _ = r;
                return Err(Error::Conflict(format!(
                    "session {name} already exists; --from only applies when creating a session"
                )));
            }
            r => r,
        };
        self.mount_record(name, mp, rec, from, agent, events)
    }

    /// Whether `mp` is registered as a mount of this store that this (live, lock
    /// holding) daemon does not serve: a leftover of a daemon that died.
    pub(crate) fn is_dead_mount_of_ours(&self, mp: &Path) -> bool {
        !self.mounts().contains_key(mp)
            && control::find_mount(mp)
                .is_some_and(|r| r.mountpoint == mp && r.store == self.store_dir)
    }

    /// Where session `name` is mounted, if it is.
    pub(crate) fn mounted_at(&self, name: &str) -> Option<PathBuf> {
        self.mounts()
            .iter()
            .find(|(_, v)| v.session.name() == name)
            .map(|(p, _)| p.clone())
    }

    /// Mount a session from its record (or create it: imported from `from`, or empty),
    /// serving it on its session socket and, when `agent` is given, on an agent socket.
    pub(crate) fn mount_record(
        &self,
        name: &str,
        mp: &Path,
        existing: Option<session::SessionRecord>,
        from: Option<&Path>,
        agent: Option<AgentSocket>,
        events: &mut dyn FnMut(Value),
    ) -> Result<Value> {
        if !mp.is_absolute() {
            return Err(Error::Invalid(format!(
                "mountpoint {} must be an absolute path",
                mp.display()
            )));
        }
        let _publishing = self.publish.read().unwrap();
        {
            let m = self.mounts.lock().unwrap();
            if let Some((p, _)) = m.iter().find(|(_, v)| v.session.name() == name) {
                return Err(Error::Conflict(format!(
                    "session {name} is already mounted at {}",
                    p.display()
                )));
            }
        }
        check_mountpoint(mp, &|| self.is_dead_mount_of_ours(mp))?;
        // Bound first, so a bad agent socket leaves nothing created or mounted.
        let agent_listener = match &agent {
            Some(a) => Some(bind_agent_socket(a)?),
            None => None,
        };
        let r = self.mount_served(
            name,
            mp,
            existing,
            from,
            agent.as_ref(),
            agent_listener,
            events,
        );
        if r.is_err()
            && let Some(a) = &agent
        {
            remove_socket_file(&a.path);
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn mount_served(
        &self,
        name: &str,
        mp: &Path,
        existing: Option<session::SessionRecord>,
        from: Option<&Path>,
        agent: Option<&AgentSocket>,
        agent_listener: Option<UnixListener>,
        events: &mut dyn FnMut(Value),
    ) -> Result<Value> {
        let store: Arc<dyn ObjectStore> = self.store.clone();
        let mut skipped = None;
        let rec = match (existing, from) {
            (Some(r), _) => r,
            (None, Some(dir)) => {
                let mut last = Instant::now();
                let imported = crate::import::import_dir(&*store, dir, &mut |done, total| {
                    if last.elapsed() > Duration::from_millis(100) || done == total {
                        last = Instant::now();
                        events(json!({"event": "progress", "done": done, "total": total}));
                    }
                })?;
                skipped = Some(imported.skipped);
                let rec = session::create_record(
                    &*store,
                    name,
                    imported.root,
                    imported.bytes,
                    imported.inodes,
                )?;
                // An import frees most of what it allocated; give it back.
                // SAFETY: malloc_trim only returns free heap pages to the kernel.
                unsafe {
                    libc::malloc_trim(0);
                }
                rec
            }
            (None, None) => {
                let md = std::fs::metadata(mp).map_err(|e| Error::io(mp, e))?;
                let root = session::empty_root(&*store, md.uid(), md.gid())?;
                session::create_record(&*store, name, root, 0, 1)?
            }
        };
        let t0 = Instant::now();
        let session = Arc::new(Session::open(store, rec)?);
        let t_open = t0.elapsed();
        let mut cfg = fuser::Config::default();
        cfg.mount_options = vec![
            fuser::MountOption::FSName(format!("treefork:{name}")),
            fuser::MountOption::Subtype("treefork".into()),
            fuser::MountOption::DefaultPermissions,
            fuser::MountOption::Dev,
        ];
        cfg.acl = fuser::SessionACL::All;
        // 4 threads: measured per-request latency (access(2) of a missing name, one
        // LOOKUP) ~100 us with 1 thread, 35-40 us with 2, 4 or 8 on this 2-core VM.
        cfg.n_threads = Some(4);
        cfg.clone_fd = true;
        let notifier = Arc::new(std::sync::OnceLock::new());
        let bg = fuser::spawn_mount(TreeforkFs::new(session.clone(), notifier.clone()), mp, &cfg)
            .map_err(|e| Error::io(mp, e))?;
        let _ = notifier.set(bg.notifier());
        let t_mount = t0.elapsed();
        let ctl_path = control::session_socket(mp)?;
        let _ = std::fs::remove_file(&ctl_path);
        let listener = UnixListener::bind(&ctl_path).map_err(|e| Error::io(&ctl_path, e))?;
        std::fs::set_permissions(&ctl_path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io(&ctl_path, e))?;
        let ctl_fd = std::os::fd::AsRawFd::as_raw_fd(&listener);
        let agent_ctl = agent_listener
            .as_ref()
            .zip(agent)
            .map(|(l, a)| (std::os::fd::AsRawFd::as_raw_fd(l), a.path.clone()));
        if let Some(me) = self.me.get().and_then(|w| w.upgrade()) {
            let ctx = SocketCtx {
                bound: Some(name.to_string()),
                role: Role::User,
                extra_uid: None,
                conns: AtomicUsize::new(0),
            };
            me.clone().accept(listener, ctx, true);
            if let (Some(l), Some(a)) = (agent_listener, agent) {
                let ctx = SocketCtx {
                    bound: Some(name.to_string()),
                    role: Role::Agent,
                    extra_uid: a.uid,
                    conns: AtomicUsize::new(0),
                };
                me.accept(l, ctx, true);
            }
        }
        if let Err(e) = control::register_mount(&control::MountRecord {
            mountpoint: mp.to_path_buf(),
            store: self.store_dir.clone(),
            session: name.to_string(),
            socket: Some(ctl_path.clone()),
            agent_socket: agent.map(|a| a.path.clone()),
        }) {
            log::warn!("cannot register mount {}: {e}", mp.display());
        }
        self.mounts.lock().unwrap().insert(
            mp.to_path_buf(),
            Mounted {
                notifier: bg.notifier(),
                session,
                bg: Some(bg),
                ctl_fd,
                ctl_path,
                agent_ctl,
                last_auto_ms: session::now_ms(),
            },
        );
        log::info!(
            "mounted session {name} at {} (open {t_open:?}, fuse mount {:?}, socket+registry {:?})",
            mp.display(),
            t_mount - t_open,
            t0.elapsed() - t_mount
        );
        let mut v = json!({"session": name, "mountpoint": mp});
        if let Some(a) = agent {
            v["agent_socket"] = json!(a.path);
        }
        if let Some(n) = skipped {
            // Sockets and device nodes of the imported directory (see import.rs).
            v["skipped"] = json!(n);
        }
        Ok(v)
    }

    fn sessions(&self) -> Result<Value> {
        let mounted: HashMap<String, (PathBuf, Arc<Session>)> = self
            .mounts
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (v.session.name().to_string(), (k.clone(), v.session.clone())))
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
            list.push(json!({
                "name": r.name,
                "state": if mp.is_some() { "mounted" } else { "stopped" },
                "mountpoint": mp,
                "bytes": bytes,
                "inodes": inodes,
                "live_inodes": live,
                "updated": r.updated,
                "root": r.root,
            }));
        }
        Ok(json!({"sessions": list}))
    }

    /// Run one op. The daemon does not exit while an op runs; once it has decided
    /// to exit, mount requests get `shutting_down` (the client starts a new daemon).
    pub fn handle(&self, op: Op, events: &mut dyn FnMut(Value)) -> Result<Value> {
        self.handle_request(None, op, events)
    }

    /// Run one op, aimed at `session` when given (session sockets bind theirs).
    pub fn handle_request(
        &self,
        session: Option<&str>,
        op: Op,
        events: &mut dyn FnMut(Value),
    ) -> Result<Value> {
        {
            let _m = self.mounts.lock().unwrap();
            if self.stop.load(Ordering::SeqCst) && matches!(op, Op::Mount { .. }) {
                return Err(Error::ShuttingDown);
            }
            self.pending.fetch_add(1, Ordering::SeqCst);
        }
        let r = self.handle_op(session, op, events);
        self.pending.fetch_sub(1, Ordering::SeqCst);
        r
    }

    fn handle_op(
        &self,
        session: Option<&str>,
        op: Op,
        events: &mut dyn FnMut(Value),
    ) -> Result<Value> {
        match op {
            Op::Ping => {
                let mut v = json!({"pid": std::process::id(), "store": self.store_dir});
                // On a session socket: which workspace it serves (an agent's CLI,
                // which cannot read the registry, resolves its paths with it).
                if let Some(name) = session
                    && let Some(mp) = self.mounted_at(name)
                {
                    v["session"] = json!(name);
                    v["mountpoint"] = json!(mp);
                }
                Ok(v)
            }
            Op::Mount {
                session,
                mountpoint,
                from,
                agent_socket,
                agent_uid,
            } => {
                let agent = AgentSocket::from_request(agent_socket, agent_uid)?;
                self.mount(&session, &mountpoint, from.as_deref(), agent, events)
            }
            Op::Umount { mountpoint } => {
                self.unmount(&mountpoint)?;
                let m = self.mounts.lock().unwrap();
                // This request itself is still counted in `pending`.
                let exiting = m.is_empty() && self.pending.load(Ordering::SeqCst) == 1;
                if exiting {
                    self.stop.store(true, Ordering::SeqCst);
                }
                Ok(json!({"mountpoint": mountpoint, "daemon_exiting": exiting}))
            }
            Op::Sessions => self.sessions(),
            Op::Gc { dry_run } => {
                let _m = self.maintenance.try_lock().map_err(|_| {
                    Error::Conflict("a gc or fsck is already running on this store".into())
                })?;
                let mut last = Instant::now();
                let rep = crate::gc::gc(&*self.store, self, dry_run, &mut |phase, done, total| {
                    if last.elapsed() > Duration::from_millis(100) || done == total {
                        last = Instant::now();
                        events(
                            json!({"event": "progress", "phase": phase, "done": done, "total": total}),
                        );
                    }
                })?;
                Ok(json!({ "gc": rep }))
            }
            Op::Fsck { repair } => {
                if repair {
                    return Err(Error::Conflict(format!(
                        "fsck --repair needs the store offline: unmount its {} mounted session(s) first",
                        self.mounts().len()
                    )));
                }
                let _m = self.maintenance.try_lock().map_err(|_| {
                    Error::Conflict("a gc or fsck is already running on this store".into())
                })?;
                let mut last = Instant::now();
                let rep = crate::fsck::fsck(&*self.store, false, &mut |phase, done, total| {
                    if last.elapsed() > Duration::from_millis(100) || done == total {
                        last = Instant::now();
                        events(
                            json!({"event": "progress", "phase": phase, "done": done, "total": total}),
                        );
                    }
                })?;
                Ok(json!({ "fsck": rep, "clean": rep.clean() }))
            }
            Op::SessionRm { name } => {
                if let Some(p) = self.mounted_at(&name) {
                    return Err(Error::Conflict(format!(
                        "session {name} is mounted at {}; unmount it first",
                        p.display()
                    )));
                }
                let _publishing = self.publish.read().unwrap();
                if self.mounted_at(&name).is_some() {
                    return Err(Error::Conflict(format!("session {name} is being mounted")));
                }
                crate::session::remove_record(&*self.store, &name)?;
                Ok(json!({ "removed": name }))
            }
            Op::Shutdown => {
                self.stop.store(true, Ordering::Relaxed);
                Ok(json!({}))
            }
            op => crate::commands::run(self, session, op),
        }
    }

    /// Serve `listener` on its own thread: one thread per connection, at most
    /// [`control::MAX_CONNECTIONS`] at once (the next gets `busy` and is closed).
    /// Session sockets (`stop_on_error`) stop when their listening socket is shut
    /// down at unmount.
    fn accept(self: Arc<Self>, listener: UnixListener, ctx: SocketCtx, stop_on_error: bool) {
        let ctx = Arc::new(ctx);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(mut stream) => {
                        if ctx.conns.fetch_add(1, Ordering::SeqCst) >= control::MAX_CONNECTIONS {
                            ctx.conns.fetch_sub(1, Ordering::SeqCst);
                            let e = Error::Busy(format!(
                                "this socket already serves {} connections; retry later",
                                control::MAX_CONNECTIONS
                            ));
                            log::warn!("control connection refused: {e}");
                            let _ = writeln!(
                                stream,
                                "{}",
                                control::error_response(e.code(), &e.to_string())
                            );
                            continue;
                        }
                        let d = self.clone();
                        let ctx = ctx.clone();
                        std::thread::spawn(move || {
                            d.connection(stream, &ctx);
                            ctx.conns.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                    Err(_) if stop_on_error => break,
                    Err(e) => log::warn!("accept: {e}"),
                }
            }
        });
    }

    fn connection(&self, stream: UnixStream, ctx: &SocketCtx) {
        let _ = stream.set_nonblocking(false);
        let Ok(mut out) = stream.try_clone() else {
            return;
        };
        // Besides the 0600 socket in a 0700 directory: only the user who runs the
        // daemon (who mounted) and root may drive it, and on an agent socket the
        // agent's uid when one was given.
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let peer = match peer_uid(&stream) {
            Some(uid) if uid == me || uid == 0 || Some(uid) == ctx.extra_uid => uid,
            who => {
                log::warn!("control connection from uid {who:?} refused (daemon runs as uid {me})");
                let also = ctx
                    .extra_uid
                    .map(|u| format!(", uid {u}"))
                    .unwrap_or_default();
                let e = Error::Forbidden(format!(
                    "only uid {me} (the mounting user){also} or root may use this socket"
                ));
                let _ = writeln!(out, "{}", control::error_response(e.code(), &e.to_string()));
                return;
            }
        };
        let mut limit = control::RateLimit::new(control::RATE_BURST, control::RATE_PER_SEC);
        let mut reader = BufReader::new(stream);
        loop {
            let mut line = Vec::new();
            let n = match (&mut reader)
                .take(control::MAX_REQUEST as u64 + 1)
                .read_until(b'\n', &mut line)
            {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if n > control::MAX_REQUEST {
                // Too large: answer and drop the connection (the rest is unread).
                let r = control::error_response(
                    "too_large",
                    &format!("request exceeds {} bytes", control::MAX_REQUEST),
                );
                let _ = writeln!(out, "{r}");
                return;
            }
            self.unanswered.fetch_add(1, Ordering::SeqCst);
            let resp = match self.request(ctx, peer, &line, &mut limit, &out) {
                Ok(v) => v,
                Err(e) => control::error_response(e.code(), &e.to_string()),
            };
            let written = writeln!(out, "{resp}").is_ok();
            self.unanswered.fetch_sub(1, Ordering::SeqCst);
            if !written {
                return;
            }
        }
    }

    /// Answer one request line received on a socket described by `ctx`: rate bound,
    /// parse, session binding, role, then the op. Events go to `out`.
    fn request(
        &self,
        ctx: &SocketCtx,
        peer: u32,
        line: &[u8],
        limit: &mut control::RateLimit,
        out: &UnixStream,
    ) -> Result<Value> {
        if !limit.allow() {
            return Err(Error::RateLimited(format!(
                "too many requests: at most {} per second per connection (bursts of {}); retry shortly",
                control::RATE_PER_SEC,
                control::RATE_BURST
            )));
        }
        let req = match control::parse(line.trim_ascii()) {
            Ok(r) => r,
            Err(e) => return Ok(control::error_response(e.code, &e.message)),
        };
        if !ctx.role.allows(&req.op) {
            log::info!(
                "session {}: refused {} on an agent socket",
                ctx.bound.as_deref().unwrap_or("?"),
                req.op.name()
            );
            return Err(ctx.role.refusal(&req.op));
        }
        // An agent of another uid forks only onto a directory it owns: the daemon
        // (often root) must not mount over a directory the agent could not write.
        if let (Role::Agent, Op::Fork { mountpoint, .. }) = (ctx.role, &req.op)
            // SAFETY: geteuid has no preconditions.
            && peer != 0
            && peer != unsafe { libc::geteuid() }
        {
            use std::os::unix::fs::MetadataExt;
            let owned =
                std::fs::symlink_metadata(mountpoint).is_ok_and(|m| m.is_dir() && m.uid() == peer);
            if !owned {
                return Err(Error::Forbidden(format!(
                    "fork on an agent socket: the mountpoint {} must be a directory owned by uid {peer} (the agent)",
                    mountpoint.display()
                )));
            }
        }
        let target = match (&ctx.bound, &req.session) {
            (Some(b), Some(s)) if b != s => {
                return Err(Error::Invalid(format!(
                    "this socket serves session {b}, not {s}"
                )));
            }
            (Some(b), _) => Some(b.clone()),
            (None, s) => s.clone(),
        };
        let is_ping = req.op == Op::Ping;
        let mut ev_out = out.try_clone().ok();
        let mut events = |v: Value| {
            if let Some(o) = ev_out.as_mut() {
                let _ = writeln!(o, "{v}");
            }
        };
        let mut v = self.handle_request(target.as_deref(), req.op, &mut events)?;
        let o = v.as_object_mut().unwrap();
        o.insert("ok".into(), json!(true));
        if is_ping {
            let role = match ctx.role {
                Role::User => "user",
                Role::Agent => "agent",
            };
            o.insert("role".into(), json!(role));
        }
        Ok(v)
    }
}

impl crate::gc::Live for Daemon {
    fn barrier(&self) {
        drop(self.publish.write().unwrap());
        let sessions: Vec<Arc<Session>> =
            self.mounts().values().map(|m| m.session.clone()).collect();
        for s in sessions {
            s.flush_barrier();
        }
    }

    fn live_ids(&self) -> Vec<(String, Vec<crate::id::NodeId>, Vec<crate::id::ChunkId>)> {
        let sessions: Vec<Arc<Session>> =
            self.mounts().values().map(|m| m.session.clone()).collect();
        sessions
            .into_iter()
            .map(|s| {
                let (n, c) = s.live_ids();
                (s.name().to_string(), n, c)
            })
            .collect()
    }
}

fn initial_mounted(d: &Daemon) -> bool {
    !d.mounts.lock().unwrap().is_empty()
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

fn signal_received() -> bool {
    SIGNALLED.load(Ordering::Relaxed)
}

/// Install SIGTERM/SIGINT/SIGHUP handlers that request an orderly shutdown.
pub fn install_signal_handlers() {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Pin glibc's mmap threshold. fuser allocates a 16 MiB read buffer per FUSE
/// session and worker thread with `calloc`; with glibc's dynamic threshold (raised
/// after the first such buffer is freed) later buffers come from the heap and are
/// zeroed page by page, which made every other fork take ~10 ms longer. Served by
/// fresh mmap'd pages they cost nothing until used.
fn pin_mmap_threshold() {
    // SAFETY: mallopt only changes allocator tuning; called before threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Run a daemon for `opts.store` in this process until it is done.
pub fn run(opts: DaemonOptions) -> Result<()> {
    pin_mmap_threshold();
    install_signal_handlers();
    let d = Daemon::start(&opts.store)?;
    d.serve(opts.initial)
}

/// Whether a daemon answers on the socket of `store`.
pub fn ping(store: &Path) -> Option<Value> {
    let sock = control::daemon_socket(store).ok()?;
    let mut c = control::Client::connect(&sock).ok()?;
    c.set_timeout(Some(Duration::from_secs(10)));
    c.call(&Op::Ping, &mut |_| {}).ok()
}
