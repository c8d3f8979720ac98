//! Tests of the store defects closed by issue 12 (each failed before its fix): fds,
//! object size limit, damaged lengths, the reserve during repack, the directory
//! fsync after a rotation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fs;
use std::os::unix::fs::FileExt;

use super::objects::Loc;
use super::pack::MAX_OBJECT_LEN;
use super::packstore::pack_path;
use super::*;
use crate::error::Error;
use crate::meta::{self, MetaOp};

/// Counts the largest single allocation of the current thread (while armed), so a
/// test can prove a read never sized an allocation from damaged bytes.
struct Counting;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = ARMED.try_with(|a| {
        if a.get() {
            let _ = LARGEST.try_with(|m| m.set(m.get().max(size)));
        }
    });
}

// SAFETY: every method forwards to the system allocator with the caller's
// arguments unchanged; `note` only touches const-initialised thread-locals (no
// allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size());
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(new);
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The largest allocation `f` made on this thread.
fn largest_alloc<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|m| m.set(0));
    ARMED.with(|a| a.set(true));
    let r = f();
    ARMED.with(|a| a.set(false));
    (r, LARGEST.with(|m| m.get()))
}

fn text(n: u32) -> Vec<u8> {
    (0..n)
        .flat_map(|i| format!("line {i} of a text that compresses\n").into_bytes())
        .collect()
}

#[test]
fn read_fds_are_bounded_by_an_lru() {
    let d = tempfile::tempdir().unwrap();
    let n = fds::DEFAULT_CAPACITY as u32 + 44;
    let mut ids = Vec::new();
    {
        let s = PackStore::open(d.path()).unwrap();
        // One pack per object.
        s.writer.lock().unwrap().target = 1;
        for i in 0..n {
            ids.push(
                s.put(Kind::Chunk, format!("object {i}").as_bytes())
                    .unwrap(),
            );
        }
        s.commit(vec![]).unwrap();
    }
    assert!(pack_path(d.path(), n).exists());
    let s = PackStore::open(d.path()).unwrap();
    for id in &ids {
        s.get_uncached(Kind::Chunk, id).unwrap();
    }
    let open = fds::open_under(&d.path().join("packs"));
    assert!(
        open <= fds::DEFAULT_CAPACITY && s.fds.len() <= fds::DEFAULT_CAPACITY,
        "{open} pack fds open after reading {n} packs"
    );
    // Evicted packs are reopened on demand, the latest are still cached.
    for id in ids.iter().rev() {
        s.get_uncached(Kind::Chunk, id).unwrap();
    }
    assert!(fds::open_under(&d.path().join("packs")) <= fds::DEFAULT_CAPACITY);
}

#[test]
fn an_object_over_the_record_limit_is_refused_not_corrupted() {
    let d = tempfile::tempdir().unwrap();
    let big = vec![0u8; MAX_OBJECT_LEN as usize + 1];
    let p = PackStore::open(d.path()).unwrap();
    let m = MemStore::default();
    for s in [&p as &dyn ObjectStore, &m] {
        let e = s.put(Kind::Node, &big).unwrap_err();
        assert!(matches!(e, Error::ObjectTooLarge { .. }), "{e}");
        assert_eq!(e.errno(), libc::EFBIG);
        assert!(!s.contains(&Kind::Node.hash(&big)).unwrap());
        // The limit itself is accepted and reads back.
        let id = s.put(Kind::Node, &big[1..]).unwrap();
        s.commit(vec![]).unwrap();
        assert_eq!(
            s.get(Kind::Node, &id).unwrap().len(),
            MAX_OBJECT_LEN as usize
        );
    }
}

#[test]
fn a_damaged_index_entry_never_sizes_an_allocation() {
    let d = tempfile::tempdir().unwrap();
    let s = PackStore::open(d.path()).unwrap();
    let id = s.put(Kind::Chunk, &text(2000)).unwrap();
    s.commit(vec![]).unwrap();
    let key = meta::object_key(&id);
    let mut loc = Loc::decode(&s.meta_get(&key).unwrap().unwrap()).unwrap();
    loc.stored_len = 1 << 30;
    // A raw write of the damaged entry (Loc::encode does not check).
    s.db.apply(vec![MetaOp::Put(key, loc.encode())]).unwrap();
    drop(s);
    let s = PackStore::open(d.path()).unwrap();
    let (r, largest) = largest_alloc(|| s.get(Kind::Chunk, &id));
    let e = r.unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    assert!(largest < 8 << 20, "a read allocated {largest} bytes");
}

#[test]
fn a_record_header_not_matching_its_index_entry_is_corrupt_before_decoding() {
    let d = tempfile::tempdir().unwrap();
    let base = text(3000);
    let mut raw = base.clone();
    raw.splice(1000..1000, b"an edit".iter().copied());
    let id;
    let loc;
    {
        let s = PackStore::open(d.path()).unwrap();
        let b = s.put(Kind::Chunk, &base).unwrap();
        id = s.put_based(Kind::Chunk, &raw, Some(b)).unwrap();
        s.commit(vec![]).unwrap();
        let v = s.meta_get(&meta::object_key(&id)).unwrap();
        loc = Loc::decode(&v.unwrap()).unwrap();
    }
    // A delta: its decoder sizes its output by the header's raw_len.
    assert_eq!(loc.codec, Codec::Delta);
    // Damage the header's raw_len (bytes 8..12): still within the format's bounds,
    // so only the comparison with the index entry can catch it.
    let f = fs::OpenOptions::new()
        .write(true)
        .open(pack_path(d.path(), loc.pack))
        .unwrap();
    f.write_all_at(&MAX_OBJECT_LEN.to_le_bytes(), loc.offset + 8)
        .unwrap();
    let s = PackStore::open(d.path()).unwrap();
    let (r, largest) = largest_alloc(|| s.get(Kind::Chunk, &id));
    assert!(largest < 8 << 20, "a read allocated {largest} bytes");
    let e = r.unwrap_err();
    assert!(
        matches!(e, Error::Corrupt { .. }) && e.to_string().contains("does not match index"),
        "{e}"
    );
}

#[test]
fn repack_respects_the_space_reserve() {
    let d = tempfile::tempdir().unwrap();
    let mut s = PackStore::open(d.path()).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let raw: Vec<u8> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        ids.push(s.put(Kind::Chunk, &raw).unwrap());
    }
    s.commit(vec![]).unwrap();
    s.close_pack();
    let live: Vec<_> = s.index().unwrap();
    assert!(live.iter().all(|(_, l)| l.pack == 1) && live.len() == 3);
    // A reserve whose recovery half is still above what is free: the repack's
    // appends are refused, commits still allowed.
    let (_, _, avail) = statvfs_bytes(d.path()).unwrap();
    s.reserve = space::Reserve::with_bytes(2 * avail + (2 << 20));
    let e = s.repack(1, &live).unwrap_err();
    assert!(matches!(&e, Error::StoreFull { .. }), "{e}");
    // Nothing moved, nothing deleted.
    assert!(pack_path(d.path(), 1).exists());
    assert!(s.index().unwrap().iter().all(|(_, l)| l.pack == 1));
    s.reserve = space::Reserve::with_bytes(0);
    s.repack(1, &live).unwrap();
    assert!(!pack_path(d.path(), 1).exists());
    for id in &ids {
        s.read_verified(Kind::Chunk, id).unwrap();
    }
}

#[test]
fn a_failed_directory_fsync_after_a_rotation_fails_the_commit() {
    let d = tempfile::tempdir().unwrap();
    let s = PackStore::open(d.path()).unwrap();
    let id = s.put(Kind::Chunk, b"in a new pack").unwrap();
    // The packs directory cannot be opened for its fsync.
    let packs = d.path().join("packs");
    let moved = d.path().join("packs.moved");
    fs::rename(&packs, &moved).unwrap();
    let e = s.commit(vec![]).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert!(
        s.meta_get(&meta::object_key(&id)).unwrap().is_none(),
        "the index names a pack whose directory entry is not durable"
    );
    // Once the directory can be synced, the same commit goes through.
    fs::rename(&moved, &packs).unwrap();
    s.commit(vec![]).unwrap();
    assert!(s.meta_get(&meta::object_key(&id)).unwrap().is_some());
}
