//! Tests of the store: one object-store suite on both implementations, and the
//! pack store's own properties (deltas, gc, corruption, limits).

use std::collections::HashSet;
use std::fs;

use super::objects::LOC_LEN;
use super::open::StoreDescriptor;
use super::packstore::pack_path;
use super::*;
use crate::id::ObjectId;
use crate::meta::{self, MetaOp};

fn suite(s: &dyn ObjectStore) {
    let a = s.put(Kind::Chunk, b"hello world").unwrap();
    let b = s.put(Kind::Chunk, b"hello world").unwrap();
    assert_eq!(a, b);
    assert_eq!(&**s.get(Kind::Chunk, &a).unwrap(), b"hello world");
    let big = vec![3u8; 65536];
    let c = s.put(Kind::Node, &big).unwrap();
    s.commit(vec![MetaOp::Put(meta::session_key("x"), b"1".to_vec())])
        .unwrap();
    assert_eq!(&**s.get(Kind::Node, &c).unwrap(), &big);
    assert!(s.contains(&c).unwrap());
    assert_eq!(s.meta_get(&meta::session_key("x")).unwrap().unwrap(), b"1");
    assert_eq!(s.meta_scan(meta::SESSION_PREFIX).unwrap().len(), 1);
    assert!(s.get(Kind::Chunk, &ObjectId([9; 32])).is_err());
}

#[test]
fn mem_store_suite() {
    suite(&MemStore::default());
}

#[test]
fn pack_store_suite_and_reopen() {
    let d = tempfile::tempdir().unwrap();
    let id;
    {
        let s = PackStore::open(d.path()).unwrap();
        suite(&s);
        id = s.put(Kind::Chunk, b"durable").unwrap();
        s.commit(vec![]).unwrap();
    }
    let s = PackStore::open(d.path()).unwrap();
    assert_eq!(&**s.get(Kind::Chunk, &id).unwrap(), b"durable");
    // The reopened store writes to a fresh pack.
    s.put(Kind::Chunk, b"more").unwrap();
    assert_eq!(s.writer.lock().unwrap().pack, 2);
}

fn text(seed: u32, n: u32) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            format!("fn f{i}() -> u32 {{ {} }}\n", i.wrapping_mul(seed) % 9973).into_bytes()
        })
        .collect()
}

#[test]
fn deltas_round_trip_stay_one_level_and_keep_their_base() {
    let d = tempfile::tempdir().unwrap();
    let v1 = text(7, 2000);
    let mut v2 = v1.clone();
    v2.splice(20_000..20_000, b"// an edit\n".iter().copied());
    let mut v3 = v2.clone();
    v3.splice(100..100, b"// another\n".iter().copied());
    let (a, b, c);
    {
        let s = PackStore::open(d.path()).unwrap();
        a = s.put(Kind::Chunk, &v1).unwrap();
        s.commit(vec![]).unwrap();
        b = s.put_based(Kind::Chunk, &v2, Some(a)).unwrap();
        // A delta of a delta is a delta of the whole base.
        c = s.put_based(Kind::Chunk, &v3, Some(b)).unwrap();
        s.commit(vec![]).unwrap();
        let lb = s.lookup(&b).unwrap().unwrap();
        let lc = s.lookup(&c).unwrap().unwrap();
        assert_eq!(lb.codec, Codec::Delta);
        assert_eq!(lc.codec, Codec::Delta);
        assert!(
            lb.stored_len < 200,
            "delta of a one-line edit: {} bytes",
            lb.stored_len
        );
        assert_eq!(s.delta_base_of(&c, &lc).unwrap(), a);
        // An unrelated hint is ignored when it does not pay.
        let other = s.put_based(Kind::Chunk, &text(13, 500), Some(a)).unwrap();
        assert_ne!(s.lookup(&other).unwrap().unwrap().codec, Codec::Delta);
        // A hint of another kind (even one in the cache) or a missing hint:
        // stored whole.
        s.get(Kind::Chunk, &a).unwrap();
        let n = s.put_based(Kind::Node, &v2, Some(a)).unwrap();
        assert_ne!(s.lookup(&n).unwrap().unwrap().codec, Codec::Delta);
        let m = s
            .put_based(Kind::Node, &v3[..5000], Some(ObjectId([9; 32])))
            .unwrap();
        assert_ne!(s.lookup(&m).unwrap().unwrap().codec, Codec::Delta);
    }
    let s = PackStore::open(d.path()).unwrap();
    assert_eq!(&**s.get(Kind::Chunk, &b).unwrap(), &v2);
    assert_eq!(&**s.get_uncached(Kind::Chunk, &c).unwrap(), &v3);
    // gc keeping only the deltas keeps their base.
    s.gc_begin();
    let keep: HashSet<crate::id::ObjectId> = [b, c].into_iter().collect();
    assert!(s.unreachable(&keep).unwrap().iter().all(|(id, _)| *id != a));
    s.sweep(&keep, vec![]).unwrap();
    s.gc_end();
    assert!(s.contains(&a).unwrap());
    drop(s);
    let s = PackStore::open(d.path()).unwrap();
    assert_eq!(&**s.read_verified(Kind::Chunk, &c).unwrap(), &v3);
    // Without their base, deltas are corrupt (never wrong data).
    s.gc_begin();
    s.db.apply(vec![MetaOp::Delete(meta::object_key(&a))])
        .unwrap();
    s.gc_end();
    let e = s.read_verified(Kind::Chunk, &b).unwrap_err();
    assert!(
        matches!(e, Error::Corrupt { .. }) && e.to_string().contains("delta base"),
        "{e}"
    );
}

#[test]
fn gc_keeps_the_base_of_an_uncommitted_delta() {
    // A delta put before the gc began, still pending while the sweep runs and
    // committed after it: its base is in no keep set, and must stay.
    let d = tempfile::tempdir().unwrap();
    let v1 = text(3, 2000);
    let mut v2 = v1.clone();
    v2.splice(5_000..5_000, b"// an edit\n".iter().copied());
    let s = PackStore::open(d.path()).unwrap();
    let a = s.put(Kind::Chunk, &v1).unwrap();
    s.commit(vec![]).unwrap();
    let b = s.put_based(Kind::Chunk, &v2, Some(a)).unwrap();
    assert_eq!(s.lookup(&b).unwrap().unwrap().codec, Codec::Delta);
    s.gc_begin();
    let keep = HashSet::new();
    assert!(s.unreachable(&keep).unwrap().iter().all(|(id, _)| *id != a));
    s.sweep(&keep, vec![]).unwrap();
    s.gc_end();
    s.commit(vec![]).unwrap();
    s.cache.remove(&a);
    assert_eq!(&**s.read_verified(Kind::Chunk, &b).unwrap(), &v2);
}

#[test]
fn version_1_store_is_upgraded() {
    let d = tempfile::tempdir().unwrap();
    drop(PackStore::open(d.path()).unwrap());
    let p = d.path().join(STORE_FILE);
    fs::write(&p, br#"{"format":"treefork-store","version":1}"#).unwrap();
    drop(PackStore::open(d.path()).unwrap());
    assert_eq!(
        check_descriptor("d", &fs::read(&p).unwrap()).unwrap(),
        STORE_VERSION
    );
    let next = STORE_VERSION + 1;
    fs::write(
        &p,
        format!(r#"{{"format":"treefork-store","version":{next}}}"#),
    )
    .unwrap();
    let e = PackStore::open(d.path()).err().unwrap();
    assert!(e.to_string().contains(&format!("version {next}")), "{e}");
}

#[test]
fn corrupt_pack_is_an_error_not_wrong_data() {
    let d = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let id;
    {
        let s = PackStore::open(d.path()).unwrap();
        id = s.put(Kind::Chunk, &data).unwrap();
        s.commit(vec![]).unwrap();
    }
    let p = pack_path(d.path(), 1);
    let mut bytes = fs::read(&p).unwrap();
    let n = bytes.len();
    bytes[n - 100] ^= 1;
    fs::write(&p, bytes).unwrap();
    let s = PackStore::open(d.path()).unwrap();
    let e = s.get(Kind::Chunk, &id).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

    /// Index entries: valid ones round-trip, any other bytes are `Corrupt`.
    #[test]
    fn loc_decoder(
        kind in 1u8..3, codec in 0u8..3, pack: u32, offset: u64,
    stored_len in 0..=pack::MAX_OBJECT_LEN, raw_len in 0..=pack::MAX_OBJECT_LEN,
        flip in proptest::option::of((0usize..LOC_LEN, 0u8..8)),
        cut in 0usize..LOC_LEN + 2,
        junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
    ) {
        let l = Loc {
            kind: Kind::from_u8(kind).unwrap(),
            codec: Codec::from_u8(codec).unwrap(),
            pack, offset, stored_len, raw_len,
        };
        let mut b = l.encode();
        proptest::prop_assert_eq!(Loc::decode(&b).unwrap(), l);
        if let Some((i, bit)) = flip {
            b[i] ^= 1 << bit;
        }
        b.truncate(cut);
        match Loc::decode(&b) {
            Ok(d) => proptest::prop_assert_eq!(d.encode(), b),
            Err(e) => proptest::prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e),
        }
        if let Ok(d) = Loc::decode(&junk) {
            proptest::prop_assert_eq!(d.encode(), junk);
        }
    }

    /// Store descriptors: the written one is accepted, anything else is refused
    /// as corrupt (never a panic).
    #[test]
    fn descriptor_decoder(
        flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 0u8..8), 0..3),
        cut in proptest::prelude::any::<usize>(),
        junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100),
    ) {
        let good = serde_json::to_vec_pretty(&StoreDescriptor {
            format: STORE_FORMAT.into(),
            version: STORE_VERSION,
        })
        .unwrap();
        proptest::prop_assert!(check_descriptor("d", &good).is_ok());
        let mut m = good.clone();
        for (at, bit) in &flips {
            let i = at % m.len();
            m[i] ^= 1 << bit;
        }
        m.truncate(cut % (m.len() + 1));
        if let Err(e) = check_descriptor("d", &m) {
            proptest::prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e);
        }
        proptest::prop_assert!(check_descriptor("d", &junk).is_err());
    }
}

#[test]
fn foreign_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("notes.txt"), b"x").unwrap();
    let e = PackStore::open(d.path()).err().unwrap();
    assert!(e.to_string().contains("not a treefork store"), "{e}");
}
