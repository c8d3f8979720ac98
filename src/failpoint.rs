//! Debug-build failpoints: make one chosen step fail on purpose, so tests can drive
//! the error paths of a real mount (like the `user.treefork.debug-panic` xattr hook
//! in `session::ops`). Release builds compile every check to nothing and ignore the
//! environment.
//!
//! `TREEFORK_DEBUG_FAILPOINT=graft-after:N`, read once by the daemon process: every
//! graft (checkout, restore) fails with an I/O error at its first step after it has
//! queued N kernel invalidations, leaving the live tree partly grafted (what a real
//! I/O error midway does). Used by `tests/it/graftfail.rs`.

use crate::error::Result;

/// The environment variable naming the active failpoint.
pub const ENV: &str = "TREEFORK_DEBUG_FAILPOINT";

/// Called before each graft step with the number of invalidations queued so far;
/// fails once the `graft-after:N` failpoint's N is reached.
#[cfg(debug_assertions)]
pub fn graft_step(queued: usize) -> Result<()> {
    static AFTER: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let after = AFTER.get_or_init(|| {
        let v = std::env::var(ENV).ok()?;
        let n = v.strip_prefix("graft-after:")?.parse().ok()?;
        log::warn!("debug failpoint active: grafts fail after {n} invalidations");
        Some(n)
    });
    match after {
        Some(n) if queued >= *n => Err(crate::error::Error::io(
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
