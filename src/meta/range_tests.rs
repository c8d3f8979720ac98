//! Bounded range scans of the sled database and of the in-memory store agree with a
//! plain sorted-map model: exactly the keys in the range, in order, at most `limit`.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{GEN_KEY, KeyRange, MetaDb, MetaOp, journaled};
use crate::store::{MemStore, ObjectStore};

fn model(m: &BTreeMap<Vec<u8>, Vec<u8>>, r: &KeyRange, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter()
        .filter(|(k, _)| r.contains(k))
        .take(limit)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Keys over a small alphabet (so prefixes collide), including 0xff bytes.
fn keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(
        proptest::collection::vec(
            prop_oneof![Just(b'c'), Just(b'/'), Just(0xffu8), any::<u8>()],
            0..6,
        ),
        0..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..Default::default() })]

    #[test]
    fn range_scans_match_the_model(
        ks in keys(),
        prefix in proptest::collection::vec(prop_oneof![Just(b'c'), Just(b'/'), Just(0xffu8)], 0..3),
        start in proptest::collection::vec(any::<u8>(), 0..3),
        end in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3)),
        limit in 0usize..8,
    ) {
        let d = tempfile::tempdir().unwrap();
        let db = MetaDb::open(d.path()).unwrap();
        let mem = MemStore::default();
        let m: BTreeMap<Vec<u8>, Vec<u8>> = ks
            .iter()
            .filter(|k| k.as_slice() != GEN_KEY)
            .enumerate()
            .map(|(i, k)| (k.clone(), i.to_le_bytes().to_vec()))
            .collect();
        let ops: Vec<MetaOp> = m.iter().map(|(k, v)| MetaOp::Put(k.clone(), v.clone())).collect();
        db.apply(ops.clone()).unwrap();
        mem.commit(ops).unwrap();
        // The database also holds the generation of the batch, when it was journaled.
        let mut on_disk = m.clone();
        if m.keys().any(|k| journaled(k)) {
            on_disk.insert(GEN_KEY.to_vec(), 1u64.to_be_bytes().to_vec());
        }
        for r in [KeyRange::prefix(&prefix), KeyRange { start, end }] {
            for lim in [limit, usize::MAX] {
                prop_assert_eq!(&db.range(&r, lim).unwrap(), &model(&on_disk, &r, lim), "{:?} limit {}", r, lim);
                prop_assert_eq!(&mem.meta_range(&r, lim).unwrap(), &model(&m, &r, lim), "{:?} limit {}", r, lim);
            }
        }
        prop_assert_eq!(db.scan(&prefix).unwrap(), model(&on_disk, &KeyRange::prefix(&prefix), usize::MAX));
    }
}
