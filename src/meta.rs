//! Metadata database: the only module that names sled.
//!
//! Owns: the key layout of the single sled tree (every prefix, typed key builders
//! and parsers: [`keys`], re-exported here), bounded range scans, and atomic,
//! durable batches. No other module spells a key prefix.
//! Invariant: every [`MetaDb::apply`] is atomic (one sled batch) and durable before it
//! returns — durable by our own syncs, not by sled's flush alone (see below).
//!
//! Durability: sled 0.34's `flush()` writes its log with `sync_file_range` (sled
//! issue #1452), which commits neither the file's metadata (its size, the extents
//! of newly written blocks) nor the device cache; sled's background `fsync` makes it
//! durable up to ~0.5 s later. So after sled's flush, `apply` makes the batch
//! durable itself ([`SledFiles::sync`]): it fsyncs every blob file sled created since
//! the last commit (`meta/blobs/<lsn>`, written by sled without any sync) and then
//! the `blobs/` directory, fdatasyncs the log file `meta/db`, and fsyncs `meta/` when
//! its entries changed (sled renames snapshots `snap.<lsn>` into it). At open, the
//! files sled created (`conf`, `db`, `blobs/`) and the directories holding them are
//! fsync'd. A failed sync is an I/O error: the handle is poisoned and reopened, so
//! sled recovers what is on the disk.
//!
//! Journal: every batch that changes a journaled key (all but the object index)
//! takes the next generation, written as `m/gen` in the same sled batch, and is
//! appended to the journal (`meta::journal`) once sled's copy is durable — so the
//! database is never behind its journal except by damage. `meta::journaled` owns the
//! attachment, the check at open, and rotation.
//!
//! Write errors: sled 0.34 remembers the first I/O error of a write (e.g. ENOSPC) as
//! a "global error" and fails every later flush with it until the database is
//! reopened (measured, `tests/it/enospc.rs`). So a failed write marks the handle
//! poisoned, and the next `apply` (or read) closes and reopens the database first:
//! sled recovers exactly the batches that were durable, the caller's failed batch is
//! simply not there, and the store retries it (its index entries are still pending).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use crate::durable::{self, Scope};
use crate::error::{Error, Result};

pub mod journal;
pub mod journaled;
pub mod keys;
pub mod quiet;
pub use journaled::Verdict;
pub use keys::*;
#[cfg(test)]
mod durability_tests;
#[cfg(test)]
mod range_tests;

/// One write of a metadata batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaOp {
    /// Insert or overwrite `key`.
    Put(Vec<u8>, Vec<u8>),
    /// Remove `key`.
    Delete(Vec<u8>),
    /// A precondition: the batch applies only if `key` holds exactly this value
    /// (`None`: is absent) when it is applied; otherwise nothing of the batch is
    /// written and the apply fails with [`Error::Conflict`]. Check and write are one
    /// atomic step, so a check-then-act on a ref or a log slot needs no lock.
    Expect(Vec<u8>, Option<Vec<u8>>),
}

/// The error of a failed [`MetaOp::Expect`].
pub fn expect_failed(key: &[u8]) -> Error {
    Error::Conflict(format!(
        "{} changed concurrently",
        String::from_utf8_lossy(key)
    ))
}

/// The sled database of a store.
pub struct MetaDb {
    dir: PathBuf,
    /// `None` only after a reopen failed (the next access retries it).
    db: RwLock<Option<sled::Db>>,
    /// A write failed: sled refuses every later write until it is reopened.
    poisoned: Arc<AtomicBool>,
    /// What our own syncs after sled's flush need (see the module docs).
    files: Mutex<SledFiles>,
    /// Held while a batch's preconditions are checked and the batch is applied.
    apply_lock: Mutex<()>,
    /// The journal and the generation counter (see `journaled`).
    pub(crate) journal: journaled::Attached,
}

/// Batches at least this large are "bulk" (see [`MetaDb::drain_garbage`]).
const BULK_OPS: usize = 10_000;

impl MetaDb {
    /// Open (creating) the database in `dir`. sled takes an exclusive lock on it.
    pub fn open(dir: &Path) -> Result<MetaDb> {
        let db = open_sled(dir)?;
        let files = SledFiles::open(dir)?;
        Ok(MetaDb {
            dir: dir.to_path_buf(),
            db: RwLock::new(Some(db)),
            poisoned: Arc::new(AtomicBool::new(false)),
            files: Mutex::new(files),
            apply_lock: Mutex::new(()),
            journal: journaled::Attached::default(),
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
        let db = open_sled(&self.dir)
            .and_then(|db| Ok((db, SledFiles::open(&self.dir)?)))
            .inspect_err(|e| {
                log::error!(
                    "metadata database {}: reopening after a write error failed: {e}",
                    self.dir.display()
                );
            })?;
        *self.files.lock().unwrap() = db.1;
        self.journal.reload_generation(&db.0);
        *g = Some(db.0);
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

/// One line for a sled error (sled's corruption errors name only a page id).
pub fn describe(e: &sled::Error) -> String {
    match e {
        sled::Error::Corruption { at, .. } => match at {
            Some(at) => format!("sled found its files corrupt at {at}"),
            None => "sled found its files corrupt".into(),
        },
        sled::Error::ReportableBug(b) => format!("sled failed ({b})"),
        other => other.to_string(),
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
    // SAFETY: statvfs is plain old data, for which all-zero bytes are a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `s` a valid out-pointer.
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
        self.range_dir(range, limit, false)
    }

    /// At most `limit` pairs of `range`, last key first.
    pub fn range_rev(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.range_dir(range, limit, true)
    }

    fn range_dir(
        &self,
        range: &KeyRange,
        limit: usize,
        rev: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
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
        let it: Box<dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>> = if rev {
            Box::new(it.rev())
        } else {
            Box::new(it)
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

    /// Apply `ops` atomically and make them durable (and journaled, see the module docs).
    pub fn apply(&self, ops: Vec<MetaOp>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let n = ops.len();
        let mut batch = sled::Batch::default();
        let mut expect = Vec::new();
        let mut changes = Vec::new();
        for op in ops {
            match op {
                MetaOp::Put(k, v) => {
                    if keys::journaled(&k) {
                        changes.push(journal::Change::Put(k.clone(), v.clone()));
                    }
                    batch.insert(k, v)
                }
                MetaOp::Delete(k) => {
                    if keys::journaled(&k) {
                        changes.push(journal::Change::Delete(k.clone()));
                    }
                    batch.remove(k)
                }
                MetaOp::Expect(k, v) => expect.push((k, v)),
            }
        }
        let g = self.db(true)?;
        let db = g.as_ref().unwrap();
        let generation = {
            let _one = self.apply_lock.lock().unwrap_or_else(|p| p.into_inner());
            for (k, want) in &expect {
                let have = db.get(k).map_err(|e| self.failed(e))?;
                if have.as_deref() != want.as_deref() {
                    return Err(expect_failed(k));
                }
            }
            let generation = (!changes.is_empty()).then(|| self.journal.next());
            if let Some(g) = generation {
                batch.insert(GEN_KEY, g.to_be_bytes().to_vec());
            }
            db.apply_batch(batch).map_err(|e| self.failed(e))?;
            if let Some(g) = generation {
                self.journal.applied(g);
            }
            generation
        };
        let synced = db.flush().map_err(|e| self.failed(e)).and_then(|_| {
            SledFiles::sync(&self.files).inspect_err(|e| {
                if !self.poisoned.swap(true, Ordering::SeqCst) {
                    log::error!(
                        "metadata database {}: sync failed ({e}); it will be reopened",
                        self.dir.display()
                    );
                }
            })
        });
        if let Some(g) = generation {
            self.journal_after(db, g, &changes, synced.is_ok());
        }
        synced?;
        if n >= BULK_OPS {
            drain_garbage(db, n, &self.poisoned);
        }
        APPLIED.with(|a| a.set(a.get() + 1));
        Ok(())
    }
}

thread_local! {
    /// Batches applied (and synced) by this thread.
    static APPLIED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many metadata batches this thread has applied and synced so far: a
/// measure (an op compares it before and after to count its commits).
pub fn applied_here() -> u64 {
    APPLIED.with(|a| a.get())
}

/// The files of a sled 0.34 database that our syncs cover (sled 0.34.7's layout:
/// `config.rs`, `pagecache/blob_io.rs`, `pagecache/snapshot.rs`): the log `db`, the
/// blob files in `blobs/`, and the entries of the directory itself.
struct SledFiles {
    dir: PathBuf,
    /// The log file, opened read-only (fdatasync needs no write access on Linux;
    /// sled's lock is a `flock` on its own descriptor, untouched by ours).
    db: Arc<File>,
    /// Blob files already fsync'd, with their length then (sled never rewrites a
    /// finished blob).
    blobs: HashMap<OsString, u64>,
    /// Entries of the database directory at the last directory fsync.
    entries: HashSet<OsString>,
}

impl SledFiles {
    /// Open after sled opened `dir`, and make what sled created there durable: its
    /// files (`conf` and `db`, written without a sync when new), `blobs/`, the
    /// directory itself and its entry in the parent.
    fn open(dir: &Path) -> Result<SledFiles> {
        let io = |p: &Path, e| Error::io(p, e);
        let db_path = dir.join("db");
        let db = Arc::new(File::open(&db_path).map_err(|e| io(&db_path, e))?);
        let mut f = SledFiles {
            dir: dir.to_path_buf(),
            db,
            blobs: HashMap::new(),
            entries: HashSet::new(),
        };
        let conf = dir.join("conf");
        match File::open(&conf) {
            Ok(c) => durable::sync_all(&c, Scope::Meta).map_err(|e| io(&conf, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&conf, e)),
        }
        durable::sync_all(&f.db, Scope::Meta).map_err(|e| io(&db_path, e))?;
        f.sync_blobs(true)?;
        f.entries = list(dir)?;
        durable::sync_dir(dir, Scope::Meta).map_err(|e| io(dir, e))?;
        if let Some(parent) = dir.parent() {
            durable::sync_dir(parent, Scope::Meta).map_err(|e| io(parent, e))?;
        }
        Ok(f)
    }

    /// Make everything sled flushed durable: new blob files (then `blobs/`), the log,
    /// and the directory when its entries changed. Blobs first, so that a log entry
    /// naming a blob is never durable before the blob.
    /// The lock is not held across the log's fdatasync, so concurrent commits sync
    /// in parallel (the file system batches them into one journal commit).
    fn sync(files: &Mutex<SledFiles>) -> Result<()> {
        if durable::skipped(Scope::Meta) {
            return Ok(());
        }
        let (db, db_path) = {
            let mut f = files.lock().unwrap();
            f.sync_blobs(false)?;
            (f.db.clone(), f.dir.join("db"))
        };
        durable::sync_data(&db, Scope::Meta).map_err(|e| Error::io(db_path, e))?;
        let mut f = files.lock().unwrap();
        let now = list(&f.dir)?;
        if now != f.entries {
            durable::sync_dir(&f.dir, Scope::Meta).map_err(|e| Error::io(&f.dir, e))?;
            f.entries = now;
        }
        Ok(())
    }

    /// fsync blob files not synced yet, then `blobs/` if there were any (or if
    /// `force`). Blobs sled deleted are forgotten.
    fn sync_blobs(&mut self, force: bool) -> Result<()> {
        let dir = self.dir.join("blobs");
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            // sled creates it at open; a missing one holds no blob to sync.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(&dir, e)),
        };
        let mut now = HashMap::new();
        let mut new = false;
        for e in rd {
            let e = e.map_err(|e| Error::io(&dir, e))?;
            let p = e.path();
            // Removed by sled meanwhile (superseded): nothing to keep.
            let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
            let len = match e.metadata() {
                Ok(m) => m.len(),
                Err(err) if gone(&err) => continue,
                Err(err) => return Err(Error::io(&p, err)),
            };
            // Keyed by length too: a concurrent commit's blob may still be being
            // written when another commit lists it; it is synced again once it grew.
            if self.blobs.get(&e.file_name()) != Some(&len) {
                match File::open(&p) {
                    Ok(b) => durable::sync_all(&b, Scope::Meta).map_err(|e| Error::io(&p, e))?,
                    Err(err) if gone(&err) => continue,
                    Err(err) => return Err(Error::io(&p, err)),
                }
                new = true;
            }
            now.insert(e.file_name(), len);
        }
        if new || force {
            durable::sync_dir(&dir, Scope::Meta).map_err(|e| Error::io(&dir, e))?;
        }
        self.blobs = now;
        Ok(())
    }
}

/// The names in directory `dir`.
fn list(dir: &Path) -> Result<HashSet<OsString>> {
    let mut out = HashSet::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        out.insert(e.map_err(|e| Error::io(dir, e))?.file_name());
    }
    Ok(out)
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
