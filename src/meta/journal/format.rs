//! Byte formats of the journal: file names, file headers, records and their payloads.
//!
//! Pure: no I/O. Every decoder bounds every length by the bytes remaining, so no input
//! makes it panic or allocate more than the input's own size.

use super::Change;

/// Magic of a segment file's header.
pub const SEGMENT_MAGIC: [u8; 8] = *b"TFJOURNL";
/// Magic of a snapshot file's header.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"TFJSNAPS";
/// Format version in every header.
pub const VERSION: u32 = 1;
/// Bytes of a header covered by its checksum: magic, version, reserved, number, generation.
const HEADER_SUMMED: usize = 8 + 4 + 4 + 8 + 8;
/// Header length: the summed part, then the first 8 bytes of its blake3.
pub const HEADER_LEN: usize = HEADER_SUMMED + 8;

/// Magic of a batch record (segments).
pub const BATCH_MAGIC: [u8; 4] = *b"TFJR";
/// Magic of a snapshot entry record (pairs).
pub const ENTRY_MAGIC: [u8; 4] = *b"TFJE";
/// Magic of a snapshot's end record (pair count and hash of all entry payloads).
pub const END_MAGIC: [u8; 4] = *b"TFJZ";
/// Record head: magic, payload length u32, generation u64, checksum.
pub const RECORD_HEAD_LEN: usize = 4 + 4 + 8 + CHECKSUM_LEN;
const CHECKSUM_LEN: usize = 16;
/// Largest payload a record may carry.
pub const MAX_PAYLOAD: usize = 256 << 20;
/// A snapshot entry record is closed once its payload passes this size.
pub const ENTRY_TARGET: usize = 1 << 20;
/// End record payload: pair count u64, blake3 of all entry payloads.
pub const END_PAYLOAD_LEN: usize = 8 + 32;

const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;

/// Suffix of a file being written; load ignores it, `start` removes it.
pub const TMP_SUFFIX: &str = ".tmp";

/// Which of the two journal files a name or header belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `seg-{n:08}.tfj`: batch records.
    Segment,
    /// `snap-{n:08}.tfs`: a whole state.
    Snapshot,
}

impl Kind {
    fn prefix_suffix(self) -> (&'static str, &'static str) {
        match self {
            Kind::Segment => ("seg-", ".tfj"),
            Kind::Snapshot => ("snap-", ".tfs"),
        }
    }

    /// The header magic of this kind of file.
    pub fn magic(self) -> [u8; 8] {
        match self {
            Kind::Segment => SEGMENT_MAGIC,
            Kind::Snapshot => SNAPSHOT_MAGIC,
        }
    }
}

/// The file name of segment or snapshot `n`.
pub fn file_name(kind: Kind, n: u64) -> String {
    let (p, s) = kind.prefix_suffix();
    format!("{p}{n:08}{s}")
}

/// Parse a journal file name (not a `.tmp`): its kind and number.
pub fn parse_name(name: &str) -> Option<(Kind, u64)> {
    [Kind::Segment, Kind::Snapshot]
        .into_iter()
        .find_map(|kind| {
            let (p, s) = kind.prefix_suffix();
            let digits = name.strip_prefix(p)?.strip_suffix(s)?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some((kind, digits.parse().ok()?))
        })
}

/// A file header: which file (number) and the generation it is anchored at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Segment or snapshot.
    pub kind: Kind,
    /// The number in the file name.
    pub number: u64,
    /// A snapshot's generation, or the generation a segment follows.
    pub generation: u64,
}

impl Header {
    /// The 40 header bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&self.kind.magic());
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        // 12..16: reserved, zero.
        b[16..24].copy_from_slice(&self.number.to_le_bytes());
        b[24..32].copy_from_slice(&self.generation.to_le_bytes());
        let sum = blake3::hash(&b[..HEADER_SUMMED]);
        b[HEADER_SUMMED..].copy_from_slice(&sum.as_bytes()[..8]);
        b
    }

    /// Decode and verify a header of the expected kind (`bytes` may be any length).
    pub fn decode(bytes: &[u8], kind: Kind) -> Result<Header, String> {
        let Some(b) = bytes.get(..HEADER_LEN) else {
            return Err(format!(
                "header truncated ({} of {HEADER_LEN} bytes)",
                bytes.len()
            ));
        };
        if b[0..8] != kind.magic() {
            return Err("bad header magic".into());
        }
        let sum = blake3::hash(&b[..HEADER_SUMMED]);
        if b[HEADER_SUMMED..] != sum.as_bytes()[..8] {
            return Err("header checksum mismatch".into());
        }
        let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(format!("unknown version {version}"));
        }
        Ok(Header {
            kind,
            number: u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
            generation: u64::from_le_bytes(b[24..32].try_into().expect("8 bytes")),
        })
    }
}

/// First 16 bytes of blake3 over length ‖ generation ‖ payload.
fn checksum(len: u32, generation: u64, payload: &[u8]) -> [u8; CHECKSUM_LEN] {
    let mut h = blake3::Hasher::new();
    h.update(&len.to_le_bytes());
    h.update(&generation.to_le_bytes());
    h.update(payload);
    let mut out = [0u8; CHECKSUM_LEN];
    out.copy_from_slice(&h.finalize().as_bytes()[..CHECKSUM_LEN]);
    out
}

/// A whole record. The caller keeps `payload` within [`MAX_PAYLOAD`].
pub fn encode_record(magic: [u8; 4], generation: u64, payload: &[u8]) -> Vec<u8> {
    debug_assert!(payload.len() <= MAX_PAYLOAD);
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(RECORD_HEAD_LEN + payload.len());
    out.extend_from_slice(&magic);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&checksum(len, generation, payload));
    out.extend_from_slice(payload);
    out
}

/// A record head as read, before its payload.
#[derive(Debug, Clone, Copy)]
pub struct RecordHead {
    /// The record's magic.
    pub magic: [u8; 4],
    /// Payload length (not yet bounded: see [`RecordHead::check_len`]).
    pub len: u32,
    /// The generation field.
    pub generation: u64,
    sum: [u8; CHECKSUM_LEN],
}

impl RecordHead {
    /// Split the fixed-size head.
    pub fn decode(b: &[u8; RECORD_HEAD_LEN]) -> RecordHead {
        RecordHead {
            magic: b[0..4].try_into().expect("4 bytes"),
            len: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            generation: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            sum: b[16..32].try_into().expect("16 bytes"),
        }
    }

    /// The payload length, if within the cap and the `remaining` bytes after the head.
    pub fn check_len(&self, remaining: u64) -> Result<usize, String> {
        let len = self.len as usize;
        if len > MAX_PAYLOAD {
            return Err(format!("length {len} over the {MAX_PAYLOAD}-byte limit"));
        }
        if len as u64 > remaining {
            return Err(format!(
                "length {len} runs past the end ({remaining} bytes left)"
            ));
        }
        Ok(len)
    }

    /// Whether `payload` matches the checksum.
    pub fn verify(&self, payload: &[u8]) -> bool {
        payload.len() == self.len as usize
            && checksum(self.len, self.generation, payload) == self.sum
    }
}

/// Parse and verify the record of `magic` at `pos` in `buf`: its generation, payload
/// and end offset.
pub fn parse_record(buf: &[u8], pos: usize, magic: [u8; 4]) -> Result<(u64, &[u8], usize), String> {
    let rest = buf.get(pos..).unwrap_or_default();
    let Some(head) = rest.get(..RECORD_HEAD_LEN) else {
        return Err(format!("record head truncated ({} bytes)", rest.len()));
    };
    let head = RecordHead::decode(head.try_into().expect("head length"));
    if head.magic != magic {
        return Err("bad record magic".into());
    }
    let len = head.check_len((rest.len() - RECORD_HEAD_LEN) as u64)?;
    let payload = &rest[RECORD_HEAD_LEN..RECORD_HEAD_LEN + len];
    if !head.verify(payload) {
        return Err("record checksum mismatch".into());
    }
    Ok((head.generation, payload, pos + RECORD_HEAD_LEN + len))
}

/// The payload of a batch: count u32, then per change tag, key, (value).
pub fn encode_changes(changes: &[Change]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(changes.len() as u32).to_le_bytes());
    for c in changes {
        match c {
            Change::Put(k, v) => put_pair(&mut out, k, v),
            Change::Delete(k) => {
                out.push(TAG_DELETE);
                put_bytes(&mut out, k);
            }
        }
    }
    out
}

/// Bytes [`encode_changes`] spends on one put of `k`, `v`.
pub fn pair_len(k: &[u8], v: &[u8]) -> usize {
    1 + 4 + k.len() + 4 + v.len()
}

/// Append one put (tag, key, value) to a payload being built.
pub fn put_pair(out: &mut Vec<u8>, k: &[u8], v: &[u8]) {
    out.push(TAG_PUT);
    put_bytes(out, k);
    put_bytes(out, v);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Decode a batch payload.
pub fn decode_changes(payload: &[u8]) -> Result<Vec<Change>, String> {
    let mut out = Vec::new();
    walk(payload, |tag, k, v| {
        out.push(match v {
            Some(v) if tag == TAG_PUT => Change::Put(k.to_vec(), v.to_vec()),
            _ => Change::Delete(k.to_vec()),
        });
        Ok(())
    })?;
    Ok(out)
}

/// Walk a snapshot entry payload (puts only), calling `f` per pair; the pair count.
pub fn for_each_put(payload: &[u8], mut f: impl FnMut(&[u8], &[u8])) -> Result<u64, String> {
    walk(payload, |tag, k, v| match v {
        Some(v) if tag == TAG_PUT => {
            f(k, v);
            Ok(())
        }
        _ => Err("delete in a snapshot entry".into()),
    })
}

/// Walk a changes payload: `f(tag, key, value)` per change; the change count.
fn walk(
    payload: &[u8],
    mut f: impl FnMut(u8, &[u8], Option<&[u8]>) -> Result<(), String>,
) -> Result<u64, String> {
    let mut r = Cursor {
        buf: payload,
        pos: 0,
    };
    let count = r.u32()?;
    for _ in 0..count {
        let tag = r.take(1)?[0];
        let key = r.sized()?;
        match tag {
            TAG_PUT => f(tag, key, Some(r.sized()?))?,
            TAG_DELETE => f(tag, key, None)?,
            t => {
                return Err(format!(
                    "unknown change tag {t} at payload offset {}",
                    r.pos - 5 - key.len()
                ));
            }
        }
    }
    if r.pos != payload.len() {
        return Err(format!(
            "{} trailing bytes after {count} changes",
            payload.len() - r.pos
        ));
    }
    Ok(u64::from(count))
}

/// The end record payload of a snapshot.
pub fn encode_end(count: u64, hash: &blake3::Hash) -> [u8; END_PAYLOAD_LEN] {
    let mut b = [0u8; END_PAYLOAD_LEN];
    b[..8].copy_from_slice(&count.to_le_bytes());
    b[8..].copy_from_slice(hash.as_bytes());
    b
}

/// Decode an end record payload: pair count and hash of the entry payloads.
pub fn decode_end(payload: &[u8]) -> Result<(u64, [u8; 32]), String> {
    if payload.len() != END_PAYLOAD_LEN {
        return Err(format!(
            "end record of {} bytes, not {END_PAYLOAD_LEN}",
            payload.len()
        ));
    }
    let count = u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"));
    Ok((count, payload[8..].try_into().expect("32 bytes")))
}

/// A bounded reader over a payload.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(format!(
                "{n} bytes wanted at payload offset {}, {left} left",
                self.pos
            ));
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn sized(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}
