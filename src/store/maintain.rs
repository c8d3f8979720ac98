//! [`Packs`] for [`PackStore`]: the index and pack maintenance gc and fsck use.
//!
//! Owns: the gc guard's life, the sweep (with the delta-base rule), pack listing,
//! closing the open pack, repacking and deleting packs.
//!
//! Invariants: a sweep keeps the base of every kept, guarded or pending delta; a
//! repack appends through the same reserve-checked path as `put` (in the reserve's
//! recovery tier, `space::Tier::Recover`, so a full store can be collected), commits the new
//! locations and only then deletes the old pack; a deleted pack's read fd is closed.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::objects::{Loc, ObjectStore, Packs};
use super::open::sync_dir;
use super::pack::{self, Codec, Kind, RecordHeader};
use super::packstore::{PackStore, pack_path};
use crate::error::{Error, Result};
use crate::id::ObjectId;
use crate::meta::{self, MetaOp};
use std::os::unix::fs::FileExt;

impl PackStore {
    /// Committed index entries neither in `keep`, nor in the gc `guard`, nor the
    /// base of a delta that stays. Called with the guard locked.
    fn dead(
        &self,
        keep: &HashSet<ObjectId>,
        guard: &HashSet<ObjectId>,
    ) -> Result<Vec<(ObjectId, Loc)>> {
        // Pending before the index: `commit` applies its entries to the index and
        // only then forgets them, so every put is seen in one or the other.
        let pending = self.pending_snapshot();
        let index = self.index()?;
        let bases = self.bases_of(keep, guard, &index, &pending)?;
        Ok(index
            .into_iter()
            .filter(|(id, _)| !keep.contains(id) && !guard.contains(id) && !bases.contains(id))
            .collect())
    }

    /// Bases to keep beside `keep`: the base of every delta in `keep` or the gc
    /// guard, and of every pending delta whatever it is (a put from before the gc
    /// began may commit after the sweep, and its base must still be there).
    /// Called with the guard locked.
    fn bases_of(
        &self,
        keep: &HashSet<ObjectId>,
        guard: &HashSet<ObjectId>,
        index: &[(ObjectId, Loc)],
        pending: &[(ObjectId, Loc)],
    ) -> Result<HashSet<ObjectId>> {
        let kept = index
            .iter()
            .filter(|(id, _)| keep.contains(id) || guard.contains(id));
        let mut out = HashSet::new();
        for (id, loc) in kept.chain(pending.iter()) {
            if loc.codec == Codec::Delta {
                let b = self.delta_base_of(id, loc)?;
                if !keep.contains(&b) {
                    out.insert(b);
                }
            }
        }
        Ok(out)
    }
}

impl Packs for PackStore {
    fn gc_begin(&self) {
        self.gc_guard.lock().unwrap().clear();
        self.gc_active.store(true, Ordering::SeqCst);
    }

    fn gc_end(&self) {
        self.gc_active.store(false, Ordering::SeqCst);
        self.gc_guard.lock().unwrap().clear();
    }

    fn index(&self) -> Result<Vec<(ObjectId, Loc)>> {
        let mut out = Vec::new();
        for (k, v) in self.db.scan(meta::OBJECT_PREFIX)? {
            let id = meta::object_id(&k)
                .ok_or_else(|| Error::corrupt("index", "malformed object key"))?;
            out.push((id, Loc::decode(&v)?));
        }
        Ok(out)
    }

    fn unreachable(&self, keep: &HashSet<ObjectId>) -> Result<Vec<(ObjectId, Loc)>> {
        let guard = self.gc_guard.lock().unwrap();
        self.dead(keep, &guard)
    }

    /// Puts wait while this runs, so an object deduplicated by a concurrent put is
    /// either kept (in the guard) or written again (its entry already gone).
    fn sweep(&self, keep: &HashSet<ObjectId>, extra: Vec<MetaOp>) -> Result<(u64, u64)> {
        let guard = self.gc_guard.lock().unwrap();
        let dead = self.dead(keep, &guard)?;
        let bytes: u64 = dead.iter().map(|(_, l)| l.record_len()).sum();
        let mut ops = extra;
        for (id, _) in &dead {
            ops.push(MetaOp::Delete(meta::object_key(id)));
            if ops.len() >= 50_000 {
                self.db.apply(std::mem::take(&mut ops))?;
            }
        }
        self.db.apply(ops)?;
        drop(guard);
        for (id, _) in &dead {
            self.cache.remove(id);
            self.reads.remove(id);
        }
        Ok((dead.len() as u64, bytes))
    }

    fn packs(&self) -> Result<Vec<(u32, u64)>> {
        let dir = self.dir.join("packs");
        let mut out = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let e = e.map_err(|e| Error::io(&dir, e))?;
            if let Some(n) = super::pack_number(&e.file_name()) {
                let len = e.metadata().map_err(|err| Error::io(e.path(), err))?.len();
                out.push((n, len));
            }
        }
        out.sort();
        Ok(out)
    }

    fn protected_packs(&self) -> HashSet<u32> {
        let w = self.writer.lock().unwrap();
        let mut p: HashSet<u32> = w.unsynced.iter().map(|(n, _)| *n).collect();
        if w.file.is_some() {
            p.insert(w.pack);
        }
        p.extend(self.pending.read().unwrap().values().map(|l| l.pack));
        p
    }

    /// A long-running daemon otherwise keeps its first pack open for up to 64 MiB.
    fn close_pack(&self) {
        let mut w = self.writer.lock().unwrap();
        let pack = w.pack;
        if w.file.is_some()
            && !w.dirty
            && w.unsynced.is_empty()
            && !self
                .pending
                .read()
                .unwrap()
                .values()
                .any(|l| l.pack == pack)
        {
            w.file = None;
        }
    }

    /// A record that fails verification, or an append the reserve refuses, stops the
    /// repack before anything is deleted.
    fn repack(&self, n: u32, live: &[(ObjectId, Loc)]) -> Result<u64> {
        let image = self.read_pack(n)?;
        let mut copied = 0u64;
        for (id, loc) in live {
            debug_assert_eq!(loc.pack, n);
            let start = loc.offset as usize;
            let end = start + loc.record_len() as usize;
            let what = || format!("{:?} object {} in pack {n}", loc.kind, id.short());
            let rec = image
                .get(start..end)
                .ok_or_else(|| Error::corrupt(what(), "pack truncated"))?;
            let h = RecordHeader::decode(rec)?;
            if h.id != *id || h.kind != loc.kind || h.stored_len != loc.stored_len {
                return Err(Error::corrupt(what(), "record header does not match index"));
            }
            self.decode_record(&h, &rec[pack::RECORD_HEADER_LEN..])?;
            let mut w = self.writer.lock().unwrap();
            let (pack, offset) = self.append(&mut w, rec, super::space::Tier::Recover)?;
            let new = Loc {
                pack,
                offset,
                ..*loc
            };
            self.pending.write().unwrap().insert(*id, new);
            copied += rec.len() as u64;
        }
        self.commit(Vec::new())?;
        self.delete_pack(n)?;
        Ok(copied)
    }

    fn delete_pack(&self, n: u32) -> Result<()> {
        let path = pack_path(&self.dir, n);
        self.fds.forget(n);
        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        sync_dir(&self.dir.join("packs"))
    }

    fn read_pack(&self, n: u32) -> Result<Vec<u8>> {
        super::read_pack(&pack_path(&self.dir, n))
    }

    fn read_verified(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>> {
        self.read_object(kind, id).map(Arc::new)
    }

    fn read_whole_at(&self, id: &ObjectId, loc: &Loc) -> Result<Vec<u8>> {
        let what = || format!("{:?} object {}", loc.kind, id.short());
        let mut buf = vec![0u8; loc.record_len() as usize];
        self.reader(loc.pack)?
            .read_exact_at(&mut buf, loc.offset)
            .map_err(|e| Error::corrupt(what(), format!("unreadable: {e}")))?;
        let h = RecordHeader::decode(&buf)?;
        if h.id != *id || h.kind != loc.kind || h.codec == Codec::Delta {
            return Err(Error::corrupt(what(), "not a whole record of this object"));
        }
        pack::decode_payload(&h, &buf[pack::RECORD_HEADER_LEN..])
    }
}
