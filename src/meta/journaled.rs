//! The metadata database's journal attachment: generations, the check at open, and
//! rotation.
//!
//! Owns: the generation counter (`m/gen`, [`GEN_KEY`]), the attached
//! [`Journal`], and [`MetaDb::attach_journal`], which decides at every store open
//! whether the database can be served.
//!
//! Invariants:
//! - Every batch that changes a journaled key (see [`keys::journaled`]) takes the
//!   next generation under the apply lock and writes it as `m/gen` in the same sled
//!   batch; its journal record is appended only after sled's copy is durable. So
//!   after any crash the database's generation is ≥ the journal's, and a database
//!   *older* than its journal has lost committed changes: it is damaged.
//! - A journal behind the database (a crash between the two syncs, a failed append,
//!   a deleted or damaged journal) is re-anchored: a new snapshot of the database.
//! - At equal generations the database's journaled records equal the journal's
//!   replay, record for record; any difference is damage.
//! - A snapshot is taken under the apply lock once no applied batch is still on its
//!   way to the journal, so it holds exactly the batches up to its generation.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::journal::{self, Change, Journal, State};
use super::{GEN_KEY, MetaDb, keys, quiet};
use crate::error::Result;

/// What the check at open found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The database equals its journal's replay at the same generation.
    Resumed {
        /// The generation both are at.
        generation: u64,
    },
    /// A new journal was anchored on the database (first open, journal missing,
    /// behind or unreadable), for this reason.
    Started {
        /// Why (one line).
        reason: String,
    },
    /// The database cannot be served: what was found (one line).
    Damaged(String),
}

/// The journal side of a [`MetaDb`].
#[derive(Default)]
pub(crate) struct Attached {
    journal: Mutex<Option<Arc<Journal>>>,
    /// The generation of the last applied journaled batch.
    generation: AtomicU64,
    /// Journaled batches applied to sled and not yet appended (or given up).
    inflight: Mutex<u64>,
    idle: Condvar,
    /// Held by the one thread rotating.
    rotating: Mutex<()>,
}

impl Attached {
    /// The generation the next journaled batch takes (called under the apply lock).
    pub(crate) fn next(&self) -> u64 {
        self.generation.load(Ordering::SeqCst) + 1
    }

    /// Batch `generation` was applied to sled (under the apply lock); it is on its
    /// way to the journal until [`MetaDb::journal_after`].
    pub(crate) fn applied(&self, generation: u64) {
        self.generation.store(generation, Ordering::SeqCst);
        *self.inflight.lock().unwrap() += 1;
    }

    fn done(&self) {
        let mut n = self.inflight.lock().unwrap();
        *n -= 1;
        if *n == 0 {
            self.idle.notify_all();
        }
    }

    fn wait_idle(&self) {
        let mut n = self.inflight.lock().unwrap();
        while *n > 0 {
            n = self.idle.wait(n).unwrap();
        }
    }

    /// After a reopen: the counter restarts from what sled kept.
    pub(crate) fn reload_generation(&self, db: &sled::Db) {
        let g = match db.get(GEN_KEY) {
            Ok(Some(v)) => decode_gen(&v),
            _ => 0,
        };
        self.generation.store(g, Ordering::SeqCst);
    }

    fn current(&self) -> Option<Arc<Journal>> {
        self.journal.lock().unwrap().clone()
    }

    /// Stop journaling on this handle; the next open finds the journal behind and
    /// re-anchors it.
    fn detach(&self, why: &str) {
        if self.journal.lock().unwrap().take().is_some() {
            log::error!("metadata journal: {why}; journaling stops until the store is reopened");
        }
    }
}

fn decode_gen(v: &[u8]) -> u64 {
    v.try_into().map(u64::from_be_bytes).unwrap_or(0)
}

impl MetaDb {
    /// After batch `generation` was applied (and, if `synced`, made durable): append
    /// it to the journal, then rotate the journal if it is due.
    pub(crate) fn journal_after(
        &self,
        db: &sled::Db,
        generation: u64,
        changes: &[Change],
        synced: bool,
    ) {
        let j = self.journal.current();
        if let Some(j) = &j {
            if !synced {
                self.journal.detach("a batch's sync failed");
            } else if let Err(e) = j.append(generation, changes) {
                self.journal
                    .detach(&format!("appending generation {generation} failed: {e}"));
            }
        }
        self.journal.done();
        if let Some(j) = j.filter(|j| synced && j.due()) {
            self.rotate(db, &j);
        }
    }

    /// A new snapshot and segment, taken while no batch is in flight.
    fn rotate(&self, db: &sled::Db, j: &Journal) {
        let Ok(_one) = self.journal.rotating.try_lock() else {
            return;
        };
        if !j.due() {
            return;
        }
        let _apply = self.apply_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.journal.wait_idle();
        let generation = self.journal.generation.load(Ordering::SeqCst);
        let r = pairs_of(db)
            .map_err(|e| self.failed(e))
            .and_then(|state| j.rotate(generation, &state));
        if let Err(e) = r {
            self.journal
                .detach(&format!("rotating at generation {generation} failed: {e}"));
        }
    }

    /// The generation stored in the database (0 before the first journaled batch).
    pub fn stored_gen(&self) -> Result<u64> {
        Ok(self.get(GEN_KEY)?.as_deref().map_or(0, decode_gen))
    }

    /// Every journaled pair of the database (all but the object index and `m/gen`).
    pub fn journaled_pairs(&self) -> Result<State> {
        let g = self.db(false)?;
        pairs_of(g.as_ref().unwrap()).map_err(|e| self.failed(e))
    }

    /// Check the database against the journal in `dir` and attach it (see the
    /// module docs). `Damaged` leaves nothing attached; the caller must not serve.
    pub fn attach_journal(&self, dir: &Path) -> Result<Verdict> {
        // Read without `failed`: an error here is damage reported once by the
        // caller, not a write error to log and reopen after.
        let read = quiet::catch(|| -> sled::Result<(u64, State)> {
            let g = self
                .db(false)
                .map_err(|e| sled::Error::Unsupported(e.to_string()))?;
            let db = g.as_ref().unwrap();
            let generation = db.get(GEN_KEY)?.as_deref().map_or(0, decode_gen);
            Ok((generation, pairs_of(db)?))
        });
        let (db_gen, pairs) = match read {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                return Ok(Verdict::Damaged(format!(
                    "reading it failed: {}",
                    super::describe(&e)
                )));
            }
            Err(p) => return Ok(Verdict::Damaged(format!("sled panicked reading it: {p}"))),
        };
        self.journal.generation.store(db_gen, Ordering::SeqCst);
        let loaded = match journal::load(dir) {
            Ok(l) => l,
            Err(e) => {
                return Ok(self.start_journal(
                    dir,
                    db_gen,
                    &pairs,
                    format!("its journal is unreadable ({e})"),
                ));
            }
        };
        let Some(l) = loaded else {
            let why = if db_gen == 0 {
                "a new journal"
            } else {
                "its journal is missing"
            };
            return Ok(self.start_journal(dir, db_gen, &pairs, why.into()));
        };
        for d in &l.damaged {
            log::warn!("metadata journal {}: {d}", dir.display());
        }
        if db_gen < l.newest {
            return Ok(Verdict::Damaged(format!(
                "the database is at generation {db_gen} but its journal reaches generation {}: committed changes are missing from it",
                l.newest
            )));
        }
        if db_gen > l.generation {
            let why = format!(
                "its journal ends at generation {} behind the database's {db_gen} (a crash between the two syncs, or a damaged journal)",
                l.generation
            );
            return Ok(self.start_journal(dir, db_gen, &pairs, why));
        }
        if let Some(d) = differs(&pairs, &l.state) {
            return Ok(Verdict::Damaged(d));
        }
        match Journal::resume(dir, &l) {
            Ok(j) => {
                // Each open starts a segment: one that only reads must not pile them up.
                if j.due()
                    && let Err(e) = j.rotate(db_gen, &pairs)
                {
                    return Ok(self.start_journal(
                        dir,
                        db_gen,
                        &pairs,
                        format!("rotating it failed ({e})"),
                    ));
                }
                *self.journal.journal.lock().unwrap() = Some(Arc::new(j));
                Ok(Verdict::Resumed { generation: db_gen })
            }
            Err(e) => {
                Ok(self.start_journal(dir, db_gen, &pairs, format!("resuming it failed ({e})")))
            }
        }
    }

    /// Anchor a new journal on the database's `pairs`; a failure to write one is
    /// logged and the store runs without a journal until the next open.
    fn start_journal(&self, dir: &Path, generation: u64, pairs: &State, reason: String) -> Verdict {
        match Journal::start(dir, generation, pairs) {
            Ok(j) => {
                if generation > 0 {
                    log::warn!(
                        "metadata journal {}: {reason}; a new one is anchored at generation {generation}",
                        dir.display()
                    );
                }
                *self.journal.journal.lock().unwrap() = Some(Arc::new(j));
                Verdict::Started { reason }
            }
            Err(e) => {
                log::error!(
                    "metadata journal {}: {reason}, and anchoring a new one failed: {e}; running without a journal until the next open",
                    dir.display()
                );
                Verdict::Started {
                    reason: format!("{reason}; no journal: {e}"),
                }
            }
        }
    }
}

/// Every journaled pair of `db`.
fn pairs_of(db: &sled::Db) -> sled::Result<State> {
    let mut out = State::new();
    for kv in db.iter() {
        let (k, v) = kv?;
        if keys::journaled(&k) {
            out.insert(k.to_vec(), v.to_vec());
        }
    }
    Ok(out)
}

/// How `db` differs from `journal` (one line), if it does.
fn differs(db: &State, journal: &State) -> Option<String> {
    let mut n = 0usize;
    let mut first = None;
    for (k, v) in db {
        if journal.get(k) != Some(v) {
            n += 1;
            first.get_or_insert(k);
        }
    }
    for k in journal.keys() {
        if !db.contains_key(k) {
            n += 1;
            if first.is_none_or(|f| k < f) {
                first = Some(k);
            }
        }
    }
    let first = first?;
    let mut key = String::from_utf8_lossy(first).into_owned();
    key.truncate(80);
    Some(format!(
        "{n} record(s) differ from its journal at the same generation (first: {key:?})"
    ))
}

#[cfg(test)]
mod tests;
