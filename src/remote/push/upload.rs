//! Uploading what a push sends: packs (each followed by its index), checkpoint
//! records, a log segment.
//!
//! Owns: pack building from local stored records (copied as stored, never
//! re-compressed, except a delta whose base the remote will not have: that object
//! goes whole), pack rotation at [`PACK_MAX`], chunks and nodes in separate packs,
//! and the progress events of the upload phase.
//!
//! Invariants: a pack's `.idx` is written only after its pack, and the remote
//! index learns it only after both (so an idx on the remote means a complete
//! pack; a killed push leaves at most a pack without idx, which readers ignore).
//! A delta record is sent as a delta only when its base is on the remote or was
//! emitted earlier in this push (same or earlier pack). Content-named objects
//! are written with the remote's content condition (`PutIf::Absent`: an object
//! already there is fine).

use std::collections::HashSet;

use serde_json::{Value, json};

use super::closure::Checkpoints;
use crate::error::Result;
use crate::id::ObjectId;
use crate::remote::client::{Client, PutIf};
use crate::remote::index::RemoteIndex;
use crate::remote::layout;
use crate::remote::packidx::PackBuilder;
use crate::store::{Codec, Kind as ObjKind, ObjectStore};

/// Packs rotate once they reach this many bytes.
pub const PACK_MAX: u64 = 32 << 20;

/// Uploads objects in packs and counts what it sent.
pub struct Uploader<'a> {
    client: &'a Client,
    index: &'a RemoteIndex,
    put_if: PutIf,
    progress: &'a mut dyn FnMut(Value),
    builder: PackBuilder,
    emitted: HashSet<ObjectId>,
    total: u64,
    /// Objects sent.
    pub objects: u64,
    /// Bytes sent (packs, their indexes, records, segments).
    pub bytes: u64,
    /// Packs sent.
    pub packs: u64,
    /// Packs rotate at this many bytes.
    pack_max: u64,
}

impl<'a> Uploader<'a> {
    /// An uploader for `total` objects.
    pub fn new(
        client: &'a Client,
        index: &'a RemoteIndex,
        put_if: PutIf,
        total: u64,
        progress: &'a mut dyn FnMut(Value),
    ) -> Uploader<'a> {
        Uploader {
            client,
            index,
            put_if,
            progress,
            builder: PackBuilder::new(),
            emitted: HashSet::new(),
            total,
            objects: 0,
            bytes: 0,
            packs: 0,
            pack_max: crate::failpoint::push_pack_kib().map_or(PACK_MAX, |k| k << 10),
        }
    }

    /// Rotate packs at `max` bytes instead of [`PACK_MAX`] (tests).
    #[cfg(test)]
    pub fn with_pack_max(mut self, max: u64) -> Self {
        self.pack_max = max;
        self
    }

    fn event(&mut self) {
        let e = json!({"event": "progress", "phase": "upload", "done": self.objects,
            "total": self.total, "bytes": self.bytes, "packs": self.packs});
        (self.progress)(e);
    }

    /// Send `ids` of `kind` (in this order; a chunk delta's base in `send` is
    /// pulled forward), then close the open pack.
    pub fn send(
        &mut self,
        store: &dyn ObjectStore,
        kind: ObjKind,
        ids: &[ObjectId],
        send: &HashSet<ObjectId>,
    ) -> Result<()> {
        for id in ids {
            self.emit(store, kind, id, send)?;
        }
        self.finish_pack()
    }

    fn emit(
        &mut self,
        store: &dyn ObjectStore,
        kind: ObjKind,
        id: &ObjectId,
        send: &HashSet<ObjectId>,
    ) -> Result<()> {
        if self.emitted.contains(id) {
            return Ok(());
        }
        match store.stored_record(id)? {
            Some((loc, payload)) if loc.codec != Codec::Delta => {
                self.builder
                    .add_record(kind, *id, loc.codec, loc.raw_len, &payload, None)?;
            }
            Some((loc, payload)) => {
                let base = crate::store::pack::payload_base(&payload)
                    .expect("a delta payload starts with its base id");
                let with_base = self.index.has(&base)
                    || self.emitted.contains(&base)
                    || (kind == ObjKind::Chunk && send.contains(&base) && {
                        self.emit(store, kind, &base, send)?;
                        true
                    });
                if with_base {
                    self.builder.add_record(
                        kind,
                        *id,
                        loc.codec,
                        loc.raw_len,
                        &payload,
                        Some(base),
                    )?;
                } else {
                    let raw = store.get(kind, id)?;
                    self.builder.add_raw(kind, &raw)?;
                }
            }
            None => {
                let raw = store.get(kind, id)?;
                self.builder.add_raw(kind, &raw)?;
            }
        }
        self.emitted.insert(*id);
        self.objects += 1;
        if self.builder.len() >= self.pack_max {
            self.finish_pack()?;
        }
        Ok(())
    }

    /// Upload the open pack (if any), then its index; tell the remote index.
    pub fn finish_pack(&mut self) -> Result<()> {
        if self.builder.count() == 0 {
            return Ok(());
        }
        let built = std::mem::take(&mut self.builder).finish();
        let (plen, ilen) = (built.pack.len() as u64, built.idx.len() as u64);
        self.client.put(
            &layout::pack_key(&built.hash),
            built.pack,
            self.put_if.clone(),
        )?;
        self.client.put(
            &layout::idx_key(&built.hash),
            built.idx.clone(),
            self.put_if.clone(),
        )?;
        self.index.add(&built.idx)?;
        self.packs += 1;
        self.bytes += plen + ilen;
        self.event();
        if let Some(ms) = crate::failpoint::push_pack_delay_ms() {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        Ok(())
    }

    /// Upload checkpoint records, level by level (parents first).
    pub fn checkpoints(&mut self, c: &Checkpoints) -> Result<()> {
        for level in &c.levels {
            for batch in level.chunks(crate::remote::client::PARALLEL) {
                let items: Vec<(String, Vec<u8>, PutIf)> = batch
                    .iter()
                    .map(|(hex, bytes, _)| {
                        (
                            layout::checkpoint_key(hex),
                            bytes.clone(),
                            self.put_if.clone(),
                        )
                    })
                    .collect();
                self.bytes += items.iter().map(|(_, b, _)| b.len() as u64).sum::<u64>();
                self.client.put_many(items)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::index::{Entry, RemoteIndex};
    use crate::remote::packidx;
    use crate::store::PackStore;

    fn text(seed: u8) -> Vec<u8> {
        let mut v: Vec<u8> = (0..20_000u32)
            .map(|i| b"abcdefghijklmnopqrstuvwxyz"[((i * 7 + i / 13) % 26) as usize])
            .collect();
        v[100] = seed;
        v
    }

    /// Read object `id` back from the remote the way a reader would: its record
    /// range, checked against the index, decoded (a delta against its base),
    /// verified by hash.
    fn read_back(c: &Client, ix: &RemoteIndex, id: &ObjectId) -> Vec<u8> {
        let e: Entry = ix.get(id).expect("indexed");
        let r = e.range();
        let bytes = c.get_range(&layout::pack_key(&e.pack), r).unwrap();
        let stored = e.read_record(&bytes).unwrap();
        let base = e.base.map(|b| read_back(c, ix, &b));
        packidx::decode_verified(e.kind, id, &stored, base.as_deref()).unwrap()
    }

    #[test]
    fn a_delta_goes_with_its_base_or_whole_and_packs_rotate() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackStore::open(&dir.path().join("store")).unwrap();
        let a = store.put(ObjKind::Chunk, &text(1)).unwrap();
        let b = store.put_based(ObjKind::Chunk, &text(2), Some(a)).unwrap();
        let d = store.put_based(ObjKind::Chunk, &text(3), Some(a)).unwrap();
        store.commit(vec![]).unwrap();
        let (loc, _) = store.stored_record(&b).unwrap().unwrap();
        assert_eq!(
            loc.codec,
            Codec::Delta,
            "the local store keeps b as a delta of a"
        );

        let client = Client::memory("origin");
        let ix = RemoteIndex::load(&dir.path().join("idx")).unwrap();
        let mut events = Vec::new();
        let mut progress = |e: Value| events.push(e);
        // b alone: its base will not be on the remote, so b goes whole.
        let mut up = Uploader::new(&client, &ix, PutIf::Absent, 1, &mut progress);
        up.send(&store, ObjKind::Chunk, &[b], &[b].into()).unwrap();
        assert_eq!(ix.get(&b).unwrap().codec, Codec::Zstd);
        assert_eq!(read_back(&client, &ix, &b), text(2));
        drop(up);
        // d with a in the same push: a is pulled forward, d stays a delta of it;
        // packs rotate at 1 byte, so a's pack precedes d's.
        let mut up = Uploader::new(&client, &ix, PutIf::Absent, 2, &mut progress).with_pack_max(1);
        up.send(&store, ObjKind::Chunk, &[d, a], &[a, d].into())
            .unwrap();
        assert_eq!((up.objects, up.packs), (2, 2));
        let (ea, ed) = (ix.get(&a).unwrap(), ix.get(&d).unwrap());
        assert_eq!((ed.codec, ed.base), (Codec::Delta, Some(a)));
        assert_ne!(ea.pack, ed.pack);
        assert_eq!(read_back(&client, &ix, &d), text(3));
        drop(up);
        // One progress event per pack, the last one complete.
        assert_eq!(events.len(), 3);
        assert_eq!(events[2]["done"], 2);
        assert_eq!(events[2]["phase"], "upload");
    }
}
