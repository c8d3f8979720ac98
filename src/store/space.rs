//! The free-space reserve of a store.
//!
//! Owns: deciding whether a pack append or a metadata commit may use the remaining
//! space of the filesystem holding the store. The reserve is kept in tiers (in the
//! spirit of ZFS's slop space and btrfs's global reserve), so a full store can
//! still be unmounted, asked and collected:
//! - file data ([`Tier::Write`]: chunks, whoever writes them) stops
//!   ([`Error::StoreFull`], ENOSPC) while fewer than [`Reserve::bytes`] would
//!   remain free;
//! - tree nodes ([`Tier::Tree`]: directories, block lists, roots) may use a
//!   quarter of the reserve: they are what saves a deletion, a rename, or a
//!   checkpoint or unmount of data already stored, so a user who deletes files on
//!   a full store can still unmount (and a flush of new data is refused at its
//!   chunks, before its nodes);
//! - appends that free space ([`Tier::Recover`]: gc's repack, which copies the
//!   few live records of a mostly dead pack and then deletes it) may use half of
//!   the reserve;
//! - metadata commits stop below a quarter of it, so the metadata database (whose
//!   first failed write poisons it, see `crate::meta`) always finds room for the
//!   commit that names what the packs hold, and for gc's sweep.
//!
//! Read-only commands append nothing. Only other programs filling the disk can
//! still make a sled write fail.
//!
//! The reserve is `TREEFORK_RESERVE_BYTES` when set (0 disables it; tests use that
//! to reach sled's own ENOSPC), else 1/32 of the filesystem, between 1 and 64 MiB.

use std::path::Path;
use std::sync::Mutex;

use crate::error::{Error, Result};

/// Environment variable overriding the reserve (bytes).
pub const RESERVE_ENV: &str = "TREEFORK_RESERVE_BYTES";

/// Appends are allowed without asking the filesystem again for this many bytes
/// (small: other programs may fill the disk meanwhile; a statvfs per MiB is free).
const BUDGET_MAX: u64 = 1 << 20;

/// Who asks for pack space (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// File data: stops at the whole reserve.
    Write,
    /// Tree nodes: may use a quarter of it.
    Tree,
    /// Appends of a collection that frees space (gc's repack): may use half of it.
    Recover,
}

/// Free space kept for the metadata database and for recovery.
pub struct Reserve {
    bytes: u64,
    /// Bytes that may still be appended before free space is measured again.
    budget: Mutex<u64>,
}

impl Reserve {
    /// The reserve for a store in `dir`.
    pub fn new(dir: &Path) -> Reserve {
        let bytes = match std::env::var(RESERVE_ENV).ok().and_then(|v| v.parse().ok()) {
            Some(b) => b,
            None => super::statvfs_bytes(dir).map_or(1 << 20, |(total, _, _)| {
                (total / 32).clamp(1 << 20, 64 << 20)
            }),
        };
        Reserve {
            bytes,
            budget: Mutex::new(0),
        }
    }

    /// A reserve of exactly `bytes` (0 disables it).
    pub fn with_bytes(bytes: u64) -> Reserve {
        Reserve {
            bytes,
            budget: Mutex::new(0),
        }
    }

    /// Bytes kept free.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes an append of `tier` must leave free.
    fn floor(&self, tier: Tier) -> u64 {
        match tier {
            Tier::Write => self.bytes,
            Tier::Tree => self.bytes / 4 * 3,
            Tier::Recover => self.bytes / 2,
        }
    }

    /// May `len` more bytes be appended to a pack in `dir` by `tier`?
    pub fn append(&self, dir: &Path, len: u64, tier: Tier) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        let mut budget = self.budget.lock().unwrap();
        if *budget < len {
            let Some((_, _, avail)) = super::statvfs_bytes(dir) else {
                return Ok(());
            };
            // At least `len`: an object larger than the usual budget is allowed
            // whenever the space above the reserve holds it.
            *budget = avail.saturating_sub(self.bytes).min(BUDGET_MAX.max(len));
            if *budget < len {
                *budget = 0;
                // Inside the reserve: only tree nodes and recovery, measured every
                // time (they are small or few there, and the space is short).
                if tier == Tier::Write || avail.saturating_sub(self.floor(tier)) < len {
                    return Err(self.full(dir, avail));
                }
                return Ok(());
            }
        }
        *budget -= len;
        Ok(())
    }

    /// May a metadata commit run?
    pub fn commit(&self, dir: &Path) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        match super::statvfs_bytes(dir) {
            Some((_, _, avail)) if avail < self.bytes / 4 => Err(self.full(dir, avail)),
            _ => Ok(()),
        }
    }

    /// A failed append may have consumed space: measure again next time.
    pub fn forget(&self) {
        *self.budget.lock().unwrap() = 0;
    }

    fn full(&self, dir: &Path, avail: u64) -> Error {
        Error::StoreFull {
            path: dir.to_path_buf(),
            avail,
            reserve: self.bytes,
            doing: String::new(),
        }
    }
}

/// (`dir`, bytes free, reserve) for the store in `dir`, the reserve as
/// [`Reserve::new`] sets it: for an error naming a full disk the reserve itself
/// did not refuse ([`Error::when_full`]).
pub fn measure(dir: &Path) -> (std::path::PathBuf, u64, u64) {
    let avail = super::statvfs_bytes(dir).map_or(0, |(_, _, a)| a);
    (dir.to_path_buf(), avail, Reserve::new(dir).bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the budget was capped at 1 MiB before comparing, so with the
    /// default reserve every object over 1 MiB (a big file's node, a big
    /// directory) was refused as "No space left" on an empty disk.
    #[test]
    fn an_append_larger_than_the_budget_fits_when_the_disk_has_room() {
        let d = tempfile::tempdir().unwrap();
        let r = Reserve::with_bytes(1 << 20);
        r.append(d.path(), 4 << 20, Tier::Write).unwrap();
        r.append(d.path(), 100, Tier::Write).unwrap();
        // More than the disk holds above the reserve is still refused.
        let (_, _, avail) = super::super::statvfs_bytes(d.path()).unwrap();
        let e = r.append(d.path(), avail, Tier::Write).unwrap_err();
        assert!(e.to_string().contains("No space left"), "{e}");
    }

    /// Tree nodes may use a quarter of the reserve, recovery (gc) half of it;
    /// file data may not use any.
    #[test]
    fn tree_nodes_and_recovery_may_use_part_of_the_reserve() {
        let d = tempfile::tempdir().unwrap();
        let (_, _, avail) = super::super::statvfs_bytes(d.path()).unwrap();
        // Just above what is free: data is refused, nodes and recovery have room.
        let r = Reserve::with_bytes(avail + (1 << 20));
        let e = r.append(d.path(), 4096, Tier::Write).unwrap_err();
        assert!(matches!(e, Error::StoreFull { .. }), "{e:?}");
        assert_eq!(e.errno(), libc::ENOSPC);
        assert!(e.to_string().contains("treefork gc"), "{e}");
        r.append(d.path(), 4096, Tier::Tree).unwrap();
        r.append(d.path(), 4096, Tier::Recover).unwrap();
        // A reserve 3/2 of what is free: nodes are refused too, recovery is not.
        let r = Reserve::with_bytes(avail / 2 * 3);
        r.append(d.path(), 4096, Tier::Tree).unwrap_err();
        r.append(d.path(), 4096, Tier::Recover).unwrap();
    }
}
