//! Metadata journal: a checksummed, append-only record of every metadata batch, with
//! snapshots, from which the sled database can be rebuilt when it is damaged.
//!
//! Owns: one directory of files, and nothing else in it.
//! - `snap-{n:08}.tfs`: snapshot `n`, a whole state at a generation. A 40-byte header
//!   (magic `TFJSNAPS`, version u32 = 1, reserved u32 = 0, number u64, generation u64,
//!   first 8 bytes of blake3 of the preceding 32), then entry records (`TFJE`, ~1 MiB
//!   of put pairs each), then one end record (`TFJZ`: pair count u64 and the blake3
//!   of all entry payloads in order). Whole only if everything verifies.
//! - `seg-{n:08}.tfj`: segment `n`, the same header (magic `TFJOURNL`, generation = the
//!   generation of the snapshot it follows), then one batch record (`TFJR`) per batch.
//! - A record: magic (4), payload length u32, generation u64, checksum (first 16
//!   bytes of blake3 over length ‖ generation ‖ payload), payload. A batch payload is
//!   count u32, then per change tag u8 (1 put, 2 delete), key length u32, key, and for
//!   a put value length u32, value. Little-endian throughout; payloads ≤ 256 MiB.
//! - `*.tmp`: a snapshot being written; ignored by [`load`], removed by
//!   [`Journal::start`] and [`Journal::rotate`].
//!
//! Invariants:
//! - A batch is acknowledged ([`Journal::append`] returns) only once its record is
//!   fdatasync'd; a snapshot becomes visible (renamed from `.tmp`) only once it and the
//!   segment that follows it are durable, and that segment already holds every record
//!   above the snapshot's generation that went to the segment before it.
//! - Segment `n` continues snapshot `n`; every segment numbered at or above a snapshot
//!   follows it. Retiring keeps the previous whole snapshot and the segments from it
//!   on, so one damaged snapshot always has a fallback.
//! - Reading never panics and never trusts a length: damage is reported in
//!   [`Loaded::damaged`], not raised, unless no snapshot at all is whole.
//!
//! Never: appends to a segment it did not create in this process (an old one may end
//! in a torn write), nor touches files other than its own names.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::durable::{self, Scope};
use crate::error::{Error, Result};

mod format;
mod load;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use format::{Header, Kind};

/// A metadata state: every key with its value.
pub type State = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// One change of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Set a key to a value.
    Put(Vec<u8>, Vec<u8>),
    /// Remove a key.
    Delete(Vec<u8>),
}

/// A segment past this size asks to be rotated.
pub const SEGMENT_TARGET: u64 = 16 << 20;
/// This many segments from the newest snapshot on ask to be rotated.
const SEGMENTS_DUE: u64 = 64;

/// What [`load`] read.
#[derive(Debug)]
pub struct Loaded {
    /// The replayed state: the chosen snapshot, then every record with a generation above it, in generation order.
    pub state: State,
    /// The highest generation G such that the snapshot and every record up to G are present with no gap.
    pub generation: u64,
    /// The highest generation of any record read (above `generation` when a record is missing or damaged).
    pub newest: u64,
    /// Which files it came from, e.g. "snap-00000003.tfs (generation 120) + seg-00000003..seg-00000005".
    pub source: String,
    /// One line per thing that could not be read, naming file and offset: a record failing its checksum, a torn tail, a damaged snapshot that was passed over, missing generations "generations 7..9 missing".
    pub damaged: Vec<String>,
    /// Number of the last segment (resume starts the next one). The highest number of
    /// any snapshot or segment file, so the next segment follows every snapshot.
    pub last_segment: u64,
    /// Number of the snapshot the state started from (for [`Journal::due`] after resume).
    snapshot: u64,
}

/// Read the journal in `dir`. `Ok(None)` when there is no journal (directory missing, or holding no snapshot or segment file). `Err(Error::corrupt(..))` when there are files but no whole snapshot to start from (say which files and why). Damaged records are skipped and named in `damaged`, never an error. Never panics on any bytes.
pub fn load(dir: &Path) -> Result<Option<Loaded>> {
    load::load(dir)
}

/// The segment being appended to.
struct Segment {
    file: File,
    path: PathBuf,
    number: u64,
}

struct Writer {
    segment: Arc<Segment>,
    /// Bytes written to the segment.
    len: u64,
    /// Highest generation appended to this segment (0 when none).
    max_generation: u64,
    /// Number of the newest snapshot (the one this journal wrote or loaded from).
    snapshot: u64,
}

/// The journal writer. Appends are serialised; their fdatasyncs are not.
pub struct Journal {
    dir: PathBuf,
    writer: Mutex<Writer>,
    /// Held for a whole rotation (one snapshot at a time).
    rotation: Mutex<()>,
    target: AtomicU64,
}

impl Journal {
    /// Anchor a new journal in `dir` (created if missing, and its parent fsync'd then): writes snapshot N of `state` at `generation` and an empty segment N based at `generation` (N = 1 + the highest number of any snap/seg file present, 1 if none), all durable; then retires old files: keeps the previous whole snapshot and the segments numbered from it on (the fallback), deletes anything older and any *.tmp. Returns a journal appending to segment N.
    pub fn start(dir: &Path, generation: u64, state: &State) -> Result<Journal> {
        if !dir.is_dir() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                durable::sync_dir(parent, Scope::Meta).map_err(|e| Error::io(parent, e))?;
            }
        }
        let n = next_number(dir)?;
        let tmp = write_snapshot(dir, n, generation, state)?;
        let segment = create_segment(dir, n, generation)?;
        publish_snapshot(dir, n, &tmp)?;
        retire(dir, n, None)?;
        Ok(Journal::new(dir, segment, n))
    }

    /// Continue after `load` returned `loaded` and the caller checked it matches the database: creates a new segment `loaded.last_segment + 1` based at `loaded.generation` (never appends to an old segment, which may end in a torn write). Keeps all files.
    pub fn resume(dir: &Path, loaded: &Loaded) -> Result<Journal> {
        let n = loaded.last_segment.checked_add(1).ok_or_else(|| {
            Error::corrupt(
                format!("journal {}", dir.display()),
                "segment numbers exhausted",
            )
        })?;
        let segment = create_segment(dir, n, loaded.generation)?;
        durable::sync_dir(dir, Scope::Meta).map_err(|e| Error::io(dir, e))?;
        Ok(Journal::new(dir, segment, loaded.snapshot))
    }

    fn new(dir: &Path, segment: Segment, snapshot: u64) -> Journal {
        Journal {
            dir: dir.to_path_buf(),
            writer: Mutex::new(Writer {
                segment: Arc::new(segment),
                len: format::HEADER_LEN as u64,
                max_generation: 0,
                snapshot,
            }),
            rotation: Mutex::new(()),
            target: AtomicU64::new(SEGMENT_TARGET),
        }
    }

    fn writer(&self) -> MutexGuard<'_, Writer> {
        // Every field is updated only after its write succeeded: consistent after a panic.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Append one batch's record and make it durable (fdatasync) before returning. Called concurrently from several threads; generations may arrive out of order by a few (batch 5's append can come before batch 4's). Serialise the write, not necessarily the sync.
    pub fn append(&self, generation: u64, changes: &[Change]) -> Result<()> {
        let payload = format::encode_changes(changes);
        if payload.len() > format::MAX_PAYLOAD {
            return Err(Error::ObjectTooLarge {
                what: format!("journal record of generation {generation}"),
                len: payload.len() as u64,
                max: format::MAX_PAYLOAD as u64,
            });
        }
        let record = format::encode_record(format::BATCH_MAGIC, generation, &payload);
        let segment = {
            let mut w = self.writer();
            let seg = Arc::clone(&w.segment);
            if let Err(e) = seg.file.write_all_at(&record, w.len) {
                // Best effort: no partial record in front of the next one.
                let _ = seg.file.set_len(w.len);
                return Err(Error::io(&seg.path, e));
            }
            w.len += record.len() as u64;
            w.max_generation = w.max_generation.max(generation);
            seg
        };
        durable::sync_data(&segment.file, Scope::Meta).map_err(|e| Error::io(&segment.path, e))
    }

    /// The current segment reached SEGMENT_TARGET, or there are 64+ segments since the newest snapshot (each `resume` adds one).
    pub fn due(&self) -> bool {
        let w = self.writer();
        w.len >= self.target.load(Ordering::Relaxed)
            || w.segment.number.saturating_sub(w.snapshot) + 1 >= SEGMENTS_DUE
    }

    /// Like `start` on this journal: a new snapshot + empty segment, then retire old files. Appends after this go to the new segment. The caller guarantees no append with a generation ≤ `generation` comes after.
    ///
    /// Records above `generation` already appended to the old segment are copied into
    /// the new one before the snapshot becomes visible.
    pub fn rotate(&self, generation: u64, state: &State) -> Result<()> {
        let _rotation = self.rotation.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = &self.dir;
        let n = next_number(dir)?;
        let tmp = write_snapshot(dir, n, generation, state)?;
        let segment = create_segment(dir, n, generation)?;
        let previous = {
            let mut w = self.writer();
            let carried = if w.max_generation > generation {
                carry_over(&w.segment, &segment, generation)?
            } else {
                0
            };
            w.segment = Arc::new(segment);
            w.len = (format::HEADER_LEN + carried) as u64;
            if carried == 0 {
                w.max_generation = 0;
            }
            std::mem::replace(&mut w.snapshot, n)
        };
        publish_snapshot(dir, n, &tmp)?;
        retire(dir, n, Some(previous))
    }

    /// Test hook: a smaller rotation target.
    #[cfg(test)]
    pub fn set_target(&self, bytes: u64) {
        self.target.store(bytes, Ordering::Relaxed);
    }
}

fn path_of(dir: &Path, kind: Kind, n: u64) -> PathBuf {
    dir.join(format::file_name(kind, n))
}

/// 1 + the highest number of any snapshot or segment in `dir`, 1 if none.
fn next_number(dir: &Path) -> Result<u64> {
    let listing = load::list(dir)?.unwrap_or_default();
    match listing.highest() {
        None => Ok(1),
        Some(h) => h.checked_add(1).ok_or_else(|| {
            Error::corrupt(
                format!("journal {}", dir.display()),
                "file numbers exhausted",
            )
        }),
    }
}

/// Write snapshot `n` of `state` to its `.tmp` name and fsync it; the `.tmp` path.
fn write_snapshot(dir: &Path, n: u64, generation: u64, state: &State) -> Result<PathBuf> {
    let tmp = dir.join(format!(
        "{}{}",
        format::file_name(Kind::Snapshot, n),
        format::TMP_SUFFIX
    ));
    let io = |e| Error::io(&tmp, e);
    let file = File::create(&tmp).map_err(io)?;
    let mut out = BufWriter::with_capacity(1 << 20, &file);
    let header = Header {
        kind: Kind::Snapshot,
        number: n,
        generation,
    };
    out.write_all(&header.encode()).map_err(io)?;
    let (mut count, mut hash) = (0u64, blake3::Hasher::new());
    let mut payload = Vec::with_capacity(format::ENTRY_TARGET + 4096);
    let mut pairs = 0u32;
    let mut flush = |payload: &mut Vec<u8>, pairs: &mut u32| {
        payload[..4].copy_from_slice(&pairs.to_le_bytes());
        hash.update(payload);
        let record = format::encode_record(format::ENTRY_MAGIC, generation, payload);
        payload.clear();
        *pairs = 0;
        out.write_all(&record)
    };
    for (k, v) in state {
        let len = format::pair_len(k, v);
        if len + 4 > format::MAX_PAYLOAD {
            return Err(Error::ObjectTooLarge {
                what: "journal snapshot pair".into(),
                len: len as u64,
                max: format::MAX_PAYLOAD as u64 - 4,
            });
        }
        if pairs > 0 && payload.len() + len > format::ENTRY_TARGET {
            flush(&mut payload, &mut pairs).map_err(io)?;
        }
        if pairs == 0 {
            payload.extend_from_slice(&[0; 4]);
        }
        format::put_pair(&mut payload, k, v);
        pairs += 1;
        count += 1;
    }
    if pairs > 0 {
        flush(&mut payload, &mut pairs).map_err(io)?;
    }
    let end = format::encode_end(count, &hash.finalize());
    out.write_all(&format::encode_record(format::END_MAGIC, generation, &end))
        .map_err(io)?;
    out.flush().map_err(io)?;
    drop(out);
    durable::sync_all(&file, Scope::Meta).map_err(io)?;
    Ok(tmp)
}

/// Rename snapshot `n` from `tmp` to its name and fsync `dir` (which also makes the
/// segment created before it durable in the directory).
fn publish_snapshot(dir: &Path, n: u64, tmp: &Path) -> Result<()> {
    let path = path_of(dir, Kind::Snapshot, n);
    std::fs::rename(tmp, &path).map_err(|e| Error::io(&path, e))?;
    durable::sync_dir(dir, Scope::Meta).map_err(|e| Error::io(dir, e))
}

/// Create segment `n` following `generation`, its header durable.
fn create_segment(dir: &Path, n: u64, generation: u64) -> Result<Segment> {
    let path = path_of(dir, Kind::Segment, n);
    let io = |e| Error::io(&path, e);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io)?;
    let header = Header {
        kind: Kind::Segment,
        number: n,
        generation,
    };
    file.write_all_at(&header.encode(), 0).map_err(io)?;
    durable::sync_data(&file, Scope::Meta).map_err(io)?;
    Ok(Segment {
        file,
        path,
        number: n,
    })
}

/// Copy the records of `old` above `generation` into the fresh segment `new`, durable;
/// the bytes copied.
fn carry_over(old: &Segment, new: &Segment, generation: u64) -> Result<usize> {
    let bytes = std::fs::read(&old.path).map_err(|e| Error::io(&old.path, e))?;
    let records = load::records_above(&bytes, old.number, generation);
    let io = |e| Error::io(&new.path, e);
    new.file
        .write_all_at(&records, format::HEADER_LEN as u64)
        .map_err(io)?;
    durable::sync_data(&new.file, Scope::Meta).map_err(io)?;
    Ok(records.len())
}

/// After snapshot `n` is durable: keep the previous whole snapshot (`trusted` when the
/// caller knows it, else the newest below `n` that verifies) and the segments from it
/// on; remove older snapshots and segments and every `*.tmp`.
fn retire(dir: &Path, n: u64, trusted: Option<u64>) -> Result<()> {
    let listing = load::list(dir)?.unwrap_or_default();
    let mut keep = trusted.filter(|t| *t < n && listing.snapshots.contains(t));
    if keep.is_none() {
        for &s in listing.snapshots.range(..n).rev() {
            if load::read_snapshot(&path_of(dir, Kind::Snapshot, s), s, |_, _| {})?.is_ok() {
                keep = Some(s);
                break;
            }
        }
    }
    let floor = keep.unwrap_or(n);
    let mut doomed = listing.tmp;
    doomed.extend(
        listing
            .snapshots
            .range(..floor)
            .map(|&s| path_of(dir, Kind::Snapshot, s)),
    );
    doomed.extend(
        listing
            .segments
            .range(..floor)
            .map(|&s| path_of(dir, Kind::Segment, s)),
    );
    for path in &doomed {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    if !doomed.is_empty() {
        durable::sync_dir(dir, Scope::Meta).map_err(|e| Error::io(dir, e))?;
    }
    Ok(())
}
