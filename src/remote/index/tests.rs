use super::*;
use crate::remote::client::{Client, PutIf};
use crate::remote::packidx::PackBuilder;
use crate::remote::refval::GcCondemned;

fn pack_of(objs: &[&[u8]]) -> (crate::remote::packidx::Built, Vec<crate::id::ObjectId>) {
    let mut b = PackBuilder::new();
    let ids = objs
        .iter()
        .map(|o| b.add_raw(Kind::Chunk, o).unwrap())
        .collect();
    (b.finish(), ids)
}

fn upload(c: &Client, built: &crate::remote::packidx::Built) {
    c.put(
        &layout::pack_key(&built.hash),
        built.pack.clone(),
        PutIf::Absent,
    )
    .unwrap();
    c.put(
        &layout::idx_key(&built.hash),
        built.idx.clone(),
        PutIf::Absent,
    )
    .unwrap();
}

/// refresh learns the packs whose idx is on the remote (a pack without its idx does
/// not exist), caches them, and a second index loads them from the cache alone.
#[test]
fn refresh_caches_and_load_reads_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let c = Client::memory("r");
    let (p1, ids1) = pack_of(&[b"one", b"two"]);
    let (p2, ids2) = pack_of(&[b"three"]);
    upload(&c, &p1);
    // p2: pack only (a killed push's leftover).
    c.put(&layout::pack_key(&p2.hash), p2.pack.clone(), PutIf::Absent)
        .unwrap();
    let ix = RemoteIndex::load(dir.path()).unwrap();
    assert!(ix.is_empty());
    let r = ix.refresh(&c).unwrap();
    assert_eq!(r.new_packs, vec![p1.hash]);
    assert!(ids1.iter().all(|i| ix.has(i)));
    assert!(!ix.has(&ids2[0]));
    let e = ix.get(&ids1[0]).unwrap();
    assert_eq!(e.pack, p1.hash);
    let bytes = c.get_range(&layout::pack_key(&p1.hash), e.range()).unwrap();
    let s = e.read_record(&bytes).unwrap();
    assert_eq!(
        crate::remote::packidx::decode_verified(Kind::Chunk, &ids1[0], &s, None).unwrap(),
        b"one"
    );
    // Nothing new: no download.
    assert!(ix.refresh(&c).unwrap().new_packs.is_empty());

    let again = RemoteIndex::load(dir.path()).unwrap();
    assert_eq!(again.len(), 2);
    assert_eq!(again.get(&ids1[1]), ix.get(&ids1[1]));
    let packs = again.packs();
    assert_eq!(packs.len(), 1);
    assert_eq!(
        (packs[0].count, packs[0].kinds.clone()),
        (2, vec![Kind::Chunk])
    );
}

/// Condemned packs hide their objects (unless another live pack has them); a
/// vanished idx drops its pack; both survive a reload from the cache.
#[test]
fn condemned_and_vanished_packs() {
    let dir = tempfile::tempdir().unwrap();
    let c = Client::memory("r");
    let (p1, ids1) = pack_of(&[b"shared", b"only-in-1"]);
    let (p2, _) = pack_of(&[b"shared", b"only-in-2"]);
    upload(&c, &p1);
    upload(&c, &p2);
    let ix = RemoteIndex::load(dir.path()).unwrap();
    ix.refresh(&c).unwrap();
    let cond = GcCondemned {
        version: 1,
        time: 1,
        packs: vec![p1.hash.to_hex()],
        ..GcCondemned::default()
    };
    c.put(layout::GC_CONDEMNED, cond.encode(), PutIf::Always)
        .unwrap();
    let r = ix.refresh(&c).unwrap();
    assert_eq!(r.condemned, 1);
    assert!(!ix.has(&ids1[1]), "only in a condemned pack");
    assert!(ix.get(&ids1[1]).is_none());
    assert_eq!(
        ix.get(&ids1[0]).unwrap().pack,
        p2.hash,
        "a live copy is preferred"
    );
    assert!(ix.packs().iter().any(|p| p.hash == p1.hash && p.condemned));
    let reloaded = RemoteIndex::load(dir.path()).unwrap();
    assert!(!reloaded.has(&ids1[1]));
    assert_eq!(reloaded.get(&ids1[0]).unwrap().pack, p2.hash);

    // gc deletes p1 (idx first) and the condemned list.
    c.delete(&layout::idx_key(&p1.hash)).unwrap();
    c.delete(&layout::pack_key(&p1.hash)).unwrap();
    c.delete(layout::GC_CONDEMNED).unwrap();
    let r = ix.refresh(&c).unwrap();
    assert_eq!(r.dropped_packs, vec![p1.hash]);
    assert!(!ix.has(&ids1[1]));
    assert!(ix.has(&ids1[0]));
    assert_eq!(ix.packs().len(), 1);
    assert!(!RemoteIndex::load(dir.path()).unwrap().has(&ids1[1]));
}

/// A corrupt idx on the remote is ignored (reported), and a corrupt cache file is
/// deleted on load, never trusted.
#[test]
fn corrupt_idx_is_never_used() {
    let dir = tempfile::tempdir().unwrap();
    let c = Client::memory("r");
    let (p1, ids1) = pack_of(&[b"x"]);
    let mut bad = p1.idx.clone();
    bad[60] ^= 1;
    c.put(&layout::idx_key(&p1.hash), bad, PutIf::Absent)
        .unwrap();
    // An idx under another pack's name.
    let (p2, ids2) = pack_of(&[b"y"]);
    c.put(
        &layout::idx_key(&crate::id::PackHash([5; 32])),
        p2.idx.clone(),
        PutIf::Absent,
    )
    .unwrap();
    let ix = RemoteIndex::load(dir.path()).unwrap();
    let r = ix.refresh(&c).unwrap();
    assert_eq!(r.corrupt.len(), 2);
    assert!(!ix.has(&ids1[0]) && !ix.has(&ids2[0]));

    ix.add(&p1.idx).unwrap();
    assert!(ix.has(&ids1[0]));
    let f = dir.path().join(format!("{}.idx", p1.hash.to_hex()));
    let mut b = std::fs::read(&f).unwrap();
    b.truncate(b.len() - 1);
    std::fs::write(&f, b).unwrap();
    let again = RemoteIndex::load(dir.path()).unwrap();
    assert!(!again.has(&ids1[0]));
    assert!(!f.exists());
    assert!(ix.add(b"garbage").is_err());
}

/// Readers (`has`/`get`) run while packs are added and a refresh rebuilds the map
/// (a condemned list appears): every added pack stays visible, none is lost to the
/// rebuild, and the compact slot stays small (millions of ids must fit).
#[test]
fn concurrent_adds_reads_and_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let c = Client::memory("r");
    let (victim, vids) = pack_of(&[b"victim"]);
    upload(&c, &victim);
    let ix = std::sync::Arc::new(RemoteIndex::load(dir.path()).unwrap());
    ix.refresh(&c).unwrap();
    let cond = GcCondemned {
        version: 1,
        time: 1,
        packs: vec![victim.hash.to_hex()],
        ..GcCondemned::default()
    };
    c.put(layout::GC_CONDEMNED, cond.encode(), PutIf::Always)
        .unwrap();
    let built: Vec<_> = (0..40u32)
        .map(|i| pack_of(&[format!("obj {i}").as_bytes()]))
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (ix, stop) = (ix.clone(), stop.clone());
            let ids: Vec<crate::id::ObjectId> = built.iter().map(|(_, i)| i[0]).collect();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for id in &ids {
                        if ix.has(id) {
                            assert!(ix.get(id).is_some());
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::scope(|s| {
        s.spawn(|| {
            for (p, _) in &built {
                upload(&c, p);
                ix.add(&p.idx).unwrap();
            }
        });
        s.spawn(|| {
            // Every refresh changes the condemned set, so every one rebuilds.
            for i in 0..31 {
                let mut cond = cond.clone();
                cond.time = i;
                if i % 2 == 1 {
                    cond.packs.clear();
                }
                c.put(layout::GC_CONDEMNED, cond.encode(), PutIf::Always)
                    .unwrap();
                ix.refresh(&c).unwrap();
            }
        });
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    readers.into_iter().for_each(|r| r.join().unwrap());
    for (p, ids) in &built {
        assert_eq!(ix.get(&ids[0]).map(|e| e.pack), Some(p.hash));
    }
    assert!(!ix.has(&vids[0]), "condemned");
    assert!(std::mem::size_of::<Slot>() <= 32);
}
