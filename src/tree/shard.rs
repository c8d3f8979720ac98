//! Sharded directories: the shard boundary rule ([`shard_ranges`]: it depends only
//! on the names, so equal directories split alike), the shard membership digest,
//! and the 'I' index node over 'D' leaves ([`DirIndex`]).

use super::*;

/// Directories with more entries than this are stored as a [`DirIndex`] of shards.
pub const SHARD_THRESHOLD: usize = 256;
/// A shard ends after a name whose boundary hash has these low bits all zero
/// (about 64 entries per shard).
const SHARD_MASK: u64 = 63;
/// Fewest entries in a shard before a boundary may end it.
const SHARD_MIN: usize = 16;
/// Most entries in a shard (bounds a leaf even for adversarial names).
pub(super) const SHARD_MAX: usize = 512;

/// A sharded directory: its entries are the concatenation of the leaf [`DirNode`]s,
/// in order (each leaf non-empty, names increasing across leaves).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DirIndex {
    /// (number of entries, leaf node id) per shard, in name order.
    pub shards: Vec<(u32, NodeId)>,
}

/// How a directory of `names` (sorted) is split into shards: one range when it has at
/// most [`SHARD_THRESHOLD`] entries, otherwise content-defined ranges (a boundary
/// depends only on the names around it and the previous cut, so inserting or removing
/// a name changes one shard, rarely two, very rarely a short run of them).
pub fn shard_ranges<'a>(
    names: impl ExactSizeIterator<Item = &'a [u8]>,
) -> Vec<std::ops::Range<usize>> {
    let n = names.len();
    if n <= SHARD_THRESHOLD {
        return std::iter::once(0..n).collect();
    }
    let mut out = Vec::with_capacity(n / 32 + 1);
    let mut start = 0;
    for (i, name) in names.enumerate() {
        let len = i + 1 - start;
        if len >= SHARD_MAX || (len >= SHARD_MIN && boundary_hash(name) & SHARD_MASK == 0) {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < n {
        out.push(start..n);
    }
    out
}

/// FNV-1a with a murmur3 finalizer: fast, stable across versions and platforms
/// (part of the on-disk format: it decides shard boundaries).
fn boundary_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Digest of a shard's membership: names, inode numbers, kinds and whether each
/// entry is a hard-link reference. Two shards with equal digests whose inline
/// records are unchanged encode to the same leaf (lets a flush reuse clean leaves).
#[derive(Default)]
pub struct ShardDigest(blake3::Hasher);

impl ShardDigest {
    /// Add one entry, in name order.
    pub fn add(&mut self, name: &[u8], ino: u64, kind: Kind, hardlink: bool) {
        self.0.update(&(name.len() as u32).to_le_bytes());
        self.0.update(name);
        self.0.update(&ino.to_le_bytes());
        self.0.update(&[kind as u8, hardlink as u8]);
    }
    /// The digest.
    pub fn finish(&self) -> [u8; 32] {
        *self.0.finalize().as_bytes()
    }
}

/// Whether encoded node `b` is a [`DirIndex`] (by its type byte; not validated).
pub fn is_dir_index(b: &[u8]) -> bool {
    b.len() > 5 && &b[..4] == NODE_MAGIC && b[5] == b'I'
}

/// A directory content node of either shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyDir {
    /// All entries in one node.
    Flat(DirNode),
    /// A sharded directory's index.
    Index(DirIndex),
}

impl AnyDir {
    /// Decode a 'D' or an 'I' node.
    pub fn decode(b: &[u8]) -> Result<AnyDir> {
        match b.get(5) {
            Some(b'I') => DirIndex::decode(b).map(AnyDir::Index),
            _ => DirNode::decode(b).map(AnyDir::Flat),
        }
    }
}

impl DirIndex {
    /// Canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + self.shards.len() * 36);
        header(&mut out, b'I');
        out.extend_from_slice(&(self.shards.len() as u32).to_le_bytes());
        for (n, id) in &self.shards {
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&id.0);
        }
        out
    }

    /// Decode; rejects empty indexes and empty shards.
    pub fn decode(b: &[u8]) -> Result<DirIndex> {
        let mut r = Reader::new(b, b'I')?;
        let n = r.count(36)?;
        if n == 0 {
            return Err(bad("empty directory index"));
        }
        let mut shards = Vec::with_capacity(n);
        for _ in 0..n {
            let count = r.u32()?;
            if count == 0 {
                return Err(bad("empty shard"));
            }
            shards.push((count, NodeId(r.id()?)));
        }
        r.end()?;
        Ok(DirIndex { shards })
    }

    /// Total number of entries.
    pub fn len(&self) -> u64 {
        self.shards.iter().map(|(n, _)| *n as u64).sum()
    }

    /// Whether the index lists no entries (never true for a decoded index).
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }
}
