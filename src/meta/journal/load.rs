//! Reading a journal directory: the snapshot to start from, the segments after it,
//! replay in generation order, and one line of `damaged` per thing that did not read.
//!
//! Never panics on any bytes: a segment is read whole (its size is what it is), a
//! snapshot is streamed record by record, and every length is bounded by the bytes
//! left in the file before anything is allocated for it.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use super::format::{self, Header, Kind, RecordHead};
use super::{Change, Loaded, State};
use crate::error::{Error, Result};

/// The journal files of a directory, by number.
#[derive(Debug, Default)]
pub(super) struct Listing {
    pub snapshots: BTreeSet<u64>,
    pub segments: BTreeSet<u64>,
    /// `*.tmp` files: leftovers of an interrupted write.
    pub tmp: Vec<PathBuf>,
}

impl Listing {
    /// The highest number of any snapshot or segment.
    pub fn highest(&self) -> Option<u64> {
        let s = self.snapshots.last().copied();
        let g = self.segments.last().copied();
        s.max(g)
    }
}

/// List `dir`; `None` when it does not exist.
pub(super) fn list(dir: &Path) -> Result<Option<Listing>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut l = Listing::default();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(format::TMP_SUFFIX) {
            l.tmp.push(entry.path());
            continue;
        }
        match format::parse_name(name) {
            Some((Kind::Snapshot, n)) => l.snapshots.insert(n),
            Some((Kind::Segment, n)) => l.segments.insert(n),
            None => false,
        };
    }
    Ok(Some(l))
}

/// Read the journal in `dir` (see [`super::load`]).
pub fn load(dir: &Path) -> Result<Option<Loaded>> {
    let Some(listing) = list(dir)? else {
        return Ok(None);
    };
    let Some(highest) = listing.highest() else {
        return Ok(None);
    };
    let mut damaged = Vec::new();
    let (snap, generation, mut state) = choose_snapshot(dir, &listing, &mut damaged)?;

    let mut records = Vec::new();
    let segments: Vec<u64> = listing.segments.range(snap..).copied().collect();
    for &n in &segments {
        let path = dir.join(format::file_name(Kind::Segment, n));
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let name = format::file_name(Kind::Segment, n);
        records.extend(
            read_segment(&bytes, n, &name, &mut damaged)
                .into_iter()
                .map(|r| (r.generation, r.changes)),
        );
    }
    let (contiguous, newest) = replay(&mut state, generation, records, &mut damaged);

    let mut source = format!(
        "{} (generation {generation})",
        format::file_name(Kind::Snapshot, snap)
    );
    match (segments.first(), segments.last()) {
        (Some(a), Some(b)) if a == b => source += &format!(" + {}", seg_stem(*a)),
        (Some(a), Some(b)) => source += &format!(" + {}..{}", seg_stem(*a), seg_stem(*b)),
        _ => {}
    }
    Ok(Some(Loaded {
        state,
        generation: contiguous,
        newest,
        source,
        damaged,
        last_segment: highest,
        snapshot: snap,
    }))
}

fn seg_stem(n: u64) -> String {
    format!("seg-{n:08}")
}

/// The newest whole snapshot: its number, generation and state. Passed-over ones go
/// to `damaged`; none whole is an error naming every snapshot and why.
fn choose_snapshot(
    dir: &Path,
    listing: &Listing,
    damaged: &mut Vec<String>,
) -> Result<(u64, u64, State)> {
    let mut why = Vec::new();
    for &n in listing.snapshots.iter().rev() {
        let name = format::file_name(Kind::Snapshot, n);
        let mut state = State::new();
        match read_snapshot(&dir.join(&name), n, |k, v| {
            state.insert(k.to_vec(), v.to_vec());
        })? {
            Ok(generation) => {
                damaged.extend(why.iter().map(|w| format!("{w}; fell back to {name}")));
                return Ok((n, generation, state));
            }
            Err(reason) => why.push(format!("{name} damaged: {reason}")),
        }
    }
    let reason = if why.is_empty() {
        let segs: Vec<String> = listing.segments.iter().map(|&n| seg_stem(n)).collect();
        format!("no snapshot file, only segments {}", segs.join(", "))
    } else {
        format!("no whole snapshot: {}", why.join("; "))
    };
    Err(Error::corrupt(format!("journal {}", dir.display()), reason))
}

/// Stream and verify snapshot `n`, calling `on_put` per pair: `Ok(Ok(generation))`
/// when whole, `Ok(Err(why))` when damaged, `Err` on an I/O error.
pub(super) fn read_snapshot(
    path: &Path,
    n: u64,
    mut on_put: impl FnMut(&[u8], &[u8]),
) -> Result<std::result::Result<u64, String>> {
    let io = |e| Error::io(path, e);
    let file = File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut r = BufReader::with_capacity(1 << 16, file);
    let mut head = [0u8; format::HEADER_LEN];
    if !read_full(&mut r, &mut head).map_err(io)? {
        return Ok(Err(format!("header truncated ({size} bytes)")));
    }
    let header = match Header::decode(&head, Kind::Snapshot) {
        Ok(h) if h.number != n => return Ok(Err(format!("header says number {}", h.number))),
        Ok(h) => h,
        Err(why) => return Ok(Err(why)),
    };
    let mut pos = format::HEADER_LEN as u64;
    let (mut count, mut hash) = (0u64, blake3::Hasher::new());
    let mut payload = Vec::new();
    loop {
        let at = pos;
        let mut rh = [0u8; format::RECORD_HEAD_LEN];
        if !read_full(&mut r, &mut rh).map_err(io)? {
            return Ok(Err(format!("no end record (truncated at offset {at})")));
        }
        pos += rh.len() as u64;
        let head = RecordHead::decode(&rh);
        let len = match head.check_len(size.saturating_sub(pos)) {
            Ok(len) => len,
            Err(why) => return Ok(Err(format!("record at offset {at}: {why}"))),
        };
        payload.resize(len, 0);
        if !read_full(&mut r, &mut payload).map_err(io)? {
            return Ok(Err(format!("record at offset {at} truncated")));
        }
        pos += len as u64;
        if !head.verify(&payload) || head.generation != header.generation {
            return Ok(Err(format!(
                "record at offset {at}: checksum or generation mismatch"
            )));
        }
        match head.magic {
            format::ENTRY_MAGIC => match format::for_each_put(&payload, &mut on_put) {
                Ok(c) => {
                    count += c;
                    hash.update(&payload);
                }
                Err(why) => return Ok(Err(format!("entry record at offset {at}: {why}"))),
            },
            format::END_MAGIC => {
                return Ok(check_end(&payload, count, &hash, pos, size).map(|()| header.generation));
            }
            _ => return Ok(Err(format!("bad record magic at offset {at}"))),
        }
    }
}

fn check_end(
    payload: &[u8],
    count: u64,
    hash: &blake3::Hasher,
    pos: u64,
    size: u64,
) -> std::result::Result<(), String> {
    let (want_count, want_hash) = format::decode_end(payload)?;
    if want_count != count {
        return Err(format!(
            "end record counts {want_count} pairs, entries hold {count}"
        ));
    }
    if want_hash != *hash.finalize().as_bytes() {
        return Err("end record hash does not match the entries".into());
    }
    if pos != size {
        return Err(format!("{} bytes after the end record", size - pos));
    }
    Ok(())
}

/// Fill `buf`; `false` at end of file before it is full.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    match r.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// One verified batch record of a segment.
#[derive(Debug)]
pub(super) struct Found {
    pub generation: u64,
    pub changes: Vec<Change>,
    /// The record's bytes in the segment.
    pub span: std::ops::Range<usize>,
}

/// Every verified record of segment `n` (`bytes` = the whole file), in file order.
/// Damage goes to `damaged`: a bad header skips the segment; a bad record is skipped
/// up to the next `TFJR` that verifies, or to the end (a torn tail).
pub(super) fn read_segment(
    bytes: &[u8],
    n: u64,
    name: &str,
    damaged: &mut Vec<String>,
) -> Vec<Found> {
    match Header::decode(bytes, Kind::Segment) {
        Ok(h) if h.number == n => {}
        Ok(h) => {
            damaged.push(format!(
                "{name}: header says number {}; segment skipped",
                h.number
            ));
            return Vec::new();
        }
        Err(why) => {
            damaged.push(format!("{name}: damaged header ({why}); segment skipped"));
            return Vec::new();
        }
    }
    let mut out = Vec::new();
    let mut pos = format::HEADER_LEN;
    while pos < bytes.len() {
        match parse_batch(bytes, pos) {
            Ok(found) => {
                pos = found.span.end;
                out.push(found);
            }
            Err(why) => match resync(bytes, pos + 1) {
                Some(next) => {
                    damaged.push(format!(
                        "{name} offset {pos}: {why}; skipped {} bytes",
                        next - pos
                    ));
                    pos = next;
                }
                None => {
                    damaged.push(format!(
                        "{name} offset {pos}: torn tail of {} bytes ({why})",
                        bytes.len() - pos
                    ));
                    break;
                }
            },
        }
    }
    out
}

fn parse_batch(bytes: &[u8], pos: usize) -> std::result::Result<Found, String> {
    let (generation, payload, end) = format::parse_record(bytes, pos, format::BATCH_MAGIC)?;
    let changes = format::decode_changes(payload)?;
    Ok(Found {
        generation,
        changes,
        span: pos..end,
    })
}

/// The offset of the next batch record at or after `from` that verifies.
fn resync(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(i) = bytes
        .get(at..)?
        .windows(4)
        .position(|w| w == format::BATCH_MAGIC)
    {
        let pos = at + i;
        if parse_batch(bytes, pos).is_ok() {
            return Some(pos);
        }
        at = pos + 1;
    }
    None
}

/// Apply the records above `base` in generation order (stable; a repeated generation
/// applies once). The contiguous generation and the newest; gaps go to `damaged`.
fn replay(
    state: &mut State,
    base: u64,
    mut records: Vec<(u64, Vec<Change>)>,
    damaged: &mut Vec<String>,
) -> (u64, u64) {
    records.sort_by_key(|r| r.0);
    let (mut contiguous, mut last, mut gap) = (base, base, false);
    let newest = records.last().map_or(base, |r| r.0.max(base));
    for (generation, changes) in records {
        if generation <= last {
            continue;
        }
        if generation > last + 1 {
            damaged.push(match generation - last {
                2 => format!("generation {} missing", last + 1),
                _ => format!("generations {}..{} missing", last + 1, generation - 1),
            });
            gap = true;
        }
        if !gap {
            contiguous = generation;
        }
        last = generation;
        apply(state, changes);
    }
    (contiguous, newest)
}

/// Apply one batch to a state.
pub(super) fn apply(state: &mut State, changes: Vec<Change>) {
    for c in changes {
        match c {
            Change::Put(k, v) => state.insert(k, v),
            Change::Delete(k) => state.remove(&k),
        };
    }
}

/// The verified records of `bytes` (a segment) with a generation above `above`, as
/// bytes to copy into another segment.
pub(super) fn records_above(bytes: &[u8], n: u64, above: u64) -> Vec<u8> {
    let mut ignored = Vec::new();
    let mut out = Vec::new();
    for f in read_segment(bytes, n, "", &mut ignored) {
        if f.generation > above {
            out.extend_from_slice(&bytes[f.span]);
        }
    }
    out
}
