//! Tests of lazy hydration against `Client::memory` (object_store's in-memory
//! backend) and a real on-disk `PackStore`: a miss is fetched, verified and kept;
//! read-ahead brings the following records in the same request; a corrupted
//! remote record is refused and not kept; a negative answer is not remembered; a
//! delta's base is fetched too; an unreachable remote is `Error::Remote`.

use std::sync::Arc;

use super::*;
use crate::remote::client::PutIf;
use crate::remote::packidx::{Built, PackBuilder};
use crate::store::PackStore;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<dyn ObjectStore>,
    lazy: Arc<Lazy>,
    src: Source,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(PackStore::open(&dir.path().join("s")).unwrap());
    let index = Arc::new(RemoteIndex::load(&dir.path().join("idx")).unwrap());
    let src = Source {
        name: "origin".into(),
        client: Client::memory("origin"),
        index,
    };
    let lazy = Arc::new(Lazy::new(vec![src.clone()], Arc::downgrade(&store)));
    store.set_fallback(Some(lazy.clone()));
    Fixture {
        _dir: dir,
        store,
        lazy,
        src,
    }
}

/// Incompressible bytes (so each record is its full size).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn upload(src: &Source, b: &Built) {
    src.client
        .put(&layout::pack_key(&b.hash), b.pack.clone(), PutIf::Always)
        .unwrap();
    src.client
        .put(&layout::idx_key(&b.hash), b.idx.clone(), PutIf::Always)
        .unwrap();
    src.index.add(&b.idx).unwrap();
}

type Objects = Vec<(crate::id::ObjectId, Vec<u8>)>;

fn chunk_pack(n: u64, len: usize) -> (Objects, Built) {
    let mut pb = PackBuilder::new();
    let mut objs = Vec::new();
    for i in 0..n {
        let raw = noise(i + 1, len);
        let id = pb.add_raw(Kind::Chunk, &raw).unwrap();
        objs.push((id, raw));
    }
    (objs, pb.finish())
}

#[test]
fn a_miss_is_fetched_verified_kept_with_read_ahead() {
    let f = fixture();
    let (objs, built) = chunk_pack(40, 64 << 10);
    upload(&f.src, &built);
    // First read: one request brings the chunk and those after it up to 2 MiB.
    assert_eq!(&**f.store.get(Kind::Chunk, &objs[0].0).unwrap(), &objs[0].1);
    let s = f.lazy.stats();
    assert_eq!(s.requests, 1);
    let ahead = (READ_AHEAD_BYTES / ((64 << 10) + 48)) as usize;
    assert_eq!(s.objects as usize, ahead);
    // Reading the file sequentially: one request per ~2 MiB, not per chunk.
    for (id, raw) in &objs {
        assert_eq!(&**f.store.get(Kind::Chunk, id).unwrap(), raw);
    }
    let s = f.lazy.stats();
    assert_eq!(s.requests, 40usize.div_ceil(ahead) as u64, "{s:?}");
    assert_eq!(s.objects, 40);
    // Kept locally (and durable: batches are committed).
    for (id, _) in &objs {
        assert!(f.store.contains(id).unwrap());
    }
    // Read-ahead stops at a record already present.
    let f2 = fixture();
    upload(&f2.src, &built);
    f2.store.put(Kind::Chunk, &objs[2].1).unwrap();
    f2.store.get(Kind::Chunk, &objs[0].0).unwrap();
    assert_eq!(f2.lazy.stats().objects, 2);
    assert!(f2.lazy.has(&objs[5].0));
}

#[test]
fn negative_answers_are_not_remembered() {
    let f = fixture();
    let (objs, built) = chunk_pack(2, 1000);
    assert!(matches!(
        f.store.get(Kind::Chunk, &objs[0].0),
        Err(Error::Missing(_))
    ));
    // The object arrives on the remote (the index learns it): the next read works.
    upload(&f.src, &built);
    // A kind mismatch is no hit.
    assert!(matches!(
        f.store.get(Kind::Node, &objs[0].0),
        Err(Error::Missing(_))
    ));
    assert_eq!(&**f.store.get(Kind::Chunk, &objs[0].0).unwrap(), &objs[0].1);
}

#[test]
fn an_object_pushed_after_the_index_was_read_is_found_by_a_refresh() {
    let f = fixture();
    let (objs, built) = chunk_pack(1, 1000);
    // On the remote, but not in our index yet.
    f.src
        .client
        .put(
            &layout::pack_key(&built.hash),
            built.pack.clone(),
            PutIf::Always,
        )
        .unwrap();
    f.src
        .client
        .put(
            &layout::idx_key(&built.hash),
            built.idx.clone(),
            PutIf::Always,
        )
        .unwrap();
    assert_eq!(&**f.store.get(Kind::Chunk, &objs[0].0).unwrap(), &objs[0].1);
}

#[test]
fn a_corrupted_remote_record_is_refused_and_not_kept() {
    let f = fixture();
    let (objs, built) = chunk_pack(3, 4096);
    upload(&f.src, &built);
    // Flip one payload byte of the second record (its header still matches).
    let e = built.entries.iter().find(|e| e.id == objs[1].0).unwrap();
    let mut bad = built.pack.clone();
    bad[(e.offset + 48 + 100) as usize] ^= 0x40;
    f.src
        .client
        .put(&layout::pack_key(&built.hash), bad, PutIf::Always)
        .unwrap();
    let err = f.store.get(Kind::Chunk, &objs[1].0).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(!f.store.contains(&objs[1].0).unwrap());
    // A neighbour read ahead past a bad record is skipped, the good ones kept.
    assert_eq!(&**f.store.get(Kind::Chunk, &objs[0].0).unwrap(), &objs[0].1);
    assert!(f.store.contains(&objs[2].0).unwrap());
    assert!(!f.store.contains(&objs[1].0).unwrap());
}

#[test]
fn a_delta_brings_its_base() {
    let f = fixture();
    let base = noise(7, 20_000);
    let mut raw = base.clone();
    raw[100..110].copy_from_slice(b"0123456789");
    let base_id = Kind::Chunk.hash(&base);
    let id = Kind::Chunk.hash(&raw);
    let delta = crate::store::pack::compress_delta(&raw, &base_id, &base).unwrap();
    let mut pb = PackBuilder::new();
    pb.add_raw(Kind::Chunk, &base).unwrap();
    pb.add_record(
        Kind::Chunk,
        id,
        Codec::Delta,
        raw.len() as u32,
        &delta,
        Some(base_id),
    )
    .unwrap();
    let built = pb.finish();
    upload(&f.src, &built);
    assert_eq!(&**f.store.get(Kind::Chunk, &id).unwrap(), &raw);
    assert!(f.store.contains(&base_id).unwrap());
}

#[test]
fn an_unreachable_remote_is_a_remote_error() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(PackStore::open(&dir.path().join("s")).unwrap());
    let f = fixture();
    let (objs, built) = chunk_pack(1, 1000);
    upload(&f.src, &built);
    let target = crate::remote::client::S3Target {
        bucket: "bkt".into(),
        prefix: String::new(),
        endpoint: "http://127.0.0.1:9".into(),
        region: "us-east-1".into(),
    };
    let creds = crate::remote::client::Credentials {
        key_id: "k".into(),
        secret: "s".into(),
        token: None,
    };
    let down = Source {
        name: "down".into(),
        client: crate::remote::client::s3("down", &target, &creds).unwrap(),
        index: f.src.index.clone(),
    };
    store.set_fallback(Some(Arc::new(Lazy::new(
        vec![down],
        Arc::downgrade(&store),
    ))));
    let err = store.get(Kind::Chunk, &objs[0].0).unwrap_err();
    assert!(matches!(err, Error::Remote { .. }), "{err}");
    assert_eq!(err.errno(), libc::EIO);
}

/// A pack of deltas `ids[i]` on `bases[i]` whose payloads name their base and
/// are otherwise junk (a hostile index: nothing here decodes).
fn junk_deltas(pairs: &[(crate::id::ObjectId, crate::id::ObjectId)]) -> Built {
    let mut pb = PackBuilder::new();
    for (id, base) in pairs {
        let mut payload = base.0.to_vec();
        payload.extend_from_slice(&noise(3, 64));
        pb.add_record(Kind::Chunk, *id, Codec::Delta, 4096, &payload, Some(*base))
            .unwrap();
    }
    pb.finish()
}

#[test]
fn a_delta_cycle_is_corrupt_not_a_stack_overflow() {
    let f = fixture();
    let (a, b) = (Kind::Chunk.hash(b"a"), Kind::Chunk.hash(b"b"));
    upload(&f.src, &junk_deltas(&[(a, b), (b, a)]));
    for id in [a, b] {
        let err = f.store.get(Kind::Chunk, &id).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("delta cycle") && msg.contains("origin"),
            "{msg}"
        );
        assert_eq!(err.errno(), libc::EIO);
        assert!(!f.store.contains(&id).unwrap());
    }
    // An object that is a delta on itself.
    let c = Kind::Chunk.hash(b"c");
    upload(&f.src, &junk_deltas(&[(c, c)]));
    let err = f.store.get(Kind::Chunk, &c).unwrap_err();
    assert!(err.to_string().contains("delta cycle"), "{err}");
}

/// A chain `objs[n]` delta on `objs[n-1]` ... on `objs[0]` (whole), each record
/// in its own pack (so every base is a separate remote read).
fn chain(f: &Fixture, n: usize) -> Vec<(crate::id::ObjectId, Vec<u8>)> {
    let mut objs: Vec<(crate::id::ObjectId, Vec<u8>)> = Vec::new();
    let mut raw = noise(11, 8192);
    let mut pb = PackBuilder::new();
    objs.push((pb.add_raw(Kind::Chunk, &raw).unwrap(), raw.clone()));
    upload(&f.src, &pb.finish());
    for i in 1..=n {
        let (base_id, base) = objs[i - 1].clone();
        raw[i * 10] ^= 0x55;
        let id = Kind::Chunk.hash(&raw);
        let delta = crate::store::pack::compress_delta(&raw, &base_id, &base).unwrap();
        let mut pb = PackBuilder::new();
        pb.add_record(
            Kind::Chunk,
            id,
            Codec::Delta,
            raw.len() as u32,
            &delta,
            Some(base_id),
        )
        .unwrap();
        upload(&f.src, &pb.finish());
        objs.push((id, raw.clone()));
    }
    objs
}

#[test]
fn delta_chains_are_followed_up_to_the_bound() {
    let f = fixture();
    let objs = chain(&f, MAX_DELTA_DEPTH);
    let (id, raw) = objs.last().unwrap();
    assert_eq!(&**f.store.get(Kind::Chunk, id).unwrap(), raw);
    let g = fixture();
    let objs = chain(&g, MAX_DELTA_DEPTH + 1);
    let err = g
        .store
        .get(Kind::Chunk, &objs.last().unwrap().0)
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("delta chain longer"), "{err}");
}
