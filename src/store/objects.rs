//! The object-store traits and the index entry format.
//!
//! Owns: [`ObjectStore`], what every layer above needs (objects plus the metadata
//! they are committed with); [`Packs`], what gc and fsck need beneath it (the index,
//! the pack files, the gc guard); and [`Loc`], the encoding of one index entry.
//!
//! Invariants: an index entry's lengths are at most [`MAX_OBJECT_LEN`] (a larger
//! value is [`Error::Corrupt`], so a damaged entry can never make a read allocate
//! more); an object larger than that is refused at `put` with
//! [`Error::ObjectTooLarge`], never written.

use std::collections::HashSet;
use std::sync::Arc;

use super::metastore::MetaStore;
use super::pack::{self, Codec, Kind, MAX_OBJECT_LEN};
use crate::error::{Error, Result};
use crate::id::ObjectId;
use crate::meta::MetaOp;

/// What every layer above needs from a store of objects plus metadata.
pub trait ObjectStore: Send + Sync {
    /// Store `raw` (deduplicated); returns its id. Not durable until [`commit`](Self::commit).
    /// Objects longer than [`MAX_OBJECT_LEN`] are refused ([`Error::ObjectTooLarge`]).
    fn put(&self, kind: Kind, raw: &[u8]) -> Result<ObjectId>;
    /// Like [`put`](Self::put), with a hint: `base` is an earlier version of the same
    /// content (same kind), which the store may use to keep only the difference.
    /// Stores without deltas ignore it.
    fn put_based(&self, kind: Kind, raw: &[u8], base: Option<ObjectId>) -> Result<ObjectId> {
        let _ = base;
        self.put(kind, raw)
    }
    /// Read and verify an object.
    fn get(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>>;
    /// Object `id` as `decode` makes it of its verified bytes, from the store's
    /// cache when it keeps the decoded form there (a decode is a pure function of
    /// the bytes). Stores without a cache decode every time.
    fn get_decoded(
        &self,
        kind: Kind,
        id: &ObjectId,
        decode: &dyn Fn(&[u8]) -> Result<super::cache::Decoded>,
    ) -> Result<super::cache::Decoded> {
        decode(&self.get(kind, id)?)
    }
    /// Like [`get`](Self::get), without adding the object to a cache (for reads whose
    /// result is about to be replaced, like a block read to be rewritten).
    fn get_uncached(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>> {
        self.get(kind, id)
    }
    /// For a file read: like [`get_uncached`](Self::get_uncached), but a store may
    /// keep the block in a small cache of its own, apart from the tree nodes'. The
    /// kernel's page cache keeps only the pages a read asked for, so 4 KiB random
    /// reads decompressed their 64 KiB block once per read; the next reads of the
    /// same block now hit.
    fn get_for_read(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>> {
        self.get_uncached(kind, id)
    }
    /// The committed record of `id` as stored: its location and its stored payload
    /// (compressed, or a delta starting with its base id), the record header checked
    /// against the index entry. `None` when the store has no such record or keeps no
    /// records (memory stores): callers then use [`get`](Self::get). Push copies
    /// records to a remote with this, without re-compressing.
    fn stored_record(&self, id: &ObjectId) -> Result<Option<(Loc, Vec<u8>)>> {
        let _ = id;
        Ok(None)
    }
    /// Whether the object is present (durable or pending).
    fn contains(&self, id: &ObjectId) -> Result<bool>;
    /// Make every put durable, then apply `ops` atomically and durably.
    fn commit(&self, ops: Vec<MetaOp>) -> Result<()>;
    /// The metadata store the objects are committed with. Writing to it directly
    /// bypasses [`commit`](Self::commit): only gc and fsck do (index maintenance).
    fn meta(&self) -> &dyn MetaStore;
    /// Read a metadata key.
    fn meta_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.meta().get(key)
    }
    /// Scan metadata keys by prefix.
    fn meta_scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.meta().scan(prefix)
    }
    /// At most `limit` metadata pairs in `range`, in key order.
    fn meta_range(
        &self,
        range: &crate::meta::KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.meta().range(range, limit)
    }
    /// Ops deleting every metadata key in `range` (for a batch).
    fn meta_delete_range_ops(
        &self,
        range: &crate::meta::KeyRange,
    ) -> Result<Vec<crate::meta::MetaOp>> {
        Ok(self
            .meta_range(range, usize::MAX)?
            .into_iter()
            .map(|(k, _)| crate::meta::MetaOp::Delete(k))
            .collect())
    }
    /// At most `limit` metadata pairs in `range`, last key first.
    fn meta_range_rev(
        &self,
        range: &crate::meta::KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.meta().range_rev(range, limit)
    }
    /// Free space of the backing filesystem, for statfs: (total, free, avail) bytes.
    fn space(&self) -> (u64, u64, u64);
    /// The store's directory, for stores kept in one (caches beside the store,
    /// e.g. a remote's downloaded indexes); `None` for in-memory stores.
    fn dir(&self) -> Option<&std::path::Path> {
        None
    }
    /// The read cache of file blocks: (capacity, bytes held); (0, 0) for a store
    /// without one.
    fn read_cache(&self) -> (usize, usize) {
        (0, 0)
    }
    /// Change the read cache's capacity (the store's `read_cache_bytes` limit).
    fn set_read_cache(&self, _bytes: usize) {}
    /// Install (or remove, with `None`) the [`Fallback`] asked on a local miss.
    /// Stores without one ignore it.
    fn set_fallback(&self, fallback: Option<Arc<dyn Fallback>>) {
        let _ = fallback;
    }
    /// The installed [`Fallback`], if any.
    fn fallback(&self) -> Option<Arc<dyn Fallback>> {
        None
    }
}

/// Refuse an object too large for a record (lengths are u32 on disk, and readers
/// refuse anything above [`MAX_OBJECT_LEN`]).
pub fn check_object_len(kind: Kind, len: usize) -> Result<()> {
    if len as u64 > MAX_OBJECT_LEN as u64 {
        return Err(Error::ObjectTooLarge {
            what: format!("{kind:?} object"),
            len: len as u64,
            max: MAX_OBJECT_LEN as u64,
        });
    }
    Ok(())
}

/// What gc and fsck need beneath an [`ObjectStore`]: the object index, the pack
/// files and the gc guard. See `crate::gc` for the protocol these serve.
pub trait Packs: ObjectStore {
    /// Start a gc: from now on every `put` (dedup hits included) is remembered until
    /// [`gc_end`](Self::gc_end), and [`sweep`](Self::sweep) keeps those objects.
    fn gc_begin(&self);
    /// End a gc (see [`gc_begin`](Self::gc_begin)).
    fn gc_end(&self);
    /// Every committed index entry.
    fn index(&self) -> Result<Vec<(ObjectId, Loc)>>;
    /// The objects a sweep keeping `keep` would drop: committed index entries that
    /// are neither in `keep` nor put since [`gc_begin`](Self::gc_begin) (nor the
    /// base of a delta that stays).
    fn unreachable(&self, keep: &HashSet<ObjectId>) -> Result<Vec<(ObjectId, Loc)>>;
    /// Drop the index entries [`unreachable`](Self::unreachable) names, together with
    /// `extra` metadata ops; puts wait meanwhile. Returns (objects, stored bytes)
    /// dropped. The pack bytes stay until [`repack`](Self::repack) or
    /// [`delete_pack`](Self::delete_pack).
    fn sweep(&self, keep: &HashSet<ObjectId>, extra: Vec<MetaOp>) -> Result<(u64, u64)>;
    /// Pack files: (number, size in bytes), by number.
    fn packs(&self) -> Result<Vec<(u32, u64)>>;
    /// Packs that may still gain index entries (the open pack, packs not yet
    /// fsync'd, packs holding uncommitted puts): a gc never rewrites or deletes them.
    fn protected_packs(&self) -> HashSet<u32>;
    /// Close the open pack if everything in it is committed, so a gc may rewrite or
    /// delete it (the next put starts a new pack).
    fn close_pack(&self);
    /// Copy the records `live` (all in pack `n`, each verified on the way) into the
    /// open pack, within the space reserve, commit their new locations, then delete
    /// pack `n`. Returns the bytes copied.
    fn repack(&self, n: u32, live: &[(ObjectId, Loc)]) -> Result<u64>;
    /// Delete pack `n` (the caller has made sure no index entry names it).
    fn delete_pack(&self, n: u32) -> Result<()>;
    /// The whole image of pack `n` (for scanning).
    fn read_pack(&self, n: u32) -> Result<Vec<u8>>;
    /// Read and verify an object from its pack, bypassing the cache (fsck).
    fn read_verified(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>>;
    /// Read and verify the whole (non-delta) record of `id` at `loc`, which need not
    /// be what the index says (fsck's rebuild).
    fn read_whole_at(&self, id: &ObjectId, loc: &Loc) -> Result<Vec<u8>>;
}

/// Location of an object in the packs (value of an `o/` key).
///
/// Encoding (23 bytes, little-endian): version u8 = 1 | kind u8 | codec u8 |
/// pack u32 | offset u64 | stored_len u32 | raw_len u32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    /// Object kind.
    pub kind: Kind,
    /// Payload codec.
    pub codec: Codec,
    /// Pack number.
    pub pack: u32,
    /// Offset of the record header within the pack.
    pub offset: u64,
    /// Payload length in the pack.
    pub stored_len: u32,
    /// Decoded length.
    pub raw_len: u32,
}

const LOC_VERSION: u8 = 1;
/// Length of an encoded [`Loc`].
pub const LOC_LEN: usize = 23;

impl Loc {
    /// Encode for the index.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(LOC_LEN);
        v.push(LOC_VERSION);
        v.push(self.kind as u8);
        v.push(self.codec as u8);
        v.extend_from_slice(&self.pack.to_le_bytes());
        v.extend_from_slice(&self.offset.to_le_bytes());
        v.extend_from_slice(&self.stored_len.to_le_bytes());
        v.extend_from_slice(&self.raw_len.to_le_bytes());
        v
    }

    /// Bytes the record takes in its pack (header + payload).
    pub fn record_len(&self) -> u64 {
        pack::RECORD_HEADER_LEN as u64 + self.stored_len as u64
    }

    /// Decode an index value. Lengths above [`MAX_OBJECT_LEN`] are corrupt (no
    /// record can hold them), so a damaged entry never sizes an allocation.
    pub fn decode(b: &[u8]) -> Result<Loc> {
        if b.len() != LOC_LEN || b[0] != LOC_VERSION {
            return Err(Error::corrupt("index entry", "bad length or version"));
        }
        let kind = Kind::from_u8(b[1]).ok_or_else(|| Error::corrupt("index entry", "bad kind"))?;
        let codec =
            Codec::from_u8(b[2]).ok_or_else(|| Error::corrupt("index entry", "bad codec"))?;
        let l = Loc {
            kind,
            codec,
            pack: u32::from_le_bytes(b[3..7].try_into().unwrap()),
            offset: u64::from_le_bytes(b[7..15].try_into().unwrap()),
            stored_len: u32::from_le_bytes(b[15..19].try_into().unwrap()),
            raw_len: u32::from_le_bytes(b[19..23].try_into().unwrap()),
        };
        if l.stored_len > MAX_OBJECT_LEN || l.raw_len > MAX_OBJECT_LEN {
            return Err(Error::corrupt("index entry", "length out of range"));
        }
        Ok(l)
    }
}

/// One object a [`Fallback`] returns: kind, id, verified raw bytes.
pub type FetchedObject = (Kind, ObjectId, Vec<u8>);

/// Where objects missing locally may be fetched from (the remote tier's lazy
/// hydration, `crate::remote::lazy`). A store asks it on a local miss and keeps
/// what comes back (a cache, committed in batches).
///
/// Contract: every returned object is VERIFIED (its id is the hash of its raw
/// bytes in its kind's domain) and whole (raw bytes, never a delta); `Ok(None)`
/// means no remote has it (the read stays [`Error::Missing`]; the answer is never
/// cached, so a later read asks again); a remote failure is [`Error::Remote`].
pub trait Fallback: Send + Sync {
    /// Fetch object `id` of `kind`: the object itself plus read-ahead neighbours
    /// (each `(kind, id, raw)`), or `None` when no remote has it.
    fn fetch(&self, kind: Kind, id: &ObjectId) -> Result<Option<Vec<FetchedObject>>>;
    /// Whether some remote has `id` (from the cached indexes; no network).
    fn has(&self, id: &ObjectId) -> bool;
}
