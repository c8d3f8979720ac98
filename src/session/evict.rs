//! Eviction of clean inodes the kernel has forgotten (issue 12, D9): without it,
//! every inode a mount ever touched stayed in the live table (read 1M files once
//! and the daemon kept 1M inodes).
//!
//! Owns: the sweep over the candidates the table keeps ([`State::evict`], an
//! [`super::inode::Pending`]: directories to try, forgets since the last sweep),
//! and when it runs. `inode` keeps that bookkeeping and never calls in here; the
//! table's callers do.
//!
//! The unit of eviction is a directory's *loaded entries*: unloading a directory
//! drops its entries and removes its single-linked children from the table, and
//! the directory goes back to being "a stored node, loaded on demand" (as right
//! after mount). A later lookup reloads it from that node, and each child comes back
//! with the inode number, attributes and content id of its stored record — the same
//! ones the kernel saw, so a re-looked-up path gets an inode number with its old
//! meaning. This keeps every table invariant (see `inode`): a loaded directory's
//! entries still all name live inodes, and a live inode's parent is still live.
//!
//! A directory `d` is unloaded only when it is *exactly its stored node* and nothing
//! below it needs the table:
//! - `d` is not dirty, has a content id (`stored`) and is linked (`nlink > 0`);
//! - every single-linked child is forgotten by the kernel (`lookups == 0`; an open
//!   file or directory pins its kernel inode, so this also means "not open"), clean
//!   (`Inode::is_clean`: record and content stored), holds no unsealed blocks, and,
//!   if a directory, is unloaded itself (children first: the sweep is post-order);
//! - `d`'s readdir cookies would come back the same (`Entries::cookies_stable`),
//!   or the kernel has forgotten `d` too (then no listing of it is in progress).
//!
//! Hard-linked children stay in the table (their records live in the link table,
//! which is in memory anyway, and any directory may name them); orphans (unlinked
//! but open) have no parent and are reaped on their last forget, as before.
//!
//! When: a forget that drops an inode's last kernel reference records its parent
//! (and itself, if a directory) as a candidate. A sweep runs once the forgets since
//! the last one reach [`SWEEP_MIN_FORGETS`] or an eighth of the table, so its cost
//! (proportional to the candidates' entries) is amortized over the forgets that
//! caused it; after each flush, for candidates that were blocked only by unflushed
//! changes; and at an idle flush (the daemon's periodic one), for candidates left by
//! the last forgets, so the table comes down within a flush interval once the
//! forgets stop. Candidates blocked by a kernel reference are dropped (the
//! reference's own forget brings them back). The sweep walks with explicit stacks
//! (no recursion per tree level) and tries each directory once per round. A large
//! sweep shrinks the table and trims the heap.

use std::collections::{HashMap, HashSet};

use super::inode::{Data, Inode, State};
use crate::tree::Kind;

/// A sweep waits for at least this many forgets (and an eighth of the table), so
/// that a few forgotten inodes stay cheap to look up again and a sweep's cost is
/// spread over many forgets.
pub const SWEEP_MIN_FORGETS: u64 = 1024;

/// Tables with fewer live inodes are not swept automatically: walking a forgotten
/// tree again reloads its directories from the store (a cold `git status` of an
/// 18,500-file tree took 1.0 s instead of 0.67 s), and below this size the memory
/// an evicted inode frees (about 370 bytes each, ~24 MiB here) is not worth it.
/// `TREEFORK_EVICT_FLOOR` overrides it (tests set 0); explicit sweeps
/// (`Session::evict_forgotten`) ignore it.
pub const EVICT_FLOOR: usize = 65_536;

/// Environment variable overriding [`EVICT_FLOOR`].
pub const EVICT_FLOOR_ENV: &str = "TREEFORK_EVICT_FLOOR";

fn floor() -> usize {
    static FLOOR: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FLOOR.get_or_init(|| {
        std::env::var(EVICT_FLOOR_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            // Unit tests sweep small tables.
            .unwrap_or(if cfg!(test) { 0 } else { EVICT_FLOOR })
    })
}

/// Once sweeps have removed this many inodes, the table is shrunk and the heap
/// trimmed.
const TRIM_AFTER: usize = 8192;

/// Why a directory could not be unloaded.
#[derive(Clone, Copy, Debug)]
enum Blocked {
    /// Something below it has changes not yet flushed: retry after a flush.
    Unflushed,
    /// The kernel holds a reference (or it is not a loaded, linked directory):
    /// the reference's forget will make it a candidate again.
    Held,
}

impl State {
    /// The kernel dropped its last reference to `ino` (call before `maybe_reap`):
    /// its directory, and itself if a directory, become eviction candidates.
    pub(crate) fn note_forgotten(&mut self, ino: u64) {
        let Some(i) = self.inodes.get(&ino) else {
            return;
        };
        if i.kind == Kind::Dir {
            self.evict.dirs.insert(ino);
        }
        if i.parent != 0 && !i.hardlink {
            self.evict.dirs.insert(i.parent);
        }
        self.evict.forgets += 1;
    }

    /// Sweep if enough forgets accumulated since the last sweep (see module docs).
    pub(crate) fn maybe_sweep(&mut self) {
        let due = SWEEP_MIN_FORGETS.max(self.inodes.len() as u64 / 8);
        if self.evict.forgets >= due && self.inodes.len() >= floor() {
            self.sweep();
        }
    }

    /// After a flush: retry the candidates that waited for their changes to be
    /// stored.
    pub(crate) fn sweep_after_flush(&mut self) {
        if !self.evict.dirs.is_empty() && self.inodes.len() >= floor() {
            self.sweep();
        }
    }

    /// Unload every candidate directory that can be (children first), then their
    /// parents in turn while that succeeds. Returns the number of inodes removed.
    /// Each directory is tried at most once per round (a failure is remembered until
    /// one of its children unloads), so a sweep costs about the candidates' loaded
    /// subtrees once, however they nest.
    pub(crate) fn sweep(&mut self) -> usize {
        let before = self.inodes.len();
        self.evict.forgets = 0;
        let mut round: Vec<u64> = self.evict.dirs.drain().collect();
        let mut failed: HashMap<u64, Blocked> = HashMap::new();
        while !round.is_empty() {
            let mut up = HashSet::new();
            for d in round {
                if self.unload_subtree(d, &mut failed).is_ok()
                    && let Some(i) = self.inodes.get(&d)
                    && i.lookups == 0
                    && i.parent != 0
                    && !i.hardlink
                {
                    // Its parent may be unloadable now that it is.
                    up.insert(i.parent);
                }
            }
            for p in &up {
                failed.remove(p);
            }
            round = up.into_iter().collect();
        }
        self.evict.dirs = failed
            .into_iter()
            .filter(|(_, b)| matches!(b, Blocked::Unflushed))
            .map(|(d, _)| d)
            .collect();
        let removed = before - self.inodes.len();
        if removed > 0 {
            log::debug!(
                "evicted {removed} forgotten clean inodes ({} live)",
                self.inodes.len()
            );
        }
        self.evict.removed += removed;
        if self.evict.removed >= TRIM_AFTER {
            self.evict.removed = 0;
            self.give_back_memory();
        }
        removed
    }

    /// After large evictions: shrink the table (a hash map keeps its capacity,
    /// about 380 bytes a slot, after removals; shrinking when it is a quarter full
    /// keeps the rehash cost amortized) and hand freed heap pages back to the kernel
    /// (glibc keeps freed arena memory mapped otherwise).
    fn give_back_memory(&mut self) {
        let len = self.inodes.len();
        if self.inodes.capacity() > 4 * len.max(1024) {
            self.inodes.shrink_to(2 * len);
        }
        // SAFETY: malloc_trim only returns free heap pages to the kernel.
        unsafe {
            libc::malloc_trim(0);
        }
    }

    /// Unload directory `top` and, first, every forgotten loaded directory below it
    /// not tried yet (post-order over an explicit stack). `Ok` when `top` ends up
    /// unloaded; failures are recorded in `failed`.
    fn unload_subtree(
        &mut self,
        top: u64,
        failed: &mut HashMap<u64, Blocked>,
    ) -> Result<(), Blocked> {
        if let Some(b) = failed.get(&top) {
            return Err(*b);
        }
        let mut stack = vec![(top, false)];
        while let Some((d, expanded)) = stack.pop() {
            if expanded {
                if let Err(mut b) = self.unload_dir(d) {
                    // Held up by a directory below that waits for a flush: so is `d`.
                    if matches!(b, Blocked::Held) && self.below_unflushed(d, failed) {
                        b = Blocked::Unflushed;
                    }
                    failed.insert(d, b);
                }
                continue;
            }
            let Some(children) = self.loaded_dir(d) else {
                continue;
            };
            stack.push((d, true));
            for c in children {
                if let Some(i) = self.inodes.get(&c)
                    && i.lookups == 0
                    && !i.hardlink
                    && !failed.contains_key(&c)
                    && matches!(&i.data, Data::Dir(x) if x.entries.is_some())
                {
                    stack.push((c, false));
                }
            }
        }
        match self.inodes.get(&top) {
            Some(Inode {
                data: Data::Dir(x), ..
            }) if x.entries.is_none() => Ok(()),
            _ => Err(failed.get(&top).copied().unwrap_or(Blocked::Held)),
        }
    }

    /// Whether a child directory of `d` failed to unload for want of a flush.
    fn below_unflushed(&self, d: u64, failed: &HashMap<u64, Blocked>) -> bool {
        self.loaded_dir(d).is_some_and(|cs| {
            cs.iter()
                .any(|c| matches!(failed.get(c), Some(Blocked::Unflushed)))
        })
    }

    /// The children of `d` if it is a directory with loaded entries.
    fn loaded_dir(&self, d: u64) -> Option<Vec<u64>> {
        match &self.inodes.get(&d)?.data {
            Data::Dir(x) => Some(x.entries.as_ref()?.values().copied().collect()),
            _ => None,
        }
    }

    /// Whether child `c` may leave the table with its directory's entries.
    fn evictable(&self, c: u64) -> Result<(), Blocked> {
        let Some(i) = self.inodes.get(&c) else {
            return Err(Blocked::Held);
        };
        if i.hardlink {
            return Ok(()); // stays in the table
        }
        if i.lookups > 0 {
            return Err(Blocked::Held);
        }
        if i.dirty || !i.is_clean() || self.dirty_files.contains(&c) {
            return Err(Blocked::Unflushed);
        }
        match &i.data {
            Data::Dir(x) if x.entries.is_some() => Err(Blocked::Held),
            _ => Ok(()),
        }
    }

    /// Unload directory `d` if the module rules allow it.
    fn unload_dir(&mut self, d: u64) -> Result<(), Blocked> {
        let Some(i) = self.inodes.get(&d) else {
            return Err(Blocked::Held);
        };
        let Data::Dir(x) = &i.data else {
            return Err(Blocked::Held);
        };
        let Some(entries) = &x.entries else {
            return Ok(());
        };
        if i.attr.nlink == 0 {
            return Err(Blocked::Held);
        }
        if i.dirty || x.stored.is_none() {
            return Err(Blocked::Unflushed);
        }
        if i.lookups > 0 && !entries.cookies_stable() {
            return Err(Blocked::Held);
        }
        let children: Vec<u64> = entries.values().copied().collect();
        for &c in &children {
            self.evictable(c)?;
        }
        self.unindex_dir(d);
        for c in children {
            if self.inodes.get(&c).is_some_and(|i| !i.hardlink) {
                self.inodes.remove(&c);
            }
        }
        if let Some(Inode {
            data: Data::Dir(x), ..
        }) = self.inodes.get_mut(&d)
        {
            x.entries = None;
            x.shards = Default::default();
        }
        Ok(())
    }
}
