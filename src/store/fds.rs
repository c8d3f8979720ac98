//! A bounded cache of pack read file descriptors.
//!
//! Owns: the read fds of pack files. Invariant: at most `capacity` fds are held
//! here, whatever the number of packs (a 1 TiB store has ~16k packs of 64 MiB, near
//! the process's fd limit); the least recently used is closed first. The pack being
//! written has its own fd, held by the writer, outside this cache. An evicted fd
//! stays open until its last in-flight read drops it.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::error::{Error, Result};

/// Read fds kept open by default.
pub const DEFAULT_CAPACITY: usize = 256;

/// LRU of open pack files, by pack number.
pub struct PackFds {
    capacity: AtomicUsize,
    /// Pack number → (file, last use).
    open: RwLock<HashMap<u32, (Arc<File>, AtomicU64)>>,
    clock: AtomicU64,
}

impl PackFds {
    /// A cache holding at most `capacity` fds (at least 1).
    pub fn new(capacity: usize) -> PackFds {
        PackFds {
            capacity: AtomicUsize::new(capacity.max(1)),
            open: RwLock::new(HashMap::new()),
            clock: AtomicU64::new(0),
        }
    }

    /// The open file of pack `n` at `path`, opening it (and closing the least
    /// recently used one when full) if needed.
    pub fn get(&self, n: u32, path: impl FnOnce() -> PathBuf) -> Result<Arc<File>> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some((f, used)) = self.open.read().unwrap().get(&n) {
            used.store(now, Ordering::Relaxed);
            return Ok(f.clone());
        }
        let p = path();
        let f = Arc::new(File::open(&p).map_err(|e| Error::io(&p, e))?);
        let mut g = self.open.write().unwrap();
        if let Some((f, _)) = g.get(&n) {
            return Ok(f.clone());
        }
        while g.len() >= self.capacity.load(Ordering::Relaxed) {
            let Some(victim) = g
                .iter()
                .min_by_key(|(_, (_, used))| used.load(Ordering::Relaxed))
                .map(|(k, _)| *k)
            else {
                break;
            };
            g.remove(&victim);
        }
        g.insert(n, (f.clone(), AtomicU64::new(now)));
        Ok(f)
    }

    /// Close pack `n`'s fd (the pack is being deleted).
    pub fn forget(&self, n: u32) {
        self.open.write().unwrap().remove(&n);
    }

    /// Fds this cache may still open before it closes one to open another.
    pub fn headroom(&self) -> usize {
        self.capacity
            .load(Ordering::Relaxed)
            .saturating_sub(self.len())
    }

    /// Hold at most `capacity` fds (at least 1) from the next open on (a
    /// process whose descriptor limit is low keeps fewer).
    pub fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity.max(1), Ordering::Relaxed);
    }

    /// Fds held.
    pub fn len(&self) -> usize {
        self.open.read().unwrap().len()
    }

    /// No fd held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Fds of this process open on files under `dir` (from `/proc/self/fd`; tests).
#[cfg(test)]
pub(crate) fn open_under(dir: &std::path::Path) -> usize {
    let Ok(it) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    it.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.starts_with(dir))
        .count()
}
