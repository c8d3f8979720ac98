//! The process's descriptor limit (`RLIMIT_NOFILE`): the daemon raises its soft
//! limit to the hard one once at start ([`raise`]); what it was started with is
//! given back to every child between fork and exec ([`restore_in_child`]: a
//! program using `select(2)` breaks on descriptors above 1024); and how many
//! descriptors are free now ([`free`]), which the daemon checks before it makes
//! anything a mount needs.
//!
//! Invariants: [`raise`] runs before any thread starts (the daemon's start) and
//! at most once; [`restore_in_child`] is async-signal-safe and does nothing when
//! nothing was raised.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The soft limit the process was started with, when [`raise`] changed it
/// (`u64::MAX`: not raised).
static STARTED_WITH: AtomicU64 = AtomicU64::new(u64::MAX);

fn get() -> Result<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(Error::io(
            "getrlimit(RLIMIT_NOFILE)",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(r)
}

/// Raise the soft descriptor limit to the hard limit; returns the soft limit
/// before and after. A failure leaves the limit as it was (and is returned).
pub fn raise() -> Result<(u64, u64)> {
    let r = get()?;
    if r.rlim_cur >= r.rlim_max {
        return Ok((r.rlim_cur, r.rlim_cur));
    }
    let up = libc::rlimit {
        rlim_cur: r.rlim_max,
        rlim_max: r.rlim_max,
    };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &up) } != 0 {
        return Err(Error::io(
            "setrlimit(RLIMIT_NOFILE)",
            std::io::Error::last_os_error(),
        ));
    }
    STARTED_WITH.store(r.rlim_cur, Ordering::Relaxed);
    Ok((r.rlim_cur, r.rlim_max))
}

/// Between fork and exec: give the child the soft limit the daemon was started
/// with. Async-signal-safe (one atomic load, getrlimit, setrlimit).
pub fn restore_in_child() {
    let was = STARTED_WITH.load(Ordering::Relaxed);
    if was == u64::MAX {
        return;
    }
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on structs we own; both async-signal-safe.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
            r.rlim_cur = was.min(r.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// The soft limit now.
pub fn limit() -> Result<u64> {
    Ok(get()?.rlim_cur)
}

/// Descriptors this process has open now (`/proc/self/fd`, less the one
/// reading it).
pub fn open_now() -> Result<u64> {
    let it = std::fs::read_dir("/proc/self/fd").map_err(|e| Error::io("/proc/self/fd", e))?;
    Ok((it.count() as u64).saturating_sub(1))
}

/// What is open now and the limit: `(open, limit)`.
pub fn usage() -> Result<(u64, u64)> {
    Ok((open_now()?, limit()?))
}
