//! What serves a mount's /dev/fuse connection: the process's shared pool
//! (`fs::devpool`, the default: threads bounded by the machine, not by the number
//! of mounts), or, with `TREEFORK_FUSE_SERVER=fuser`, a fuser session of its own
//! with 4 threads (the server before issue 42; a measurement knob the scale bench
//! compares against).
//!
//! Invariant: INIT is answered before [`serve`] returns (by the pool's handshake,
//! or inside fuser's `Session::from_fd`), so what it settled is in the core when the
//! caller decides about the ring.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::fs::{DevFs, TreeforkFs, devpool};

/// How long a new connection's INIT may take to arrive.
const INIT_WAIT: Duration = Duration::from_secs(30);

/// A mount's /dev/fuse server.
pub(crate) enum Server {
    Pool(devpool::Served),
    Fuser(fuser::BackgroundSession),
}

impl Server {
    /// Whether the connection ended and nothing of it is being served any more.
    pub(crate) fn is_finished(&self) -> bool {
        match self {
            Server::Pool(s) => s.is_finished(),
            Server::Fuser(b) => b.guard.is_finished(),
        }
    }
}

/// Whether mounts get a fuser session of their own (`TREEFORK_FUSE_SERVER=fuser`).
fn own_session() -> bool {
    std::env::var("TREEFORK_FUSE_SERVER").is_ok_and(|v| v == "fuser")
}

/// Answer INIT on the new connection `dev` and serve it with `core`.
pub(crate) fn serve(
    name: &str,
    dev: OwnedFd,
    core: &Arc<TreeforkFs>,
    offer_io_uring: bool,
) -> Result<Server> {
    if own_session() {
        let mut cfg = fuser::Config::default();
        // 4 threads: measured per-request latency (access(2) of a missing name, one
        // LOOKUP) ~100 us with 1 thread, 35-40 us with 2, 4 or 8 on this 2-core VM.
        cfg.n_threads = Some(4);
        cfg.clone_fd = true;
        let fs = DevFs::new(core.clone()).offer_io_uring(offer_io_uring);
        return fuser::Session::from_fd(fs, dev, fuser::SessionACL::All, cfg)
            .and_then(fuser::Session::spawn)
            .map(Server::Fuser)
            .map_err(|e| Error::io("/dev/fuse", e));
    }
    devpool::wire::handshake(dev.as_fd(), core, offer_io_uring, INIT_WAIT)?;
    log::info!("session {name} serving");
    let pool = devpool::pool().map_err(|e| Error::io("/dev/fuse pool", e))?;
    pool.serve(name, dev, core.clone())
        .map(Server::Pool)
        .map_err(|e| Error::io("/dev/fuse", e))
}

/// Wait for the server of session `name` to end, up to `wait`; else report it and
/// leave it serving (it ends when its mount is finally released).
pub(crate) fn join_bounded(name: &str, server: Server, wait: Duration) {
    let ended = match &server {
        Server::Pool(s) => s.wait(wait),
        Server::Fuser(bg) => {
            let t = Instant::now();
            while !bg.guard.is_finished() && t.elapsed() < wait {
                std::thread::sleep(Duration::from_millis(5));
            }
            bg.guard.is_finished()
        }
    };
    if !ended {
        log::error!(
            "session {name}: its FUSE connection did not end within {wait:?} of the unmount (the mount is still referenced); left serving"
        );
        return;
    }
    if let Server::Fuser(bg) = server
        && let Err(e) = bg.join()
    {
        log::error!("session {name}: FUSE loop ended with an error: {e}");
    }
}
