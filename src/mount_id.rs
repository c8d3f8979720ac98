//! What identifies a mount this process made, as the layers below `fs` name it:
//! its id ([`MountId`], from `statx`; kept in the session registry), the refusal
//! when the path under the mount's parent no longer names that mount
//! ([`NotOurMount`], [`is_not_our_mount`]) and the error a caller reports for a
//! failed syscall on a mount ([`mount_error`]).
//!
//! Owns these names only; the syscalls on a mount (`MountRef`) are
//! `fs::outside`'s, which re-exports them. Invariant: a leaf — imports nothing of
//! this crate but `error`, so `control`, `host` and `ops` can name it.

use std::fmt;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The id of a mount, as `statx` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountId {
    /// The id.
    pub id: u64,
    /// Whether it is `STATX_MNT_ID_UNIQUE` (never reused while the system runs),
    /// not the reusable `STATX_MNT_ID`.
    pub unique: bool,
}

impl fmt::Display for MountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.unique { "unique " } else { "" };
        write!(f, "{kind}mount id {}", self.id)
    }
}

/// The name under a mount's parent directory is no longer the root of that mount
/// (another mount, a plain directory or a symlink is there now): nothing was done.
#[derive(Debug)]
pub struct NotOurMount;

impl fmt::Display for NotOurMount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the path no longer names this mount (something was renamed or replaced); it was left alone")
    }
}

impl std::error::Error for NotOurMount {}

/// Whether `e` is a [`NotOurMount`] refusal.
pub fn is_not_our_mount(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<NotOurMount>())
}

/// The error of a syscall on the mount at `path`: `Error::Conflict` when the path
/// no longer names that mount (nothing was done).
pub fn mount_error(path: &Path, e: io::Error) -> crate::error::Error {
    if is_not_our_mount(&e) {
        crate::error::Error::Conflict(format!(
            "{} no longer names the mount made there (a directory above it was renamed or replaced); it was left alone",
            path.display()
        ))
    } else {
        crate::error::Error::io(path, e)
    }
}
