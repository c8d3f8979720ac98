//! Debug-build failpoints: make one chosen step fail on purpose, so tests can drive
//! the error paths of a real mount (like the `user.treefork.debug-panic` xattr hook
//! in `session::posix`). Release builds compile every check to nothing and ignore the
//! environment.
//!
//! `TREEFORK_DEBUG_FAILPOINT=graft-after:N`, read once by the daemon process: every
//! graft (checkout, restore) fails with an I/O error at its first step after it has
//! queued N kernel invalidations, leaving the live tree partly grafted (what a real
//! I/O error midway does). Used by `tests/it/graftfail.rs`.
//!
//! `TREEFORK_DEBUG_FAILPOINT=inval-delay-ms:N`: checkout and restore wait N ms after
//! the tree swap before sending the kernel its invalidations, widening the window in
//! which the kernel still reaches replaced inodes through cached entries (see
//! `Session::open_handle`: such opens answer ESTALE). Used by `tests/it/stale.rs`.
//!
//! `TREEFORK_DEBUG_FAILPOINT=message-writer-delay-ms:N`: the message writer waits N
//! ms before each batch, so appends fill its queue. Used by `tests/it/messages.rs`.
//!
//! `TREEFORK_DEBUG_FAILPOINT=fuse-write-delay-ms:N`: every FUSE write request waits
//! N ms before it is served, so a test can kill the daemon while the kernel's
//! writeback (a checkpoint's `syncfs`) waits on it. Used by `tests/it/selfwait.rs`.
//!
//! `TREEFORK_DEBUG_FAILPOINT=op-record-delay-ms:N`: an operation (checkout,
//! restore, fork, ...) waits N ms with its tree swapped and its batch built, just
//! before the batch (state change and operation record) is committed, so a test
//! can run a gc in between. Used by `tests/it/gcrace.rs`.
//!
//! `TREEFORK_DEBUG_FAILPOINT=txn-kill-KIND:N`: the daemon SIGKILLs itself at step N
//! of every operation of kind KIND (`checkout`, `restore`, `branch`, `undo`,
//! `adopt`, ...; the steps are `ops::txn::Step`). Used by `tests/it/txn.rs`.
//!
//! `TREEFORK_DEBUG_FAILPOINT=daemon-exit-delay-ms:N`: an exiting daemon waits N ms
//! after removing its socket, still holding the store lock (the window a client
//! must wait out). Used by `tests/it/eviction.rs`.

use crate::error::Result;

/// The environment variable naming the active failpoint.
pub const ENV: &str = "TREEFORK_DEBUG_FAILPOINT";

/// The number of the active failpoint `name:N`, read once per process.
#[cfg(debug_assertions)]
fn armed(name: &str) -> Option<usize> {
    static SPEC: std::sync::OnceLock<Option<(String, usize)>> = std::sync::OnceLock::new();
    let spec = SPEC.get_or_init(|| {
        let v = std::env::var(ENV).ok()?;
        let (name, n) = v.split_once(':')?;
        let n = n.parse().ok()?;
        log::warn!("debug failpoint active: {name}:{n}");
        Some((name.to_string(), n))
    });
    spec.as_ref().filter(|(n, _)| n == name).map(|(_, v)| *v)
}

/// Debug builds: sleep N ms when the failpoint `name:N` is armed.
#[cfg(debug_assertions)]
fn delay(name: &str) {
    if let Some(ms) = armed(name) {
        std::thread::sleep(std::time::Duration::from_millis(ms as u64));
    }
}

/// Release builds: no failpoints.
#[cfg(not(debug_assertions))]
#[inline(always)]
fn delay(_name: &str) {}

/// Before checkout and restore send their invalidations: the `inval-delay-ms:N`
/// failpoint sleeps N ms.
#[inline(always)]
pub fn before_invalidations() {
    delay("inval-delay-ms")
}

/// Called before each graft step with the number of invalidations queued so far;
/// fails once the `graft-after:N` failpoint's N is reached.
#[cfg(debug_assertions)]
pub fn graft_step(queued: usize) -> Result<()> {
    let after = armed("graft-after");
    match after {
        Some(n) if queued >= n => Err(crate::error::Error::io(
            "graft",
            std::io::Error::other(format!("debug failpoint {ENV}=graft-after:{n}")),
        )),
        _ => Ok(()),
    }
}

/// Release builds: no failpoints.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn graft_step(_queued: usize) -> Result<()> {
    Ok(())
}

/// Before the message writer writes a batch: the `message-writer-delay-ms:N`
/// failpoint sleeps N ms (so a test can fill the queue; see `messages::writer`).
#[inline(always)]
pub fn message_writer_delay() {
    delay("message-writer-delay-ms")
}

/// Before a FUSE write request is served: the `fuse-write-delay-ms:N` failpoint
/// sleeps N ms.
#[inline(always)]
pub fn fuse_write_delay() {
    delay("fuse-write-delay-ms")
}

/// Before an operation's batch is committed: the `op-record-delay-ms:N` failpoint
/// sleeps N ms.
#[inline(always)]
pub fn op_record_delay() {
    delay("op-record-delay-ms")
}

/// After an exiting daemon removed its socket: the `daemon-exit-delay-ms:N`
/// failpoint sleeps N ms.
#[inline(always)]
pub fn daemon_exit_delay() {
    delay("daemon-exit-delay-ms")
}

/// `TREEFORK_DEBUG_FAILPOINT=push-slow-packs:N`: a push rotates its packs at N
/// KiB (instead of 32 MiB) and pauses [`PUSH_PACK_DELAY_MS`] after each, so a
/// test can kill the server mid-push (`tests/it/remote/push.rs`). The pack size:
#[cfg(debug_assertions)]
pub fn push_pack_kib() -> Option<u64> {
    armed("push-slow-packs").map(|n| n as u64)
}

/// Release builds: no failpoints.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn push_pack_kib() -> Option<u64> {
    None
}

/// The pause after each pack under `push-slow-packs`.
pub const PUSH_PACK_DELAY_MS: u64 = 150;

/// The pause after each uploaded pack (see [`push_pack_kib`]).
pub fn push_pack_delay_ms() -> Option<u64> {
    push_pack_kib().map(|_| PUSH_PACK_DELAY_MS)
}

/// Step `step` of an operation of kind `kind`: the `txn-kill-KIND:N` failpoint
/// kills the process (SIGKILL, as `kill -9` does) at step N.
#[cfg(debug_assertions)]
pub fn txn_step(kind: &str, step: usize) {
    if armed(&format!("txn-kill-{kind}")) == Some(step) {
        log::warn!("debug failpoint: killing the daemon at step {step} of {kind}");
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

/// Release builds: no failpoints.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn txn_step(_kind: &str, _step: usize) {}
