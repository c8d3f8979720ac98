//! Pack file format: append-only files holding content-addressed objects.
//!
//! Owns: the byte layout of pack headers and object records, and scanning a pack
//! back into records (used to rebuild the index and by fsck).
//!
//! Layout (all integers little-endian):
//! ```text
//! pack header (16 bytes):  magic "TREEFORKPACK" (12) | version u32 = 1
//! record header (48 bytes): magic u32 = 0x4352_4654 ("TFRC") | kind u8 | codec u8 |
//!                           reserved u16 = 0 | raw_len u32 | stored_len u32 | id [32]
//! record payload:          stored_len bytes: raw when codec = 0; one zstd frame when
//!                           codec = 1; when codec = 2 (delta): base id [32] | one zstd
//!                           frame compressed with the base object's raw bytes as its
//!                           prefix (raw-content dictionary)
//! ```
//! A delta's base is an object of the same kind stored whole (codec 0 or 1), never
//! another delta, so reading any object takes at most two records.
//! Invariants: a record is never modified after it is written; a pack is only ever
//! appended to by the daemon that created it, and a new daemon always starts a new
//! pack, so a torn tail left by a crash is never followed by valid records.

use crate::error::{Error, Result};
use crate::id::ObjectId;

/// Magic at the start of every pack file.
pub const PACK_MAGIC: &[u8; 12] = b"TREEFORKPACK";
/// Current pack format version.
pub const PACK_VERSION: u32 = 1;
/// Size of the pack header.
pub const PACK_HEADER_LEN: u64 = PACK_MAGIC.len() as u64 + 4;
/// Magic at the start of every record ("TFRC" read as little-endian u32).
pub const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"TFRC");
/// Size of a record header.
pub const RECORD_HEADER_LEN: usize = 4 + 1 + 1 + 2 + 4 + 4 + 32;
/// Largest raw object accepted (a 64 KiB chunk or a big tree node).
pub const MAX_OBJECT_LEN: u32 = 64 << 20;

/// What an object is; selects the hash domain used to verify it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// File data.
    Chunk = 1,
    /// Tree node (directory, file block list, workspace root).
    Node = 2,
}

impl Kind {
    /// Decode the kind byte.
    pub fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Chunk),
            2 => Some(Kind::Node),
            _ => None,
        }
    }

    /// The id of `raw` bytes of this kind.
    pub fn hash(self, raw: &[u8]) -> ObjectId {
        match self {
            Kind::Chunk => crate::id::ChunkId::of(raw).into(),
            Kind::Node => crate::id::NodeId::of(raw).into(),
        }
    }
}

/// Payload encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Codec {
    /// Stored as is.
    Raw = 0,
    /// One zstd frame.
    Zstd = 1,
    /// Base object id + a zstd frame compressed against the base (see module doc).
    Delta = 2,
}

impl Codec {
    /// Decode the codec byte.
    pub fn from_u8(b: u8) -> Option<Codec> {
        match b {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            2 => Some(Codec::Delta),
            _ => None,
        }
    }
}

/// Decoded record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Object kind.
    pub kind: Kind,
    /// Payload codec.
    pub codec: Codec,
    /// Length once decoded.
    pub raw_len: u32,
    /// Length of the payload in the pack.
    pub stored_len: u32,
    /// Object id (hash of the raw bytes in `kind`'s domain).
    pub id: ObjectId,
}

/// The pack header bytes.
pub fn pack_header() -> Vec<u8> {
    let mut v = PACK_MAGIC.to_vec();
    v.extend_from_slice(&PACK_VERSION.to_le_bytes());
    v
}

/// Check a pack header.
pub fn check_pack_header(b: &[u8]) -> Result<()> {
    if b.len() < PACK_HEADER_LEN as usize || &b[..12] != PACK_MAGIC {
        return Err(Error::corrupt("pack header", "bad magic"));
    }
    let v = u32::from_le_bytes(b[12..16].try_into().unwrap());
    if v != PACK_VERSION {
        return Err(Error::corrupt(
            "pack header",
            format!("unsupported version {v}"),
        ));
    }
    Ok(())
}

impl RecordHeader {
    /// Encode to the fixed 48-byte form.
    pub fn encode(&self) -> [u8; RECORD_HEADER_LEN] {
        let mut b = [0u8; RECORD_HEADER_LEN];
        b[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        b[4] = self.kind as u8;
        b[5] = self.codec as u8;
        b[8..12].copy_from_slice(&self.raw_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.stored_len.to_le_bytes());
        b[16..48].copy_from_slice(&self.id.0);
        b
    }

    /// Decode and sanity-check a record header.
    pub fn decode(b: &[u8]) -> Result<RecordHeader> {
        if b.len() < RECORD_HEADER_LEN {
            return Err(Error::corrupt("pack record", "truncated header"));
        }
        if u32::from_le_bytes(b[0..4].try_into().unwrap()) != RECORD_MAGIC {
            return Err(Error::corrupt("pack record", "bad record magic"));
        }
        let kind = Kind::from_u8(b[4]).ok_or_else(|| Error::corrupt("pack record", "bad kind"))?;
        let codec = Codec::from_u8(b[5])
            .ok_or_else(|| Error::corrupt("pack record", format!("bad codec {}", b[5])))?;
        let raw_len = u32::from_le_bytes(b[8..12].try_into().unwrap());
        let stored_len = u32::from_le_bytes(b[12..16].try_into().unwrap());
        if raw_len > MAX_OBJECT_LEN || stored_len > MAX_OBJECT_LEN {
            return Err(Error::corrupt("pack record", "length out of range"));
        }
        if codec == Codec::Delta && (stored_len as usize) < DELTA_BASE_LEN {
            return Err(Error::corrupt(
                "pack record",
                "delta shorter than its base id",
            ));
        }
        let id = ObjectId(b[16..48].try_into().unwrap());
        Ok(RecordHeader {
            kind,
            codec,
            raw_len,
            stored_len,
            id,
        })
    }
}

/// Objects at least this large are probed before being compressed whole.
const PROBE_MIN: usize = 16 << 10;
/// Bytes taken from each of the start, middle and end for the probe.
const PROBE_SLICE: usize = 2 << 10;

fn zstd1(raw: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = zstd::bulk::Compressor::new(1).ok();
        }
        slot.as_mut().and_then(|z| z.compress(raw).ok())
    })
}

/// Whether a sample of `raw` (three 2 KiB slices: start, middle, end) shrinks by at
/// least 15 % under zstd: incompressible or barely compressible data (media,
/// archives, random or benchmark data) then costs a 6 KiB compression instead of a
/// whole block's. Measured: fio's default buffers compress ~10 %, and compressing
/// them whole was ~40 % of the daemon's CPU in a sequential write; source code
/// compresses to 20-35 % and is unaffected.
fn worth_compressing(raw: &[u8]) -> bool {
    if raw.len() < PROBE_MIN {
        return true;
    }
    let mid = raw.len() / 2 - PROBE_SLICE / 2;
    let mut sample = Vec::with_capacity(3 * PROBE_SLICE);
    sample.extend_from_slice(&raw[..PROBE_SLICE]);
    sample.extend_from_slice(&raw[mid..mid + PROBE_SLICE]);
    sample.extend_from_slice(&raw[raw.len() - PROBE_SLICE..]);
    zstd1(&sample).is_none_or(|c| c.len() * 100 < sample.len() * 85)
}

/// Compress `raw` for storage: zstd level 1, or raw when that saves < 10 % (or a
/// probe says it would not).
pub fn compress(raw: &[u8]) -> (Codec, Vec<u8>) {
    if raw.len() >= 64 && worth_compressing(raw) {
        let c = zstd1(raw);
        if let Some(c) = c
            && c.len() * 10 < raw.len() * 9
        {
            return (Codec::Zstd, c);
        }
    }
    (Codec::Raw, raw.to_vec())
}

thread_local! {
    /// One zstd context per thread: creating a context costs more than compressing
    /// a small tree node.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// Likewise for decompression (a context is ~100 KiB of allocations).
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Bytes of a delta payload that name its base.
pub const DELTA_BASE_LEN: usize = 32;

/// The base id a delta payload names (`None` for whole records).
pub fn delta_base(h: &RecordHeader, payload: &[u8]) -> Option<ObjectId> {
    (h.codec == Codec::Delta)
        .then(|| payload_base(payload))
        .flatten()
}

/// The base id a delta payload starts with (`None` when it is too short): the one
/// place that decodes it.
pub fn payload_base(payload: &[u8]) -> Option<ObjectId> {
    payload.get(..DELTA_BASE_LEN)?.try_into().ok().map(ObjectId)
}

/// Compress `raw` against `base` (the raw bytes of object `base_id`): the delta
/// payload, or `None` when zstd fails.
pub fn compress_delta(raw: &[u8], base_id: &ObjectId, base: &[u8]) -> Option<Vec<u8>> {
    use zstd::zstd_safe::{CCtx, CParameter};
    let mut cctx = CCtx::try_create()?;
    cctx.set_parameter(CParameter::CompressionLevel(3)).ok()?;
    cctx.ref_prefix(base).ok()?;
    let mut out = Vec::with_capacity(DELTA_BASE_LEN + zstd::zstd_safe::compress_bound(raw.len()));
    out.extend_from_slice(&base_id.0);
    let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(raw.len()));
    cctx.compress2(&mut frame, raw).ok()?;
    out.extend_from_slice(&frame);
    Some(out)
}

/// Decode a whole (non-delta) payload and verify it hashes to the header's id.
pub fn decode_payload(h: &RecordHeader, payload: &[u8]) -> Result<Vec<u8>> {
    decode_payload_with(h, payload, None)
}

/// Decode a payload and verify it hashes to the header's id; a delta needs the raw
/// bytes of its base (`base`), which the caller has read and verified.
pub fn decode_payload_with(
    h: &RecordHeader,
    payload: &[u8],
    base: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let what = || format!("{:?} object {}", h.kind, h.id.short());
    let raw = match h.codec {
        Codec::Raw => payload.to_vec(),
        Codec::Zstd => DECOMPRESSOR
            .with(|cell| {
                let mut slot = cell.borrow_mut();
                if slot.is_none() {
                    *slot = Some(zstd::bulk::Decompressor::new()?);
                }
                slot.as_mut()
                    .unwrap()
                    .decompress(payload, h.raw_len as usize)
            })
            .map_err(|e| Error::corrupt(what(), format!("zstd: {e}")))?,
        Codec::Delta => {
            let base = base.ok_or_else(|| Error::corrupt(what(), "delta read without its base"))?;
            let frame = payload
                .get(DELTA_BASE_LEN..)
                .ok_or_else(|| Error::corrupt(what(), "delta shorter than its base id"))?;
            decompress_delta(frame, base, h.raw_len as usize)
                .map_err(|e| Error::corrupt(what(), format!("zstd delta: {e}")))?
        }
    };
    if raw.len() != h.raw_len as usize {
        return Err(Error::corrupt(what(), "length mismatch"));
    }
    if h.kind.hash(&raw) != h.id {
        return Err(Error::corrupt(what(), "hash mismatch"));
    }
    Ok(raw)
}

fn decompress_delta(
    frame: &[u8],
    base: &[u8],
    raw_len: usize,
) -> std::result::Result<Vec<u8>, String> {
    use zstd::zstd_safe::DCtx;
    let mut dctx = DCtx::try_create().ok_or("no context")?;
    dctx.ref_prefix(base)
        .map_err(|c| zstd::zstd_safe::get_error_name(c).to_string())?;
    let mut out = Vec::with_capacity(raw_len);
    dctx.decompress(&mut out, frame)
        .map_err(|c| zstd::zstd_safe::get_error_name(c).to_string())?;
    Ok(out)
}

/// One record found by [`scan`].
#[derive(Debug, Clone)]
pub struct Scanned {
    /// The header.
    pub header: RecordHeader,
    /// Offset of the record header in the pack.
    pub offset: u64,
}

/// Walk the records of a whole pack image. Stops at the first torn or corrupt record
/// and reports where (the valid prefix is still returned).
pub fn scan(pack: &[u8]) -> (Vec<Scanned>, Option<(u64, Error)>) {
    let mut out = Vec::new();
    if let Err(e) = check_pack_header(pack) {
        return (out, Some((0, e)));
    }
    let mut off = PACK_HEADER_LEN as usize;
    while off < pack.len() {
        let h = match RecordHeader::decode(&pack[off..]) {
            Ok(h) => h,
            Err(e) => return (out, Some((off as u64, e))),
        };
        let end = off + RECORD_HEADER_LEN + h.stored_len as usize;
        if end > pack.len() {
            return (
                out,
                Some((
                    off as u64,
                    Error::corrupt("pack record", "truncated payload"),
                )),
            );
        }
        out.push(Scanned {
            header: h,
            offset: off as u64,
        });
        off = end;
    }
    (out, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(kind: Kind, raw: &[u8]) -> Vec<u8> {
        let (codec, payload) = compress(raw);
        let h = RecordHeader {
            kind,
            codec,
            raw_len: raw.len() as u32,
            stored_len: payload.len() as u32,
            id: kind.hash(raw),
        };
        let mut v = h.encode().to_vec();
        v.extend_from_slice(&payload);
        v
    }

    proptest! {
        #[test]
        fn record_round_trip(data in proptest::collection::vec(any::<u8>(), 0..5000), zeros in 0usize..5000) {
            let mut raw = data.clone();
            raw.extend(std::iter::repeat_n(0u8, zeros));
            let mut pack = pack_header();
            pack.extend(record(Kind::Chunk, &raw));
            pack.extend(record(Kind::Node, &data));
            let (recs, err) = scan(&pack);
            prop_assert!(err.is_none());
            prop_assert_eq!(recs.len(), 2);
            let r = &recs[0];
            let start = r.offset as usize + RECORD_HEADER_LEN;
            let got = decode_payload(&r.header, &pack[start..start + r.header.stored_len as usize]).unwrap();
            prop_assert_eq!(got, raw);
        }

        /// A delta decodes to its object with the right base only; with another
        /// base (or a flipped byte) it is rejected as corrupt, never wrong data.
        #[test]
        fn delta_round_trip(
            base in proptest::collection::vec(any::<u8>(), 0..4000),
            at in any::<usize>(),
            edit in proptest::collection::vec(any::<u8>(), 0..50),
            flip in proptest::option::of((any::<usize>(), 0u8..8)),
        ) {
            let mut raw = base.clone();
            let at = at % (raw.len() + 1);
            raw.splice(at..at, edit.iter().copied());
            let bid = Kind::Chunk.hash(&base);
            let mut payload = compress_delta(&raw, &bid, &base).unwrap();
            let h = RecordHeader {
                kind: Kind::Chunk,
                codec: Codec::Delta,
                raw_len: raw.len() as u32,
                stored_len: payload.len() as u32,
                id: Kind::Chunk.hash(&raw),
            };
            prop_assert_eq!(delta_base(&h, &payload), Some(bid));
            prop_assert_eq!(decode_payload_with(&h, &payload, Some(&base)).unwrap(), raw.clone());
            prop_assert!(decode_payload(&h, &payload).is_err());
            let mut other = base.clone();
            other.push(1);
            if let Ok(got) = decode_payload_with(&h, &payload, Some(&other)) {
                prop_assert_eq!(got, raw.clone());
            }
            if let Some((i, bit)) = flip {
                let i = DELTA_BASE_LEN + i % (payload.len() - DELTA_BASE_LEN);
                payload[i] ^= 1 << bit;
                match decode_payload_with(&h, &payload, Some(&base)) {
                    Ok(got) => prop_assert_eq!(got, raw),
                    Err(e) => prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e),
                }
            }
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = RecordHeader::decode(&bytes);
            let _ = scan(&bytes);
        }
    }

    /// A valid pack of `objs` and the offset of each record.
    fn pack_of(objs: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
        let mut pack = pack_header();
        let mut offs = Vec::new();
        for (i, o) in objs.iter().enumerate() {
            offs.push(pack.len());
            let kind = if i % 2 == 0 { Kind::Chunk } else { Kind::Node };
            pack.extend(record(kind, o));
        }
        (pack, offs)
    }

    /// Every record `scan` returns lies inside the pack, and its payload decodes to
    /// bytes with the header's id or is rejected as corrupt.
    fn check_scanned(pack: &[u8], recs: &[Scanned]) -> Result<(), TestCaseError> {
        for r in recs {
            let start = r.offset as usize + RECORD_HEADER_LEN;
            let end = start + r.header.stored_len as usize;
            prop_assert!(end <= pack.len());
            match decode_payload(&r.header, &pack[start..end]) {
                Ok(raw) => prop_assert_eq!(r.header.kind.hash(&raw), r.header.id),
                Err(e) => prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e),
            }
        }
        Ok(())
    }

    fn objects() -> impl Strategy<Value = Vec<Vec<u8>>> {
        proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..300),
                (any::<u8>(), 0usize..3000).prop_map(|(b, n)| vec![b; n]),
            ],
            1..6,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// Truncated packs: exactly the records wholly before the cut come back, and
        /// the torn one is reported at its offset.
        #[test]
        fn scan_truncated_pack(objs in objects(), cut in any::<usize>()) {
            let (pack, offs) = pack_of(&objs);
            let cut = cut % (pack.len() + 1);
            let torn = &pack[..cut];
            let (recs, err) = scan(torn);
            check_scanned(torn, &recs)?;
            let whole = offs
                .iter()
                .enumerate()
                .filter(|(i, _)| offs.get(i + 1).copied().unwrap_or(pack.len()) <= cut)
                .count();
            if cut < PACK_HEADER_LEN as usize {
                prop_assert!(recs.is_empty() && err.is_some());
            } else {
                prop_assert_eq!(recs.len(), whole);
                match offs.get(whole) {
                    Some(&o) if o < cut => prop_assert_eq!(err.map(|e| e.0), Some(o as u64)),
                    _ => prop_assert!(err.is_none()),
                }
            }
        }

        /// Bit-flipped packs: no panic; what scan returns is in bounds and every
        /// payload either verifies or is rejected as corrupt.
        #[test]
        fn scan_bit_flipped_pack(
            objs in objects(),
            flips in proptest::collection::vec((any::<usize>(), 0u8..8), 1..6),
        ) {
            let (mut pack, _) = pack_of(&objs);
            for (at, bit) in flips {
                let i = at % pack.len();
                pack[i] ^= 1 << bit;
            }
            let (recs, err) = scan(&pack);
            check_scanned(&pack, &recs)?;
            if let Some((off, e)) = err {
                prop_assert!(off as usize <= pack.len());
                prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e);
            }
        }

        /// Random bytes after a valid header, and random record headers.
        #[test]
        fn scan_random_records(
            body in proptest::collection::vec(any::<u8>(), 0..600),
            hdr in proptest::collection::vec(any::<u8>(), RECORD_HEADER_LEN..RECORD_HEADER_LEN + 8),
        ) {
            let mut pack = pack_header();
            pack.extend(&body);
            let (recs, _) = scan(&pack);
            check_scanned(&pack, &recs)?;
            if let Ok(h) = RecordHeader::decode(&hdr) {
                prop_assert_eq!(&h.encode()[..4], &hdr[..4]);
                prop_assert_eq!(RecordHeader::decode(&h.encode()).unwrap(), h);
            }
        }
    }

    #[test]
    fn probe_skips_incompressible_blocks_only() {
        let mut x = 0x9e3779b97f4a7c15u64;
        let random: Vec<u8> = (0..65536)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(compress(&random).0, Codec::Raw);
        let text: Vec<u8> = (0..65536u32)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .take(65536)
            .collect();
        assert_eq!(compress(&text).0, Codec::Zstd);
        // Random start, zeros after: the probe's middle and end slices see zeros.
        let mut mixed = random[..20000].to_vec();
        mixed.resize(65536, 0);
        assert_eq!(compress(&mixed).0, Codec::Zstd);
    }

    #[test]
    fn flipped_byte_is_detected() {
        let raw = vec![7u8; 10_000];
        let mut pack = pack_header();
        pack.extend(record(Kind::Chunk, &raw));
        let n = pack.len();
        pack[n - 3] ^= 0x40;
        let (recs, _) = scan(&pack);
        let r = &recs[0];
        let start = r.offset as usize + RECORD_HEADER_LEN;
        assert!(decode_payload(&r.header, &pack[start..]).is_err());
    }

    #[test]
    fn torn_tail_is_reported() {
        let mut pack = pack_header();
        pack.extend(record(Kind::Chunk, b"abc"));
        let good = pack.len();
        pack.extend(&record(Kind::Chunk, b"defgh")[..20]);
        let (recs, err) = scan(&pack);
        assert_eq!(recs.len(), 1);
        assert_eq!(err.unwrap().0, good as u64);
    }
}
