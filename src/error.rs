//! Error types and the single mapping from errors to errno.
//!
//! Policy: library code returns [`Error`]; `anyhow` is used only by the binary.
//! FUSE handlers turn an `Error` into an errno with [`Error::errno`] and nowhere else.
//! Whenever that answer is `EIO`, the cause is logged there, so no EIO goes unexplained;
//! other store I/O errors (ENOSPC, EDQUOT, ...) are logged as warnings and keep their
//! errno.

use std::io;
use std::path::PathBuf;

/// Result alias used throughout the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure the library can report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A POSIX-level refusal of a filesystem operation (ENOENT, EEXIST, ...).
    #[error("{}", errno_name(*.0))]
    Posix(i32),
    /// An I/O error on a file of the store (pack, lock, ...).
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The underlying error; its errno reaches the FUSE caller (ENOSPC stays ENOSPC).
        #[source]
        source: io::Error,
    },
    /// The filesystem holding the store is down to its free-space reserve
    /// (`crate::store::space`): what needed the space was refused, nothing
    /// acknowledged was lost. Names the remedy.
    #[error(
        "No space left on device ({} KiB free on {}; the store keeps {} KiB free for its index and for recovery){}: delete files in the workspace (or free space on that disk), then run `treefork gc`",
        avail >> 10, path.display(), reserve >> 10, doing
    )]
    StoreFull {
        /// The store directory.
        path: PathBuf,
        /// Bytes free when refused.
        avail: u64,
        /// Bytes the store keeps free.
        reserve: u64,
        /// What was refused, as a clause (`"; unmount refused: ..."`), or empty.
        doing: String,
    },
    /// The metadata database (sled) failed.
    #[error("metadata database error: {0}")]
    Meta(#[from] sled::Error),
    /// Stored bytes failed verification or did not decode.
    #[error("corrupt {what}: {reason}")]
    Corrupt {
        /// What was being read (object id, record, pack).
        what: String,
        /// Why it was rejected.
        reason: String,
    },
    /// An object is larger than a pack record can hold (refused, never written).
    #[error("{what} of {len} bytes is larger than the store's limit of {max} bytes")]
    ObjectTooLarge {
        /// What was being stored.
        what: String,
        /// Its length.
        len: u64,
        /// The largest length accepted.
        max: u64,
    },
    /// An object referenced by the tree is absent from the store.
    #[error("missing object {0} (not in the store index)")]
    Missing(String),
    /// The store is held by another live daemon.
    #[error("store {} is in use by another treefork daemon{}", path.display(), pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Locked {
        /// The store directory.
        path: PathBuf,
        /// The pid recorded by the holder, when known.
        pid: Option<u32>,
    },
    /// Bad input from a user or client (names the problem).
    #[error("{0}")]
    Invalid(String),
    /// A named thing does not exist (session, ref, mount).
    #[error("{0}")]
    NotFound(String),
    /// A request conflicts with current state (already mounted, busy, exists).
    #[error("{0}")]
    Conflict(String),
    /// The daemon is exiting; the client should start a new one and retry.
    #[error("the daemon is shutting down")]
    ShuttingDown,
    /// The caller's role does not allow the request (agent sockets, other uids).
    #[error("{0}")]
    Forbidden(String),
    /// The connection sent requests faster than its rate bound; retry shortly.
    #[error("{0}")]
    RateLimited(String),
    /// The socket serves as many connections as it allows; retry later.
    #[error("{0}")]
    Busy(String),
    /// A remote could not be used: unreachable, refused the request, or answered
    /// something unexpected (names the remote and what was being done).
    #[error("remote {remote}: {detail}")]
    Remote {
        /// The remote's name.
        remote: String,
        /// What failed and why (never credentials).
        detail: String,
    },
    /// A push would lose what a remote ref holds (it moved since it was last
    /// seen, or is not an ancestor); nothing was changed. `--force` overrides.
    #[error("{0}")]
    NonFastForward(String),
    /// A limit of the store's quotas (`crate::quota`) would be exceeded; nothing
    /// was changed. The user raises it with `treefork limits KEY=VALUE`.
    #[error(
        "quota {what} exceeded: {detail} (limit {limit}; the user can raise it with `treefork limits {what}=N`)"
    )]
    Quota {
        /// Which limit (its setting name, e.g. `message_bytes`).
        what: &'static str,
        /// The limit.
        limit: u64,
        /// What the request would have reached, in words.
        detail: String,
    },
    /// A mount asked for FUSE over io_uring (`--transport uring`) and cannot have
    /// it (the reason says why and how to allow it); nothing was left mounted.
    #[error("{0}")]
    RingUnavailable(crate::transport::RingUnavailable),
    /// `promote`: chosen paths changed in the durable repository since the
    /// session's baseline (nothing was written).
    #[error("{}", baseline_conflict_message(paths))]
    BaselineConflict {
        /// Each chosen path that overlaps a drifted one, and how it drifted.
        paths: Vec<DriftedPath>,
    },
}

/// How a path of the durable repository changed since a session's baseline.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Drift {
    /// By commits on the durable branch after the baseline.
    Committed,
    /// In the durable index (staged, not committed).
    Staged,
    /// In the durable work tree (modified, deleted, or untracked and not ignored).
    Unstaged,
}

/// A drifted path of the durable repository that a promote chose to write.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct DriftedPath {
    /// The drifted path (repository-relative).
    pub path: String,
    /// How it drifted.
    pub how: Drift,
}

fn baseline_conflict_message(paths: &[DriftedPath]) -> String {
    let list: Vec<String> = paths
        .iter()
        .map(|p| {
            let how = match p.how {
                Drift::Committed => "committed",
                Drift::Staged => "staged",
                Drift::Unstaged => "unstaged",
            };
            format!("{} ({how})", p.path)
        })
        .collect();
    format!(
        "baseline conflict: the durable repository changed chosen paths since the session's baseline: {}; nothing was written{}",
        list.join(", "),
        if paths.iter().any(|p| p.how == Drift::Committed) {
            "; run `treefork rebase` to bring the new commits under the session (a three-way merge), then promote again"
        } else {
            "; commit or discard the changes in the durable work tree first"
        }
    )
}

impl Error {
    /// Wrap an `io::Error` with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether this is the disk being full: the reserve refusing ([`Error::StoreFull`])
    /// or ENOSPC from the filesystem or the metadata database.
    pub fn is_full(&self) -> bool {
        match self {
            Error::StoreFull { .. } => true,
            Error::Io { source, .. } | Error::Meta(sled::Error::Io(source)) => {
                io_errno(source) == libc::ENOSPC
            }
            _ => false,
        }
    }

    /// Say what was refused on a full disk (`doing`, e.g. "unmount of /w refused"):
    /// a full error becomes [`Error::StoreFull`] naming it (and the remedy), with
    /// (store dir, bytes free, reserve) from `measure` when the reserve was not
    /// what refused (`crate::store::space::measure`); any other error is returned
    /// as it is.
    pub fn when_full(self, doing: &str, measure: impl FnOnce() -> (PathBuf, u64, u64)) -> Error {
        match self {
            Error::StoreFull {
                path,
                avail,
                reserve,
                ..
            } => Error::StoreFull {
                path,
                avail,
                reserve,
                doing: format!("; {doing}"),
            },
            e if e.is_full() => {
                let (path, avail, reserve) = measure();
                Error::StoreFull {
                    path,
                    avail,
                    reserve,
                    doing: format!("; {doing}"),
                }
            }
            e => e,
        }
    }

    /// Build a corruption error.
    pub fn corrupt(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// The errno a FUSE caller receives for this error. The one place errors become
    /// errnos; logs the cause of every EIO.
    pub fn errno(&self) -> i32 {
        let e = match self {
            Error::Posix(e) => *e,
            Error::Io { source, .. } => io_errno(source),
            Error::StoreFull { .. } => libc::ENOSPC,
            Error::Meta(sled::Error::Io(e)) => io_errno(e),
            Error::Meta(_) | Error::Corrupt { .. } | Error::Missing(_) | Error::Remote { .. } => {
                libc::EIO
            }
            Error::Locked { .. }
            | Error::Conflict(_)
            | Error::ShuttingDown
            | Error::Busy(_)
            | Error::NonFastForward(_)
            | Error::BaselineConflict { .. } => libc::EBUSY,
            Error::Forbidden(_) => libc::EPERM,
            Error::RingUnavailable(_) => libc::EOPNOTSUPP,
            Error::ObjectTooLarge { .. } => libc::EFBIG,
            Error::Quota { .. } => libc::EDQUOT,
            Error::RateLimited(_) => libc::EAGAIN,
            Error::Invalid(_) => libc::EINVAL,
            Error::NotFound(_) => libc::ENOENT,
        };
        if e == libc::EIO {
            log::error!("answering EIO: {self}");
        } else if matches!(
            self,
            Error::Io { .. } | Error::Meta(_) | Error::StoreFull { .. }
        ) {
            log::warn!("answering {}: {self}", errno_name(e));
        }
        e
    }

    /// A stable machine-readable code for the control protocol.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Posix(_) => "posix",
            Error::Io { .. } => "io",
            Error::StoreFull { .. } => "store_full",
            Error::Meta(_) => "meta",
            Error::Corrupt { .. } => "corrupt",
            Error::Missing(_) => "missing_object",
            Error::ObjectTooLarge { .. } => "object_too_large",
            Error::Locked { .. } => "locked",
            Error::Invalid(_) => "invalid",
            Error::NotFound(_) => "not_found",
            Error::Conflict(_) => "conflict",
            Error::ShuttingDown => "shutting_down",
            Error::Forbidden(_) => "forbidden",
            Error::RateLimited(_) => "rate_limited",
            Error::Busy(_) => "busy",
            Error::BaselineConflict { .. } => "BASELINE_CONFLICT",
            Error::Remote { .. } => "remote",
            Error::NonFastForward(_) => "non_fast_forward",
            Error::Quota { .. } => "quota",
            Error::RingUnavailable(_) => "ring_unavailable",
        }
    }

    /// Fields an error response carries besides `code` and `message` (merged
    /// into its `error` object): `paths` of a [`Error::BaselineConflict`], `what`
    /// and `limit` of a [`Error::Quota`].
    pub fn detail(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        match self {
            Error::BaselineConflict { paths } => {
                let mut m = serde_json::Map::new();
                m.insert(
                    "paths".into(),
                    serde_json::to_value(paths).unwrap_or_default(),
                );
                Some(m)
            }
            Error::RingUnavailable(r) => {
                let mut m = serde_json::Map::new();
                m.insert("reason".into(), serde_json::json!(r.code()));
                Some(m)
            }
            Error::Quota { what, limit, .. } => {
                let mut m = serde_json::Map::new();
                m.insert("what".into(), serde_json::json!(what));
                m.insert("limit".into(), serde_json::json!(limit));
                Some(m)
            }
            _ => None,
        }
    }
}

/// Shorthand for a POSIX refusal.
pub fn posix<T>(errno: i32) -> Result<T> {
    Err(Error::Posix(errno))
}

/// The errno of an I/O error. sled re-creates the `io::Error` it stored when it
/// reports it again (losing the OS code but keeping the kind), so the kinds a full or
/// failing disk produces map back to their errnos.
fn io_errno(e: &io::Error) -> i32 {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    match e.kind() {
        io::ErrorKind::StorageFull => libc::ENOSPC,
        io::ErrorKind::QuotaExceeded => libc::EDQUOT,
        io::ErrorKind::ReadOnlyFilesystem => libc::EROFS,
        io::ErrorKind::FileTooLarge => libc::EFBIG,
        _ => libc::EIO,
    }
}

fn errno_name(e: i32) -> String {
    io::Error::from_raw_os_error(e).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errno_is_preserved() {
        let e = Error::io("/x", io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(e.errno(), libc::ENOSPC);
        assert_eq!(Error::Posix(libc::ENOENT).errno(), libc::ENOENT);
        assert_eq!(Error::corrupt("chunk", "hash").errno(), libc::EIO);
    }

    #[test]
    fn sled_io_errors_keep_their_errno() {
        // sled clones its remembered error as io::Error::new(kind, debug string).
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        let cloned = io::Error::new(full.kind(), format!("{full:?}"));
        assert_eq!(Error::Meta(sled::Error::Io(full)).errno(), libc::ENOSPC);
        assert_eq!(Error::Meta(sled::Error::Io(cloned)).errno(), libc::ENOSPC);
        let other = io::Error::other("x");
        assert_eq!(Error::Meta(sled::Error::Io(other)).errno(), libc::EIO);
    }
}
