//! Metadata database: the only module that names sled.
//!
//! Owns: the key layout of the single sled tree and atomic, durable batches.
//! Keys are a one-byte-plus-slash prefix followed by the key body:
//! `m/format` format marker, `o/<32-byte id>` object index entries, `s/<name>` session records,
//! `c/<32-byte id>` checkpoints, `r/<name>` refs. Integers inside keys, when added,
//! are big-endian so that sled's byte order is numeric order.
//! Invariant: every [`MetaDb::apply`] is atomic (one sled batch) and durable (flushed)
//! before it returns.

use std::path::Path;

use crate::error::{Error, Result};

/// Key of the format marker written when a store is created.
pub const FORMAT_KEY: &[u8] = b"m/format";
/// Value of the format marker.
pub const FORMAT_VALUE: &[u8] = b"treefork-meta v1";
/// Prefix of object-index keys.
pub const OBJECT_PREFIX: &[u8] = b"o/";
/// Prefix of session-record keys.
pub const SESSION_PREFIX: &[u8] = b"s/";

/// One write of a metadata batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaOp {
    /// Insert or overwrite `key`.
    Put(Vec<u8>, Vec<u8>),
    /// Remove `key`.
    Delete(Vec<u8>),
}

/// Build a key from a prefix and a body.
pub fn key(prefix: &[u8], body: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + body.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(body);
    k
}

/// The sled database of a store.
pub struct MetaDb {
    db: sled::Db,
}

/// Batches at least this large are "bulk" (see [`MetaDb::drain_garbage`]).
const BULK_OPS: usize = 10_000;

impl MetaDb {
    /// Open (creating) the database in `dir`. sled takes an exclusive lock on it.
    pub fn open(dir: &Path) -> Result<MetaDb> {
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
                Ok(db) => return Ok(MetaDb { db }),
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

    /// Read one key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?.map(|v| v.to_vec()))
    }

    /// All pairs whose key starts with `prefix`, in key order.
    pub fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        for kv in self.db.scan_prefix(prefix) {
            let (k, v) = kv?;
            out.push((k.to_vec(), v.to_vec()));
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
        self.db.apply_batch(batch)?;
        self.db.flush()?;
        if n >= BULK_OPS {
            self.drain_garbage(n);
        }
        Ok(())
    }

    /// After a bulk batch (an import), sled holds the replaced versions of many tree
    /// nodes for epoch-based reclamation, which it frees a few hundred at a time on
    /// later operations: measured, the first hundred small commits after a
    /// 100,000-file import each took ~5 ms instead of ~0.5 ms, mostly freeing. Pay
    /// that off in the background with cheap reads (each one pins the epoch and lets
    /// sled collect).
    fn drain_garbage(&self, ops: usize) {
        let db = self.db.clone();
        let _ = std::thread::Builder::new()
            .name("sled-drain".into())
            .spawn(move || {
                for i in 0..ops.saturating_mul(4) {
                    let _ = db.get(FORMAT_KEY);
                    if i % 4096 == 4095 {
                        std::thread::yield_now();
                    }
                }
            });
    }
}
