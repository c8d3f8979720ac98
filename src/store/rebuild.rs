//! Rebuilding a damaged metadata database (`fsck --repair`).
//!
//! Owns: choosing what the new database is made from — the journal's replay
//! (`meta::journal`), or what the damaged database still yields read prefix by
//! prefix — moving the damaged `meta/` and `journal/` aside, and writing the new
//! database with a fresh journal anchored on it.
//! Invariants: nothing is deleted (the damaged directories are renamed to
//! `meta.damaged-<unix seconds>` and `journal.damaged-<…>` beside them); the report
//! names every record or range that did not come back. The object index (`o/`) is
//! not rebuilt here: the repair that follows re-indexes the packs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::meta::journal::{self, Journal, Loaded, State};
use crate::meta::{self, MetaDb, MetaOp, keys, quiet};

/// What a rebuild of the metadata database did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RebuildReport {
    /// What the check at open found (why it was rebuilt).
    pub reason: String,
    /// What the new database was made from.
    pub source: String,
    /// The generation of that source (its last batch).
    pub generation: u64,
    /// Where the damaged directories were moved (never deleted).
    pub moved_aside: Vec<String>,
    /// Records written to the new database, by kind ("sessions": 2, ...).
    pub recovered: BTreeMap<String, u64>,
    /// What could not be read from the source, one line each.
    pub lost: Vec<String>,
}

/// What the damaged database still gives.
struct Salvage {
    pairs: State,
    generation: u64,
    /// Prefixes (or the whole database) that could not be read.
    failed: Vec<String>,
}

/// Rebuild the metadata database of the store at `dir`, found damaged for
/// `reason` (see the module docs). The caller holds the store lock.
pub fn rebuild(dir: &Path, reason: &str) -> Result<RebuildReport> {
    let meta_dir = dir.join("meta");
    let journal_dir = dir.join("journal");
    let salvage = salvage(&meta_dir);
    let loaded = journal::load(&journal_dir);
    let (source, generation, state, lost) = choose(salvage, loaded);
    let moved_aside = move_aside(dir, &[&meta_dir, &journal_dir])?;
    let recovered = write(&meta_dir, &journal_dir, &state)?;
    let report = RebuildReport {
        reason: reason.to_string(),
        source,
        generation,
        moved_aside,
        recovered,
        lost,
    };
    log::info!(
        "metadata database {} rebuilt from {} (generation {}): {} record(s) back, {} thing(s) lost; the damaged copy is in {}",
        meta_dir.display(),
        report.source,
        report.generation,
        report.recovered.values().sum::<u64>(),
        report.lost.len(),
        report.moved_aside.join(", ")
    );
    Ok(report)
}

/// Read what the damaged database still gives, one record kind at a time (sled may
/// panic or fail on one range and read the next).
fn salvage(meta_dir: &Path) -> Salvage {
    let mut s = Salvage {
        pairs: State::new(),
        generation: 0,
        failed: Vec::new(),
    };
    if !meta_dir.exists() {
        s.failed.push("the database directory is gone".into());
        return s;
    }
    let db = match quiet::catch(|| MetaDb::open(meta_dir)) {
        Ok(Ok(db)) => db,
        Ok(Err(e)) => {
            s.failed.push(format!("the database does not open: {e}"));
            return s;
        }
        Err(p) => {
            s.failed
                .push(format!("the database does not open (sled panicked: {p})"));
            return s;
        }
    };
    if let Ok(Ok(g)) = quiet::catch(|| db.stored_gen()) {
        s.generation = g;
    }
    for prefix in keys::kind_prefixes().filter(|p| *p != meta::OBJECT_PREFIX) {
        let kind = keys::record_kind(prefix);
        match quiet::catch(|| db.scan(prefix)) {
            Ok(Ok(pairs)) => s
                .pairs
                .extend(pairs.into_iter().filter(|(k, _)| keys::journaled(k))),
            Ok(Err(e)) => s.failed.push(format!("{kind}: {e}")),
            Err(p) => s.failed.push(format!("{kind}: sled panicked ({p})")),
        }
    }
    s
}

/// The source of the new database: the journal when it can be read and is not
/// older than a complete salvage; else the salvage. Returns (source, generation,
/// state, lost).
fn choose(s: Salvage, loaded: Result<Option<Loaded>>) -> (String, u64, State, Vec<String>) {
    match loaded {
        Ok(Some(l)) if !(s.failed.is_empty() && s.generation > l.generation) => {
            let mut lost = l.damaged;
            if l.newest > l.generation {
                lost.push(format!(
                    "the journal's records after generation {} were replayed past a gap (up to {})",
                    l.generation, l.newest
                ));
            }
            (format!("journal {}", l.source), l.newest, l.state, lost)
        }
        other => {
            let mut lost = s.failed;
            match other {
                Err(e) => lost.push(format!("the journal is unreadable: {e}")),
                Ok(None) => lost.push("there is no journal".into()),
                Ok(Some(l)) => log::warn!(
                    "the journal (generation {}) is older than the complete database (generation {}): using the database",
                    l.generation,
                    s.generation
                ),
            }
            (
                "the damaged database (what it still yields)".into(),
                s.generation,
                s.pairs,
                lost,
            )
        }
    }
}

/// Rename each existing path of `paths` to `<name>.damaged-<unix seconds>` in `dir`.
fn move_aside(dir: &Path, paths: &[&Path]) -> Result<Vec<String>> {
    let stamp = crate::clock::unix_secs();
    let mut moved = Vec::new();
    for p in paths.iter().filter(|p| p.exists()) {
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        let mut to: PathBuf = dir.join(format!("{name}.damaged-{stamp}"));
        let mut n = 1;
        while to.exists() {
            n += 1;
            to = dir.join(format!("{name}.damaged-{stamp}-{n}"));
        }
        std::fs::rename(p, &to).map_err(|e| Error::io(*p, e))?;
        moved.push(to.display().to_string());
    }
    crate::durable::sync_dir(dir, crate::durable::Scope::Store).map_err(|e| Error::io(dir, e))?;
    Ok(moved)
}

/// Batches of this many records write the new database.
const BATCH: usize = 5_000;

/// Write `state` into a new database at `meta_dir` and anchor a journal on it.
/// Returns the records written, by kind.
fn write(meta_dir: &Path, journal_dir: &Path, state: &State) -> Result<BTreeMap<String, u64>> {
    let db = MetaDb::open(meta_dir)?;
    let mut recovered = BTreeMap::new();
    let mut ops = Vec::with_capacity(BATCH);
    for (k, v) in state {
        *recovered
            .entry(keys::record_kind(k).to_string())
            .or_insert(0u64) += 1;
        ops.push(MetaOp::Put(k.clone(), v.clone()));
        if ops.len() == BATCH {
            db.apply(std::mem::take(&mut ops))?;
        }
    }
    if !state.contains_key(meta::FORMAT_KEY) {
        ops.push(MetaOp::Put(
            meta::FORMAT_KEY.to_vec(),
            meta::FORMAT_VALUE.to_vec(),
        ));
    }
    db.apply(ops)?;
    let pairs = db.journaled_pairs()?;
    Journal::start(journal_dir, db.stored_gen()?, &pairs)?;
    Ok(recovered)
}
