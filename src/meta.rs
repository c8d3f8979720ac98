//! Metadata database: the only module that names sled.
//!
//! Owns: the key layout of the single sled tree (every prefix, typed key builders
//! and parsers: [`keys`], re-exported here), bounded range scans, and atomic,
//! durable batches. No other module spells a key prefix.
//! Invariant: every [`MetaDb::apply`] is atomic (one sled batch) and durable (flushed)
//! before it returns.
//!
//! Write errors: sled 0.34 remembers the first I/O error of a write (e.g. ENOSPC) as
//! a "global error" and fails every later flush with it until the database is
//! reopened (measured, `tests/it/enospc.rs`). So a failed write marks the handle
//! poisoned, and the next `apply` (or read) closes and reopens the database first:
//! sled recovers exactly the batches that were durable, the caller's failed batch is
//! simply not there, and the store retries it (its index entries are still pending).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use crate::error::{Error, Result};

pub mod keys;
pub use keys::*;
#[cfg(test)]
mod range_tests;

/// One write of a metadata batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaOp {
    /// Insert or overwrite `key`.
    Put(Vec<u8>, Vec<u8>),
    /// Remove `key`.
    Delete(Vec<u8>),
}

/// The sled database of a store.
pub struct MetaDb {
    dir: PathBuf,
    /// `None` only after a reopen failed (the next access retries it).
    db: RwLock<Option<sled::Db>>,
    /// A write failed: sled refuses every later write until it is reopened.
    poisoned: Arc<AtomicBool>,
}

/// Batches at least this large are "bulk" (see [`MetaDb::drain_garbage`]).
const BULK_OPS: usize = 10_000;

impl MetaDb {
    /// Open (creating) the database in `dir`. sled takes an exclusive lock on it.
    pub fn open(dir: &Path) -> Result<MetaDb> {
        Ok(MetaDb {
            dir: dir.to_path_buf(),
            db: RwLock::new(Some(open_sled(dir)?)),
            poisoned: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Whether a write failed and the database has not been reopened since.
    pub fn poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    /// The open database, reopened first if a write failed and there is room for it.
    /// While there is not, a writer gets the error and a reader the poisoned handle
    /// (sled answers most reads from it; a read that needs to write fails with the
    /// remembered error).
    fn db(&self, write: bool) -> Result<RwLockReadGuard<'_, Option<sled::Db>>> {
        if self.poisoned() || self.db.read().unwrap().is_none() {
            match self.reopen() {
                Ok(()) => {}
                Err(e) if write => return Err(e),
                Err(e) => log::debug!("reading the poisoned metadata database: {e}"),
            }
        }
        let g = self.db.read().unwrap();
        if g.is_none() {
            return Err(Error::Meta(sled::Error::Unsupported(
                "the metadata database is closed after a failed reopen".into(),
            )));
        }
        Ok(g)
    }

    /// Close and reopen the database after a write error (see the module docs).
    fn reopen(&self) -> Result<()> {
        let mut g = self.db.write().unwrap();
        if !self.poisoned() && g.is_some() {
            return Ok(());
        }
        // Opening writes to the database, and a failed open would leave no handle at
        // all (not even for reads): wait for room.
        let avail = avail_bytes(&self.dir);
        if avail < REOPEN_FREE {
            return Err(Error::io(
                &self.dir,
                std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    format!(
                        "No space left on device: the metadata database failed a write and is reopened once {} MiB are free ({} KiB now)",
                        REOPEN_FREE >> 20,
                        avail >> 10
                    ),
                ),
            ));
        }
        // sled holds an exclusive lock on its files: the old handle must be gone
        // before the new one opens. Dropping it tries one last flush, which fails.
        drop(g.take());
        let db = open_sled(&self.dir).inspect_err(|e| {
            log::error!(
                "metadata database {}: reopening after a write error failed: {e}",
                self.dir.display()
            );
        })?;
        *g = Some(db);
        self.poisoned.store(false, Ordering::SeqCst);
        log::warn!(
            "metadata database {} reopened after a write error",
            self.dir.display()
        );
        Ok(())
    }

    /// Note a sled error; I/O errors poison the handle.
    fn failed(&self, e: sled::Error) -> Error {
        if matches!(e, sled::Error::Io(_)) && !self.poisoned.swap(true, Ordering::SeqCst) {
            log::error!(
                "metadata database {}: I/O error ({e}); it will be reopened once 4 MiB are free",
                self.dir.display()
            );
        }
        Error::Meta(e)
    }
}

/// Free space needed before a poisoned database is reopened.
const REOPEN_FREE: u64 = 4 << 20;

/// Bytes available on the filesystem holding `dir` (`u64::MAX` if unknown).
fn avail_bytes(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return u64::MAX;
    };
    // SAFETY: `c` is a valid NUL-terminated path and `s` a valid out-pointer.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return u64::MAX;
    }
    s.f_bavail * s.f_frsize
}

fn open_sled(dir: &Path) -> Result<sled::Db> {
    // The caller holds the store lock, so sled's own lock can only be held by a
    // previous handle of this process that is still shutting down: retry briefly.
    let mut tries = 0;
    loop {
        let r = sled::Config::new()
            .path(dir)
            .cache_capacity(32 << 20)
            .mode(sled::Mode::HighThroughput)
            .open();
        match r {
            Ok(db) => return Ok(db),
            // sled reports its lock as WouldBlock or as an `Other` error
            // "could not acquire lock on ...".
            Err(sled::Error::Io(io))
                if (io.kind() == std::io::ErrorKind::WouldBlock
                    || io.to_string().contains("could not acquire lock"))
                    && tries < 100 =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(sled::Error::Io(io)) => return Err(Error::io(dir, io)),
            Err(other) => return Err(Error::Meta(other)),
        }
    }
}

impl MetaDb {
    /// Read one key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let g = self.db(false)?;
        let db = g.as_ref().unwrap();
        Ok(db.get(key).map_err(|e| self.failed(e))?.map(|v| v.to_vec()))
    }

    /// All pairs whose key starts with `prefix`, in key order (for listings that
    /// need every record of a kind; to find one record use [`range`](Self::range)).
    pub fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.range(&KeyRange::prefix(prefix), usize::MAX)
    }

    /// At most `limit` pairs of `range`, in key order. Reads only what it returns
    /// (plus one step of sled's iterator).
    pub fn range(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        if limit == 0 || range.end.as_ref().is_some_and(|e| *e <= range.start) {
            return Ok(out);
        }
        let g = self.db(false)?;
        let db = g.as_ref().unwrap();
        let it = match &range.end {
            Some(end) => db.range(range.start.as_slice()..end.as_slice()),
            None => db.range(range.start.as_slice()..),
        };
        for kv in it {
            let (k, v) = kv.map_err(|e| self.failed(e))?;
            out.push((k.to_vec(), v.to_vec()));
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// Apply `ops` atomically and make them durable.
    pub fn apply(&self, ops: Vec<MetaOp>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let n = ops.len();
        let mut batch = sled::Batch::default();
        for op in ops {
            match op {
                MetaOp::Put(k, v) => batch.insert(k, v),
                MetaOp::Delete(k) => batch.remove(k),
            }
        }
        let g = self.db(true)?;
        let db = g.as_ref().unwrap();
        db.apply_batch(batch).map_err(|e| self.failed(e))?;
        db.flush().map_err(|e| self.failed(e))?;
        if n >= BULK_OPS {
            drain_garbage(db, n, &self.poisoned);
        }
        Ok(())
    }
}

/// After a bulk batch (an import), sled holds the replaced versions of many tree
/// nodes for epoch-based reclamation, which it frees a few hundred at a time on
/// later operations: measured, the first hundred small commits after a
/// 100,000-file import each took ~5 ms instead of ~0.5 ms, mostly freeing. Pay
/// that off in the background with cheap reads (each one pins the epoch and lets
/// sled collect).
fn drain_garbage(db: &sled::Db, ops: usize, stop: &Arc<AtomicBool>) {
    let db = db.clone();
    // Stops when the handle is poisoned: a reopen needs every clone of it gone.
    let stop = stop.clone();
    let _ = std::thread::Builder::new()
        .name("sled-drain".into())
        .spawn(move || {
            for i in 0..ops.saturating_mul(4) {
                if i % 1024 == 0 && stop.load(Ordering::Relaxed) {
                    return;
                }
                let _ = db.get(FORMAT_KEY);
                if i % 4096 == 4095 {
                    std::thread::yield_now();
                }
            }
        });
}
