//! Opening a store directory: the descriptor, the metadata database's format
//! marker, and finding the last pack.
//!
//! Owns: `DIR/treefork.store` (format tag + version), the create-or-refuse rule
//! (only a missing or empty directory becomes a new store), and the check of the
//! metadata database at every open: it opens without a sled panic, holds its format
//! marker, and agrees with its journal (`meta::journaled`).
//! Invariant: a store is never served from a database that failed the check; only
//! `fsck --repair` goes on, after rebuilding it (`super::rebuild`).

use std::fs::{self, File};
use std::path::Path;

use super::metastore::MetaStore;
use crate::error::{Error, Result};
use crate::meta::{self, MetaDb, MetaOp};

/// Name of the store descriptor file.
pub const STORE_FILE: &str = "treefork.store";
/// Format tag in the descriptor.
pub const STORE_FORMAT: &str = "treefork-store";
/// Current store layout version. 2 added delta records (codec 2); a version-1 store
/// (no deltas) is accepted and marked 2 when opened, so that an older treefork refuses
/// it by its descriptor instead of failing on its first delta record. 3 changed the
/// checkpoint and session record formats (`parents`, `meta`: `refs`, `session`) and
/// added block-map file nodes (`M` index, `B` leaf: `tree`), which an older treefork
/// would report as corrupt.
pub const STORE_VERSION: u32 = 3;

#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct StoreDescriptor {
    pub(super) format: String,
    pub(super) version: u32,
}

/// Check the bytes of a store descriptor (`treefork.store`); `what` names it in
/// errors. Returns the store's version (1 or [`STORE_VERSION`]).
pub fn check_descriptor(what: &str, bytes: &[u8]) -> Result<u32> {
    let d: StoreDescriptor = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt(what, format!("unreadable: {e}")))?;
    if d.format != STORE_FORMAT || !(1..=STORE_VERSION).contains(&d.version) {
        return Err(Error::corrupt(
            what,
            format!("unsupported format {} version {}", d.format, d.version),
        ));
    }
    Ok(d.version)
}

fn write_descriptor(dir: &Path) -> Result<()> {
    let d = StoreDescriptor {
        format: STORE_FORMAT.into(),
        version: STORE_VERSION,
    };
    let tmp = dir.join("treefork.store.tmp");
    let path = dir.join(STORE_FILE);
    fs::write(&tmp, serde_json::to_vec_pretty(&d).unwrap()).map_err(|e| Error::io(&tmp, e))?;
    File::open(&tmp)
        .and_then(|f| crate::durable::sync_all(&f, crate::durable::Scope::Store))
        .map_err(|e| Error::io(&tmp, e))?;
    fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    sync_dir(dir)
}

/// fsync a directory, so the entries created or removed in it are durable.
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    crate::durable::sync_dir(dir, crate::durable::Scope::Store).map_err(|e| Error::io(dir, e))
}

/// Open (or create) the store at `dir`: its checked metadata database, the number
/// of its last pack, and (with `repair`, when the database was damaged) what the
/// rebuild did (see `PackStore::open` and `PackStore::open_for_repair`).
pub(super) fn open(
    dir: &Path,
    repair: bool,
) -> Result<(MetaDb, u32, Option<super::rebuild::RebuildReport>)> {
    let empty = check_or_create(dir)?;
    let meta_dir = dir.join("meta");
    let what = || format!("metadata database {}", meta_dir.display());
    let mut rebuilt = None;
    let db = match open_meta(dir, empty)? {
        Ok(db) => db,
        Err(damage) if repair => {
            rebuilt = Some(super::rebuild::rebuild(dir, &damage)?);
            open_meta(dir, false)?.map_err(|d| {
                Error::corrupt(what(), format!("still damaged after the rebuild: {d}"))
            })?
        }
        Err(damage) => {
            return Err(Error::corrupt(
                what(),
                format!(
                    "{damage}; the packs are untouched: `treefork fsck --repair` rebuilds it from its journal"
                ),
            ));
        }
    };
    let mut last = 0u32;
    for e in fs::read_dir(dir.join("packs")).map_err(|e| Error::io(dir, e))? {
        let name = e.map_err(|e| Error::io(dir, e))?.file_name();
        if let Some(n) = super::pack_number(&name) {
            last = last.max(n);
        }
    }
    Ok((db, last, rebuilt))
}

/// Open the metadata database of the store at `dir` and check it: `Ok(Err(why))`
/// when it is damaged (sled panicked, the format marker is missing or unknown, it
/// disagrees with its journal), with one line saying what was found. `new`: the
/// store was just created (a missing marker is written, not damage).
pub(super) fn open_meta(dir: &Path, new: bool) -> Result<std::result::Result<MetaDb, String>> {
    let meta_dir = dir.join("meta");
    let db = match meta::quiet::catch(|| MetaDb::open(&meta_dir)) {
        Ok(Ok(db)) => db,
        Ok(Err(Error::Meta(e))) => {
            return Ok(Err(format!("sled cannot open it: {}", meta::describe(&e))));
        }
        Ok(Err(e)) => return Err(e),
        Err(p) => return Ok(Err(format!("sled panicked while opening it ({p})"))),
    };
    // A new store's marker is written once its journal is attached (the journal's
    // first change): written before, the database would be a generation ahead of a
    // store without a journal, which reads as a lost journal (and warns so).
    if !new && let Err(why) = check_marker(&db, false)? {
        return Ok(Err(why));
    }
    if let meta::Verdict::Damaged(why) = db.attach_journal(&dir.join("journal"))? {
        return Ok(Err(why));
    }
    if new && let Err(why) = check_marker(&db, true)? {
        return Ok(Err(why));
    }
    Ok(Ok(db))
}

/// Create the store when `dir` is missing or empty (returns true), else check its
/// descriptor (upgrading a version-1 one).
fn check_or_create(dir: &Path) -> Result<bool> {
    let desc_path = dir.join(STORE_FILE);
    let empty = match fs::read_dir(dir) {
        Ok(mut it) => it.all(|e| {
            e.map(|e| e.file_name() == "lock" || e.file_name() == "daemon.log")
                .unwrap_or(false)
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(Error::io(dir, e)),
    };
    if empty {
        fs::create_dir_all(dir.join("packs")).map_err(|e| Error::io(dir, e))?;
        // The store directory's own entry (when this created it).
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
        write_descriptor(dir)?;
    } else {
        let bytes = fs::read(&desc_path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::Invalid(format!(
                    "{} is not a treefork store (no {STORE_FILE}) and is not empty",
                    dir.display()
                ))
            } else {
                Error::io(&desc_path, e)
            }
        })?;
        if check_descriptor(&desc_path.display().to_string(), &bytes)? < STORE_VERSION {
            write_descriptor(dir)?;
        }
        fs::create_dir_all(dir.join("packs")).map_err(|e| Error::io(dir, e))?;
    }
    Ok(empty)
}

/// sled treats an unreadable database as empty; the marker written at creation
/// tells "new store" from "lost database", so a damaged one is never mistaken for an
/// empty store (which would hide every session). `Ok(Err(why))`: damaged.
fn check_marker(db: &dyn MetaStore, new: bool) -> Result<std::result::Result<(), String>> {
    let marker = match meta::quiet::catch(|| db.get(meta::FORMAT_KEY)) {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => return Ok(Err(format!("reading its format marker failed: {e}"))),
        Err(p) => return Ok(Err(format!("sled panicked reading it ({p})"))),
    };
    match marker {
        Some(v) if v == meta::FORMAT_VALUE => Ok(Ok(())),
        Some(v) => Ok(Err(format!(
            "unknown format marker {:?}",
            String::from_utf8_lossy(&v)
        ))),
        None if new => {
            db.apply(vec![MetaOp::Put(
                meta::FORMAT_KEY.to_vec(),
                meta::FORMAT_VALUE.to_vec(),
            )])?;
            Ok(Ok(()))
        }
        None => Ok(Err(
            "format marker missing (the database was lost or reset)".into(),
        )),
    }
}
