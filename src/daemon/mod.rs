//! The store daemon: one process per store, serving every mounted session of it.
//!
//! Owns: the store lock, the open store, the mount table, periodic flushing and
//! orderly shutdown (this file: lifecycle, signals, request dispatch). One process
//! per store because sled allows one opener; it also lets every session share one
//! object cache. Submodules:
//! - [`table`]: the mount table, a state machine per session name
//!   (Mounting → Live → Closing → Gone);
//! - [`mounting`]: mounting and unmounting sessions (a mount naming no agent
//!   socket serves the one the session was last mounted with);
//! - `host`: the [`crate::ops::Host`] implementation session ops reach the daemon
//!   through;
//! - [`server`]: control sockets, connections, requests (peer check, role check,
//!   rate bound, connection cap);
//! - `agent_socket`: agent socket files, bound and removed through a checked
//!   descriptor of their directory;
//! - [`mountpoint`]: where a mount may go (resolved once, checked on its descriptor);
//! - [`maintenance`]: store-wide gc, fsck and session removal;
//! - [`offline`]: the store verbs served without a daemon (by the CLI, in its own
//!   process under the store lock), through the same verb table.
//!
//! Lifecycle: the CLI starts the daemon on first mount (or runs it in the foreground);
//! the daemon exits when its last mount goes away (umount request, external
//! `umount`, SIGTERM/SIGINT), flushing every session first.

mod acceptor;
mod agent_socket;
mod fds;
mod host;
pub mod maintenance;
pub mod mounting;
pub mod mountpoint;
pub mod offline;
pub mod server;
mod serving;
pub mod sweep;
pub mod table;
mod transport;
mod verbs;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use mountpoint::{detach, detach_dead, is_mountpoint};

use crate::control::{self, MountFor, Role};
use crate::error::{Error, Result};
use crate::lock::StoreLock;
use crate::store::PackStore;
use crate::verbs::Request;
use server::SocketCtx;
use table::MountTable;

/// How often dirty sessions are flushed in the background.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(5);

/// A running daemon.
pub struct Daemon {
    store_dir: PathBuf,
    store: Arc<PackStore>,
    table: MountTable,
    socket: PathBuf,
    me: std::sync::OnceLock<std::sync::Weak<Daemon>>,
    /// The one acceptor of every mount's sockets (started with the first mount).
    acceptor: std::sync::OnceLock<Arc<acceptor::Acceptor>>,
    stop: AtomicBool,
    /// Requests in progress (the daemon does not exit while one runs).
    pending: AtomicUsize,
    /// Requests read from a control connection whose response is not written yet;
    /// the daemon waits for them before exiting (an `umount` that ends the daemon
    /// must still get its answer).
    unanswered: AtomicUsize,
    /// Held shared while a session is being created or mounted (its puts are not
    /// yet reachable from a mounted session's table or a committed record); a gc
    /// takes it exclusively once, as part of its barrier.
    publish: std::sync::RwLock<()>,
    /// Serializes gc and fsck.
    maintenance: Mutex<()>,
    /// Held while a branch name is checked and written (store-wide name creation).
    names: Mutex<()>,
    /// Descriptors reserved by mounts being made ([`fds`]).
    fds: fds::Reserved,
    /// Access clock and eviction sweeps ([`sweep`]).
    upkeep: sweep::Upkeep,
    _lock: StoreLock,
}

/// Options of the daemon process.
pub struct DaemonOptions {
    /// Store directory (absolute).
    pub store: PathBuf,
    /// Mount to perform before serving (foreground mode).
    pub initial: Option<Request>,
    /// Create the store when there is none (only `mount` may: a mistyped `--store`
    /// must not become an empty store that reports "clean").
    pub create: bool,
}

/// Refuse a directory that holds no store (nothing of it is created).
pub fn require_store(dir: &Path) -> Result<()> {
    if dir.join(crate::store::STORE_FILE).exists() {
        return Ok(());
    }
    Err(Error::NotFound(format!(
        "there is no treefork store at {} (only `mount` creates one)",
        dir.display()
    )))
}

impl Daemon {
    /// Take the store lock, open the store (creating it only when `create`) and
    /// name the control socket.
    pub fn start(store_dir: &Path, create: bool) -> Result<Arc<Daemon>> {
        if !create {
            require_store(store_dir)?;
        }
        let lock = StoreLock::acquire(store_dir)?;
        let store = Arc::new(PackStore::open(store_dir)?);
        // Pack read descriptors: at most an eighth of the limit (mounts need the rest).
        if let Ok(limit) = crate::fdlimit::limit() {
            let n = (limit / 8).min(crate::store::fds::DEFAULT_CAPACITY as u64);
            store.limit_pack_fds(n as usize);
        }
        // The memory budgets the store's limits set (a bad record: the defaults).
        match crate::quota::load(&*store) {
            Ok(l) => crate::quota::apply_memory(&*store, &l),
            Err(e) => log::warn!("store limits unreadable ({e}); memory budgets from the machine"),
        }
        let socket = control::daemon_socket(store_dir)?;
        // We hold the store lock, so any socket file left here is stale.
        let _ = std::fs::remove_file(&socket);
        let d = Arc::new(Daemon {
            me: std::sync::OnceLock::new(),
            acceptor: std::sync::OnceLock::new(),
            store_dir: store_dir.to_path_buf(),
            store,
            table: MountTable::default(),
            socket,
            stop: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            unanswered: AtomicUsize::new(0),
            publish: std::sync::RwLock::new(()),
            maintenance: Mutex::new(()),
            names: Mutex::new(()),
            fds: fds::Reserved::default(),
            upkeep: sweep::Upkeep::default(),
            _lock: lock,
        });
        let _ = d.me.set(Arc::downgrade(&d));
        // Lazy hydration from the configured remotes (none: no fallback).
        let objects: Arc<dyn crate::store::ObjectStore> = d.store.clone();
        if let Err(e) = crate::remote::lazy::install(&objects) {
            log::warn!("remotes not used for lazy reads: {e}");
        }
        Ok(d)
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<PackStore> {
        &self.store
    }

    /// Serve until the last mount is gone or a stop is requested.
    pub fn serve(self: &Arc<Self>, initial: Option<Request>) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let listener = std::os::unix::net::UnixListener::bind(&self.socket)
            .map_err(|e| Error::io(&self.socket, e))?;
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
        let store_socket = self.clone().accept(listener, ctx, false);
        self.service_loop();
        self.shutdown();
        let _ = std::fs::remove_file(&self.socket);
        crate::failpoint::daemon_exit_delay();
        // A client that connected before the socket file went is served, not cut
        // off: wait (at most 5 s) until every connection on the store socket is
        // closed by its client (a CLI closes after its answer), not only until the
        // requests read so far are answered: a request already sent but not yet
        // read would otherwise meet EOF. The short grace first lets the accept
        // thread take the connections still in the listener's backlog.
        std::thread::sleep(Duration::from_millis(20));
        let t = Instant::now();
        while (self.unanswered.load(Ordering::SeqCst) > 0
            || store_socket.conns.load(Ordering::SeqCst) > 0)
            && t.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        log::info!("daemon {} exiting", std::process::id());
        Ok(())
    }

    /// Reap, flush and checkpoint periodically until it is time to exit.
    fn service_loop(&self) {
        let started = Instant::now();
        let mut last_flush = Instant::now();
        let mut ever_mounted = !self.table.is_empty();
        while !self.stop.load(Ordering::Relaxed) && !signal_received() {
            std::thread::sleep(Duration::from_millis(50));
            self.reap();
            {
                let m = self.table.lock();
                ever_mounted |= !m.is_empty();
                let idle = m.is_empty() && self.pending.load(Ordering::SeqCst) == 0;
                if idle && (ever_mounted || started.elapsed() > Duration::from_secs(30)) {
                    // Decided under the table lock: a mount request arriving now sees
                    // `stop` and is told to retry with a new daemon.
                    self.stop.store(true, Ordering::SeqCst);
                    break;
                }
            }
            if last_flush.elapsed() >= FLUSH_INTERVAL {
                self.flush_all();
                last_flush = Instant::now();
            }
            crate::ops::auto_checkpoints(self);
            self.upkeep_tick();
        }
    }

    fn flush_all(&self) {
        for t in crate::ops::Host::live(self) {
            if let Err(e) = t.session.flush_idle() {
                log::error!("session {}: background flush failed: {e}", t.session.name());
            }
        }
    }

    /// Run one op as the user. The daemon does not exit while an op runs; once it
    /// has decided to exit, mount requests get `shutting_down` (the client starts a
    /// new daemon).
    pub fn handle(&self, op: Request, events: &mut dyn FnMut(Value)) -> Result<Value> {
        let me = crate::oplog::Actor::peer("user", unsafe_euid(), std::process::id());
        self.handle_request(MountFor::User, &me, None, None, op, events)
    }

    /// Run one op for `who`, aimed at `session` when given (session sockets bind
    /// theirs).
    pub fn handle_request(
        &self,
        who: MountFor,
        actor: &crate::oplog::Actor,
        explanation: Option<&str>,
        session: Option<&str>,
        op: Request,
        events: &mut dyn FnMut(Value),
    ) -> Result<Value> {
        {
            let _m = self.table.lock();
            if self.stop.load(Ordering::SeqCst) && matches!(op, Request::Mount(_)) {
                return Err(Error::ShuttingDown);
            }
            self.pending.fetch_add(1, Ordering::SeqCst);
        }
        let r = self.handle_op(who, actor, explanation, session, op, events);
        self.pending.fetch_sub(1, Ordering::SeqCst);
        r
    }

    fn handle_op(
        &self,
        who: MountFor,
        actor: &crate::oplog::Actor,
        explanation: Option<&str>,
        session: Option<&str>,
        op: Request,
        events: &mut dyn FnMut(Value),
    ) -> Result<Value> {
        crate::verbs::run(self, who, actor, explanation, session, op, events)
    }
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
    // First, before any thread: what the daemon inherited (descriptors without
    // close-on-exec, credentials in its environment) reaches no child.
    crate::child::seal_inherited_descriptors();
    crate::remote::creds::hold_from_environment();
    pin_mmap_threshold();
    // Every mount costs descriptors (`mounting::fd_need`): all the hard limit
    // allows, before any thread.
    match crate::fdlimit::raise() {
        Ok((was, now)) if was != now => log::info!("descriptor limit raised from {was} to {now}"),
        Ok(_) => {}
        Err(e) => log::warn!("descriptor limit not raised: {e}"),
    }
    install_signal_handlers();
    let d = Daemon::start(&opts.store, opts.create)?;
    d.serve(opts.initial)
}

/// Whether a daemon answers on the socket of `store`.
pub fn ping(store: &Path) -> Option<Value> {
    let sock = control::daemon_socket(store).ok()?;
    let mut c = control::Client::connect(&sock).ok()?;
    c.set_timeout(Some(Duration::from_secs(10)));
    c.call(&Request::Ping(crate::verbs::Ping {}), &mut |_| {})
        .ok()
}

fn unsafe_euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}
