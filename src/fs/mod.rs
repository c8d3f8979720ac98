//! The filesystem's operations, transport-neutral: [`TreeforkFs`], the core both
//! kernel channels serve (the /dev/fuse adapter, `dev.rs`, and FUSE over io_uring).
//!
//! Every operation is an inherent method taking the caller ([`request::Req`]) and
//! plain parsed arguments and returning its answer (`Result<_, Error>`); it calls
//! `Session` methods, and errors become errnos in the transport through
//! `Error::errno` (the single mapping). No fuser type appears in the core: the
//! types it takes
//! and answers live in `request.rs`; the encoding of an answer is each transport's
//! job. `tests.rs` drives the core without a mount.
//!
//! Layout: this file holds [`TreeforkFs`] (the session, the INIT facts a transport
//! negotiated, the notes before a change), `destroy` and the panic guard. The
//! operations live in the file of their concern: `namespace.rs` (names and
//! attributes), `data.rs` (file contents and open files), `dir.rs` (listings) and
//! `misc.rs` (extended attributes, statfs, ioctl). `devpool/` serves every mount's
//! /dev/fuse connection from one pool of threads through the ring's dispatcher
//! (`ring::dispatch`), and answers INIT. `dev.rs` is the older per-mount adapter
//! (fuser's `Filesystem` over the core, kept behind `TREEFORK_FUSE_SERVER=fuser` for
//! comparison) and the only file naming fuser's reply types; `convert.rs` holds its
//! conversions between fuser's types and the session's.
//! `kernel.rs` (invalidations, epochs; [`KernelMount`], the daemon's
//! `host::Mount`) and `outside.rs` (the mount from outside)
//! keep their own fuser and syscall use.
//!
//! Panics: every operation (but `ioctl`, which only refuses) runs under
//! `catch_unwind` ([`guarded!`]). A panic (a bug) is logged with the request and its
//! arguments and answered EIO (the operation returns `Err(EIO)`); the session's locks
//! survive poisoning (`Session::lock` repairs the table), so the mount keeps
//! serving. Debug builds panic on purpose on `setxattr` of
//! [`crate::session::posix::DEBUG_PANIC_XATTR`] (tests only).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::Error;
use crate::session::Session;

/// How long the kernel may cache attributes, entries and negative entries. Every
/// change to a session goes through this mount's kernel requests, except checkout
/// and restore, which invalidate what they change explicitly (entries, including
/// names they create, and inodes); so the kernel can answer `stat`, `lookup` and
/// misses from its caches for long (what makes `git status`, `find` and builds run
/// at native speed when warm). An hour: with 60 s, a tree read a minute after it
/// was written paid a LOOKUP per path again (`grep -r` warm ran 4.6x native).
pub const TTL: Duration = Duration::from_secs(3600);

/// The filesystem of one mounted session: the core every transport serves, shared
/// by their threads (`Arc<TreeforkFs>`, from [`TreeforkFs::new`]).
pub struct TreeforkFs {
    session: Arc<Session>,
    /// Set once the mount exists; used to drop the kernel's cached attributes when
    /// they go stale without a request the kernel would see (allocation after fsync).
    notifier: Arc<std::sync::OnceLock<KernelCache>>,
    /// The kernel supports FUSE_NO_OPEN_SUPPORT: `open` answers ENOSYS once and the
    /// kernel stops sending OPEN/RELEASE for files (two round trips per open(2)).
    /// Set by INIT ([`TreeforkFs::negotiated`]).
    no_open: AtomicBool,
    /// The kernel supports FUSE_NO_OPENDIR_SUPPORT: likewise for directories; it
    /// then caches listings by default (FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE).
    no_opendir: AtomicBool,
    /// The kernel accepted FUSE_OVER_IO_URING (only when the adapter offered it).
    over_io_uring: AtomicBool,
}

/// What INIT settled that the operations depend on (see [`TreeforkFs::negotiated`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// FUSE_NO_OPEN_SUPPORT: `open` answers ENOSYS.
    pub no_open: bool,
    /// FUSE_NO_OPENDIR_SUPPORT: `opendir` answers ENOSYS.
    pub no_opendir: bool,
    /// FUSE_OVER_IO_URING.
    pub over_io_uring: bool,
}

/// What a mutating request is about to change, noted before it runs.
pub(crate) enum Changing<'a> {
    /// An inode's content or attributes.
    Ino(u64),
    /// A name in a directory (created or removed).
    Name(u64, &'a [u8]),
}

impl TreeforkFs {
    /// Serve `session`; `notifier` is filled in by the caller after mounting. Shared
    /// by the transports: give a clone to each ([`DevFs::new`] for /dev/fuse).
    pub fn new(
        session: Arc<Session>,
        notifier: Arc<std::sync::OnceLock<KernelCache>>,
    ) -> Arc<Self> {
        Arc::new(TreeforkFs {
            session,
            notifier,
            no_open: AtomicBool::new(false),
            no_opendir: AtomicBool::new(false),
            over_io_uring: AtomicBool::new(false),
        })
    }

    /// Record what INIT settled (the /dev/fuse adapter's `init`, before any other
    /// request is served).
    pub(crate) fn negotiated(&self, n: Negotiated) {
        self.no_open.store(n.no_open, Ordering::Relaxed);
        self.no_opendir.store(n.no_opendir, Ordering::Relaxed);
        self.over_io_uring.store(n.over_io_uring, Ordering::Relaxed);
    }

    /// What INIT settled (all false before INIT).
    pub(crate) fn negotiation(&self) -> Negotiated {
        Negotiated {
            no_open: self.no_open.load(Ordering::Relaxed),
            no_opendir: self.no_opendir.load(Ordering::Relaxed),
            over_io_uring: self.over_io_uring.load(Ordering::Relaxed),
        }
    }

    /// Whether a request may wait on the network: the store has a remote to fetch
    /// objects it misses from (lazy hydration, `remote::lazy`), so reading any tree
    /// node or block may be a round trip to it. The ring then serves no request on
    /// its own threads (`ring::dispatch`).
    pub(crate) fn may_fetch_remotely(&self) -> bool {
        self.session.store().fallback().is_some()
    }

    /// Before a mutating request: its pid for the exec writer watch (free unless a
    /// recorded command runs) and the path for the touched-file set.
    pub(crate) fn changing(&self, pid: u32, what: Changing<'_>) {
        self.session.watch.note(pid);
        match what {
            Changing::Ino(ino) => self.session.touch_ino(ino),
            Changing::Name(parent, name) => self.session.touch_name(parent, name),
        }
    }

    /// Drop the kernel's cached attributes of `ino` after the daemon changed them
    /// on its own (a negative offset touches no page-cache locks: safe inside a
    /// request).
    fn inval_attr(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_range(ino, -1, 0);
        }
    }
}

/// Run an operation's body (a block evaluating to `Result<T, Error>`), catching a
/// panic: log it with the request (`op` and the listed arguments, each `name` or
/// `name = shown`) and answer `Err(EIO)`.
macro_rules! guarded {
    ($self:ident, $op:literal, [$($arg:ident $(= $show:expr)?),*], $body:block) => {
        $self.guarded(
            $op,
            || format!(
                concat!($(stringify!($arg), "={:?} ",)*),
                $(guarded!(@show $arg $(= $show)?)),*
            ),
            || $body,
        )
    };
    (@show $arg:ident) => { $arg };
    (@show $arg:ident = $show:expr) => { $show };
}

/// A name as the panic log shows it (like an `OsStr`).
fn show(name: &[u8]) -> &std::ffi::OsStr {
    std::os::unix::ffi::OsStrExt::from_bytes(name)
}

impl TreeforkFs {
    fn guarded<T>(
        &self,
        op: &str,
        args: impl FnOnce() -> String,
        body: impl FnOnce() -> Result<T, Error>,
    ) -> Result<T, Error> {
        // The kernel's own cache trimming is no access.
        if !op.ends_with("forget") {
            self.session.note_access();
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
            Ok(r) => r,
            Err(p) => {
                let why = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(non-text panic)".into());
                log::error!(
                    "session {}: {op} {}panicked: {why}; answered EIO, the mount keeps serving",
                    self.session.name(),
                    args()
                );
                Err(Error::Posix(libc::EIO))
            }
        }
    }
}

impl TreeforkFs {
    /// Whether a WRITE served now would first wait for a seal (the pool parks
    /// such writes beyond a share of its workers; see `devpool::park`).
    pub(crate) fn write_would_wait(&self) -> bool {
        self.session.write_would_wait()
    }

    /// The connection ends (unmount or abort): flush what is pending.
    pub(crate) fn destroy(&self) {
        let _ = guarded!(self, "destroy", [], {
            if let Err(e) = self.session.flush() {
                log::error!("session {}: final flush failed: {e}", self.session.name());
            }
            Ok(())
        });
    }
}

// After the guard macro: textual scoping makes it visible to these modules.
mod convert;
mod data;
mod dev;
pub(crate) mod devpool;
mod dir;
mod kernel;
mod misc;
mod namespace;
pub mod outside;
pub(crate) mod request;
pub mod ring;
#[cfg(test)]
mod tests;

pub use dev::DevFs;
pub use kernel::{KernelCache, KernelMount};
