//! Remote pack index (`packs/<H>.idx`) codec and the builder of remote packs.
//!
//! Owns: the `.idx` byte format (docs/design.md, "Remote tier: formats"), building
//! a remote pack (exactly the local pack format of [`crate::store::pack`], so
//! `pack::scan` reads it) together with its index, and reading one record of a
//! remote pack back with every check a local read does.
//!
//! Format (little-endian): magic `TFRIDX01` | version u32 = 1 | count u32 | pack
//! length u64 | pack hash [32] | count x 84-byte entries sorted by id (id [32] |
//! kind u8 | codec u8 | offset u64 | stored_len u32 | raw_len u32 | base [32] |
//! reserved [2] = 0) | blake3 of every preceding byte [32].
//!
//! Invariants: [`Idx::decode`] never panics and accepts only what [`Idx::encode`]
//! can produce for a well-formed pack: sorted unique ids, known kinds and codecs,
//! lengths at most `MAX_OBJECT_LEN`, every record inside the pack, a base exactly
//! for deltas, a matching trailer. Bytes read back from a remote pack are checked
//! against the entry (header) and then against the id (hash) before use, so a
//! damaged or hostile remote yields [`Error::Corrupt`], never wrong bytes.

use std::collections::HashSet;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::id::{ObjectId, PackHash};
use crate::store::pack::{self, Codec, Kind, MAX_OBJECT_LEN, RECORD_HEADER_LEN, RecordHeader};

/// Magic at the start of every `.idx`.
pub const IDX_MAGIC: &[u8; 8] = b"TFRIDX01";
/// Current `.idx` version.
pub const IDX_VERSION: u32 = 1;
/// Bytes before the first entry.
pub const IDX_HEADER_LEN: usize = 56;
/// Bytes of one entry.
pub const IDX_ENTRY_LEN: usize = 84;
/// Bytes of the trailer hash.
pub const IDX_TRAILER_LEN: usize = 32;
/// Remote packs are closed once they reach this size.
pub const REMOTE_PACK_TARGET: u64 = 32 << 20;

/// One object of a remote pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdxEntry {
    /// Object id.
    pub id: ObjectId,
    /// Object kind.
    pub kind: Kind,
    /// Payload codec.
    pub codec: Codec,
    /// Offset of the record header in the pack.
    pub offset: u64,
    /// Payload length.
    pub stored_len: u32,
    /// Decoded length.
    pub raw_len: u32,
    /// The delta base (codec 2 only).
    pub base: Option<ObjectId>,
}

impl IdxEntry {
    /// Byte range of the whole record (header + payload) in the pack.
    pub fn range(&self) -> Range<u64> {
        self.offset..self.offset + RECORD_HEADER_LEN as u64 + self.stored_len as u64
    }
}

/// A decoded `.idx`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idx {
    /// blake3 of the pack bytes (the pack's name).
    pub pack_hash: PackHash,
    /// Length of the pack.
    pub pack_len: u64,
    /// Entries, sorted by id.
    pub entries: Vec<IdxEntry>,
}

fn corrupt(why: impl Into<String>) -> Error {
    Error::corrupt("remote pack index", why)
}

impl Idx {
    /// Encode (entries are sorted by id here; duplicates are the caller's bug and
    /// make [`decode`](Self::decode) refuse the result).
    pub fn encode(&self) -> Vec<u8> {
        let mut entries = self.entries.clone();
        entries.sort_by_key(|e| e.id);
        let mut v =
            Vec::with_capacity(IDX_HEADER_LEN + entries.len() * IDX_ENTRY_LEN + IDX_TRAILER_LEN);
        v.extend_from_slice(IDX_MAGIC);
        v.extend_from_slice(&IDX_VERSION.to_le_bytes());
        v.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        v.extend_from_slice(&self.pack_len.to_le_bytes());
        v.extend_from_slice(&self.pack_hash.0);
        for e in &entries {
            v.extend_from_slice(&e.id.0);
            v.push(e.kind as u8);
            v.push(e.codec as u8);
            v.extend_from_slice(&e.offset.to_le_bytes());
            v.extend_from_slice(&e.stored_len.to_le_bytes());
            v.extend_from_slice(&e.raw_len.to_le_bytes());
            v.extend_from_slice(&e.base.map_or([0; 32], |b| b.0));
            v.extend_from_slice(&[0, 0]);
        }
        let h = blake3::hash(&v);
        v.extend_from_slice(h.as_bytes());
        v
    }

    /// Decode and check an `.idx` (see the module docs for what is refused).
    pub fn decode(b: &[u8]) -> Result<Idx> {
        if b.len() < IDX_HEADER_LEN + IDX_TRAILER_LEN || &b[..8] != IDX_MAGIC {
            return Err(corrupt("bad magic or truncated"));
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let version = u32_at(8);
        if version != IDX_VERSION {
            return Err(corrupt(format!("unsupported version {version}")));
        }
        let count = u32_at(12) as u64;
        let want = (IDX_HEADER_LEN + IDX_TRAILER_LEN) as u64 + count * IDX_ENTRY_LEN as u64;
        if b.len() as u64 != want {
            return Err(corrupt(format!(
                "length {} does not match {count} entries",
                b.len()
            )));
        }
        let body = b.len() - IDX_TRAILER_LEN;
        if blake3::hash(&b[..body]).as_bytes() != &b[body..] {
            return Err(corrupt("trailer hash mismatch"));
        }
        let pack_len = u64_at(16);
        let pack_hash = PackHash(b[24..56].try_into().unwrap());
        let mut entries = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            let at = IDX_HEADER_LEN + i * IDX_ENTRY_LEN;
            let e = decode_entry(&b[at..at + IDX_ENTRY_LEN], pack_len)?;
            if entries.last().is_some_and(|p: &IdxEntry| p.id >= e.id) {
                return Err(corrupt("ids not sorted or duplicated"));
            }
            entries.push(e);
        }
        Ok(Idx {
            pack_hash,
            pack_len,
            entries,
        })
    }

    /// The entry of `id` (binary search).
    pub fn find(&self, id: &ObjectId) -> Option<&IdxEntry> {
        self.entries
            .binary_search_by(|e| e.id.cmp(id))
            .ok()
            .map(|i| &self.entries[i])
    }
}

fn decode_entry(b: &[u8], pack_len: u64) -> Result<IdxEntry> {
    let id = ObjectId(b[..32].try_into().unwrap());
    let kind = Kind::from_u8(b[32]).ok_or_else(|| corrupt(format!("bad kind {}", b[32])))?;
    let codec = Codec::from_u8(b[33]).ok_or_else(|| corrupt(format!("bad codec {}", b[33])))?;
    let offset = u64::from_le_bytes(b[34..42].try_into().unwrap());
    let stored_len = u32::from_le_bytes(b[42..46].try_into().unwrap());
    let raw_len = u32::from_le_bytes(b[46..50].try_into().unwrap());
    let base: [u8; 32] = b[50..82].try_into().unwrap();
    if b[82..84] != [0, 0] {
        return Err(corrupt("reserved bytes set"));
    }
    if stored_len > MAX_OBJECT_LEN || raw_len > MAX_OBJECT_LEN {
        return Err(corrupt("length out of range"));
    }
    if codec == Codec::Delta && (stored_len as usize) < pack::DELTA_BASE_LEN {
        return Err(corrupt("delta shorter than its base id"));
    }
    let end = offset
        .checked_add(RECORD_HEADER_LEN as u64 + stored_len as u64)
        .ok_or_else(|| corrupt("offset out of range"))?;
    if offset < pack::PACK_HEADER_LEN || end > pack_len {
        return Err(corrupt("record outside the pack"));
    }
    let base = match codec {
        Codec::Delta => Some(ObjectId(base)),
        _ if base != [0; 32] => return Err(corrupt("base set on a whole record")),
        _ => None,
    };
    Ok(IdxEntry {
        id,
        kind,
        codec,
        offset,
        stored_len,
        raw_len,
        base,
    })
}

/// A finished remote pack and its index.
#[derive(Clone, Debug)]
pub struct Built {
    /// blake3 of `pack` (the pack's name on the remote).
    pub hash: PackHash,
    /// The pack bytes (local pack format).
    pub pack: Vec<u8>,
    /// The encoded `.idx`.
    pub idx: Vec<u8>,
    /// The entries, sorted by id.
    pub entries: Vec<IdxEntry>,
}

/// Builds one remote pack: records are copied in the order added (callers add in
/// dependency order: see the closure invariant in docs/design.md).
pub struct PackBuilder {
    pack: Vec<u8>,
    entries: Vec<IdxEntry>,
    ids: HashSet<ObjectId>,
}

impl Default for PackBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl PackBuilder {
    /// An empty pack (header only).
    pub fn new() -> PackBuilder {
        PackBuilder {
            pack: pack::pack_header(),
            entries: Vec::new(),
            ids: HashSet::new(),
        }
    }

    /// Append a stored record as is (`payload` = the stored bytes of a local record;
    /// for a delta they start with the base id, which must equal `base`). Returns
    /// `false` (and adds nothing) when `id` is already in this pack.
    pub fn add_record(
        &mut self,
        kind: Kind,
        id: ObjectId,
        codec: Codec,
        raw_len: u32,
        payload: &[u8],
        base: Option<ObjectId>,
    ) -> Result<bool> {
        let bad = |why: &str| Error::Invalid(format!("remote pack record {}: {why}", id.short()));
        if raw_len > MAX_OBJECT_LEN || payload.len() > MAX_OBJECT_LEN as usize {
            return Err(bad("length out of range"));
        }
        let named = (codec == Codec::Delta)
            .then(|| pack::payload_base(payload))
            .flatten();
        if named != base || (codec == Codec::Delta && named.is_none()) {
            return Err(bad("delta base does not match its payload"));
        }
        if !self.ids.insert(id) {
            return Ok(false);
        }
        let h = RecordHeader {
            kind,
            codec,
            raw_len,
            stored_len: payload.len() as u32,
            id,
        };
        let offset = self.pack.len() as u64;
        self.pack.extend_from_slice(&h.encode());
        self.pack.extend_from_slice(payload);
        self.entries.push(IdxEntry {
            id,
            kind,
            codec,
            offset,
            stored_len: h.stored_len,
            raw_len,
            base,
        });
        Ok(true)
    }

    /// Compress `raw` with the local store's rules ([`pack::compress`]) and append
    /// it whole. Returns its id.
    pub fn add_raw(&mut self, kind: Kind, raw: &[u8]) -> Result<ObjectId> {
        crate::store::objects::check_object_len(kind, raw.len())?;
        let id = kind.hash(raw);
        if !self.ids.contains(&id) {
            let (codec, payload) = pack::compress(raw);
            self.add_record(kind, id, codec, raw.len() as u32, &payload, None)?;
        }
        Ok(id)
    }

    /// Whether `id` is already in this pack.
    pub fn contains(&self, id: &ObjectId) -> bool {
        self.ids.contains(id)
    }

    /// Bytes of the pack so far.
    pub fn len(&self) -> u64 {
        self.pack.len() as u64
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records added.
    pub fn count(&self) -> usize {
        self.entries.len()
    }

    /// Close the pack: its hash, bytes, `.idx` and sorted entries.
    pub fn finish(self) -> Built {
        let hash = PackHash::of(&self.pack);
        let mut entries = self.entries;
        entries.sort_by_key(|e| e.id);
        let idx = Idx {
            pack_hash: hash,
            pack_len: self.pack.len() as u64,
            entries,
        };
        Built {
            hash,
            idx: idx.encode(),
            entries: idx.entries,
            pack: self.pack,
        }
    }
}

/// One record's stored payload read from a remote pack, checked against its entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The pack it came from (for error messages).
    pub pack: PackHash,
    /// Payload codec.
    pub codec: Codec,
    /// Decoded length.
    pub raw_len: u32,
    /// The delta base (codec 2).
    pub base: Option<ObjectId>,
    /// The stored payload.
    pub payload: Vec<u8>,
}

fn what(kind: Kind, id: &ObjectId, pack: &PackHash) -> String {
    format!(
        "remote {kind:?} object {} in pack {}",
        id.short(),
        pack.short()
    )
}

/// Parse the bytes of `entry`'s record range (see [`IdxEntry::range`]) of pack
/// `pack`: the header must match the entry in id, kind, codec and both lengths, and
/// a delta's payload must name the entry's base.
pub fn read_record(pack: &PackHash, entry: &IdxEntry, bytes: &[u8]) -> Result<Stored> {
    let bad = |why: &str| Error::corrupt(what(entry.kind, &entry.id, pack), why);
    let h = RecordHeader::decode(bytes).map_err(|_| bad("bad record header"))?;
    if h.id != entry.id
        || h.kind != entry.kind
        || h.codec != entry.codec
        || h.stored_len != entry.stored_len
        || h.raw_len != entry.raw_len
    {
        return Err(bad("record header does not match the pack index"));
    }
    if bytes.len() != RECORD_HEADER_LEN + h.stored_len as usize {
        return Err(bad("record length does not match the pack index"));
    }
    let payload = bytes[RECORD_HEADER_LEN..].to_vec();
    if pack::delta_base(&h, &payload) != entry.base {
        return Err(bad("delta base does not match the pack index"));
    }
    Ok(Stored {
        pack: *pack,
        codec: h.codec,
        raw_len: h.raw_len,
        base: entry.base,
        payload,
    })
}

/// Decode a stored payload (decompress, or apply the delta to `base_raw`, the
/// verified raw bytes of its base) and verify it hashes to `id` in `kind`'s domain.
pub fn decode_verified(
    kind: Kind,
    id: &ObjectId,
    stored: &Stored,
    base_raw: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let h = RecordHeader {
        kind,
        codec: stored.codec,
        raw_len: stored.raw_len,
        stored_len: stored.payload.len() as u32,
        id: *id,
    };
    let rename = |e: Error| match e {
        Error::Corrupt { reason, .. } => Error::Corrupt {
            what: what(kind, id, &stored.pack),
            reason,
        },
        e => e,
    };
    if stored.codec == Codec::Delta && base_raw.is_none() {
        return Err(Error::corrupt(
            what(kind, id, &stored.pack),
            "delta read without its base",
        ));
    }
    pack::decode_payload_with(&h, &stored.payload, base_raw).map_err(rename)
}

#[cfg(test)]
mod tests;
