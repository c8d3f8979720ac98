use super::*;
use proptest::prelude::*;

fn text(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .take(n)
        .collect()
}

/// A pack built from raw objects and one copied delta record: `pack::scan` reads it
/// as a local pack, the idx decodes to the same entries, and every record reads back
/// (header checked) and decodes to its object.
#[test]
fn built_pack_is_a_local_pack_and_reads_back() {
    let base = text(20_000);
    let mut edited = base.clone();
    edited.extend_from_slice(b"one more line\n");
    let bid = Kind::Chunk.hash(&base);
    let did = Kind::Chunk.hash(&edited);
    let delta = pack::compress_delta(&edited, &bid, &base).unwrap();

    let mut b = PackBuilder::new();
    assert!(b.is_empty());
    assert_eq!(b.add_raw(Kind::Chunk, &base).unwrap(), bid);
    assert!(
        b.add_record(
            Kind::Chunk,
            did,
            Codec::Delta,
            edited.len() as u32,
            &delta,
            Some(bid)
        )
        .unwrap()
    );
    let nid = b.add_raw(Kind::Node, b"a node").unwrap();
    // Adding an id again is a no-op.
    assert_eq!(b.add_raw(Kind::Chunk, &base).unwrap(), bid);
    assert_eq!(b.count(), 3);
    let len = b.len();
    let built = b.finish();
    assert_eq!(built.pack.len() as u64, len);
    assert_eq!(built.hash.0, *blake3::hash(&built.pack).as_bytes());

    let (recs, err) = pack::scan(&built.pack);
    assert!(err.is_none());
    assert_eq!(recs.len(), 3);

    let idx = Idx::decode(&built.idx).unwrap();
    assert_eq!(idx.pack_hash, built.hash);
    assert_eq!(idx.pack_len, built.pack.len() as u64);
    assert_eq!(idx.entries, built.entries);
    assert!(idx.entries.windows(2).all(|w| w[0].id < w[1].id));

    let read = |id: &crate::id::ObjectId| {
        let e = idx.find(id).unwrap();
        let r = e.range();
        read_record(
            &built.hash,
            e,
            &built.pack[r.start as usize..r.end as usize],
        )
        .unwrap()
    };
    let sb = read(&bid);
    let got_base = decode_verified(Kind::Chunk, &bid, &sb, None).unwrap();
    assert_eq!(got_base, base);
    let sd = read(&did);
    assert_eq!(sd.codec, Codec::Delta);
    assert_eq!(sd.base, Some(bid));
    assert_eq!(
        decode_verified(Kind::Chunk, &did, &sd, Some(&got_base)).unwrap(),
        edited
    );
    // A delta without its base, or against the wrong base, is refused.
    assert!(decode_verified(Kind::Chunk, &did, &sd, None).is_err());
    let sn = read(&nid);
    assert_eq!(
        decode_verified(Kind::Node, &nid, &sn, None).unwrap(),
        b"a node"
    );
    // Wrong kind: the hash domain differs.
    assert!(matches!(
        decode_verified(Kind::Chunk, &nid, &sn, None),
        Err(Error::Corrupt { .. })
    ));
}

/// The header must match the entry: a record read at another entry's range, or a
/// flipped payload byte, is Corrupt naming the pack, never returned.
#[test]
fn mismatched_or_damaged_records_are_refused() {
    let mut b = PackBuilder::new();
    let a = b.add_raw(Kind::Chunk, &text(5000)).unwrap();
    let c = b.add_raw(Kind::Chunk, &text(6000)).unwrap();
    let built = b.finish();
    let idx = Idx::decode(&built.idx).unwrap();
    let (ea, ec) = (idx.find(&a).unwrap(), idx.find(&c).unwrap());
    let rc = ec.range();
    let bytes_c = &built.pack[rc.start as usize..rc.end as usize];
    assert!(read_record(&built.hash, ea, bytes_c).is_err());
    let mut damaged = bytes_c.to_vec();
    let n = damaged.len();
    damaged[n - 5] ^= 0x10;
    let s = read_record(&built.hash, ec, &damaged).unwrap();
    match decode_verified(Kind::Chunk, &c, &s, None) {
        Err(Error::Corrupt { what, .. }) => {
            assert!(what.contains(&crate::id::hex(&built.hash.0[..6])), "{what}")
        }
        other => panic!("{other:?}"),
    }
    // Truncated record bytes.
    assert!(read_record(&built.hash, ec, &bytes_c[..bytes_c.len() - 1]).is_err());
}

#[test]
fn add_record_checks_the_delta_base() {
    let mut b = PackBuilder::new();
    let id = ObjectId([1u8; 32]);
    let payload = [7u8; 40];
    assert!(
        b.add_record(
            Kind::Chunk,
            id,
            Codec::Delta,
            10,
            &payload,
            Some(ObjectId([8; 32]))
        )
        .is_err()
    );
    assert!(
        b.add_record(Kind::Chunk, id, Codec::Delta, 10, &payload, None)
            .is_err()
    );
    assert!(
        b.add_record(Kind::Chunk, id, Codec::Delta, 10, &payload[..20], None)
            .is_err()
    );
    assert!(
        b.add_record(
            Kind::Chunk,
            id,
            Codec::Raw,
            10,
            &payload,
            Some(ObjectId([7; 32]))
        )
        .is_err()
    );
    assert!(
        b.add_record(
            Kind::Chunk,
            id,
            Codec::Delta,
            10,
            &payload,
            Some(ObjectId([7; 32]))
        )
        .unwrap()
    );
    assert_eq!(b.count(), 1);
}

/// An empty pack has a valid idx too.
#[test]
fn empty_pack_round_trips() {
    let built = PackBuilder::new().finish();
    let idx = Idx::decode(&built.idx).unwrap();
    assert!(idx.entries.is_empty());
    assert_eq!(idx.pack_len, pack::PACK_HEADER_LEN);
}

fn entry_strategy() -> impl Strategy<Value = IdxEntry> {
    (
        any::<[u8; 32]>(),
        prop_oneof![Just(Kind::Chunk), Just(Kind::Node)],
        0u8..3,
        0u64..1_000_000,
        32u32..100_000,
        0u32..MAX_OBJECT_LEN,
        any::<[u8; 32]>(),
    )
        .prop_map(|(id, kind, c, off, stored_len, raw_len, base)| {
            let codec = Codec::from_u8(c).unwrap();
            IdxEntry {
                id: ObjectId(id),
                kind,
                codec,
                offset: pack::PACK_HEADER_LEN + off,
                stored_len,
                raw_len,
                base: (codec == Codec::Delta).then_some(ObjectId(base)),
            }
        })
}

fn idx_strategy() -> impl Strategy<Value = Idx> {
    (
        any::<[u8; 32]>(),
        proptest::collection::vec(entry_strategy(), 0..20),
        0u64..1000,
    )
        .prop_map(|(pack_hash, mut entries, slack)| {
            entries.sort_by_key(|e| e.id);
            entries.dedup_by(|a, b| a.id == b.id);
            let pack_len = entries.iter().map(|e| e.range().end).max().unwrap_or(16) + slack;
            Idx {
                pack_hash: PackHash(pack_hash),
                pack_len,
                entries,
            }
        })
}

proptest! {
    #[test]
    fn idx_round_trip(idx in idx_strategy()) {
        let b = idx.encode();
        prop_assert_eq!(b.len(), IDX_HEADER_LEN + IDX_TRAILER_LEN + idx.entries.len() * IDX_ENTRY_LEN);
        prop_assert_eq!(Idx::decode(&b).unwrap(), idx);
    }

    /// Any truncation, or any flipped bit, is refused as Corrupt (the trailer hash
    /// covers every byte; the trailer itself is compared whole).
    #[test]
    fn idx_damage_is_refused(idx in idx_strategy(), cut in any::<usize>(), at in any::<usize>(), bit in 0u8..8) {
        let b = idx.encode();
        let cut = cut % b.len();
        prop_assert!(matches!(Idx::decode(&b[..cut]), Err(Error::Corrupt { .. })), "truncated accepted");
        let mut f = b.clone();
        let i = at % f.len();
        f[i] ^= 1 << bit;
        prop_assert!(matches!(Idx::decode(&f), Err(Error::Corrupt { .. })), "flip accepted");
    }

    /// Arbitrary bytes, and arbitrary bodies under a valid header and trailer (so
    /// the per-entry checks run): never a panic, and whatever decodes re-encodes to
    /// the same bytes and satisfies the invariants.
    #[test]
    fn idx_arbitrary_input(
        raw in proptest::collection::vec(any::<u8>(), 0..400),
        count in 0u32..4,
        body in proptest::collection::vec(any::<u8>(), 0..(4 * IDX_ENTRY_LEN)),
        pack_len in any::<u64>(),
    ) {
        let _ = Idx::decode(&raw);
        let mut b = IDX_MAGIC.to_vec();
        b.extend_from_slice(&IDX_VERSION.to_le_bytes());
        b.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(&pack_len.to_le_bytes());
        b.extend_from_slice(&[9u8; 32]);
        b.extend_from_slice(&body);
        let h = blake3::hash(&b);
        b.extend_from_slice(h.as_bytes());
        if let Ok(idx) = Idx::decode(&b) {
            prop_assert_eq!(idx.encode(), b);
            for e in &idx.entries {
                prop_assert!(e.range().end <= idx.pack_len);
                prop_assert!(e.stored_len <= MAX_OBJECT_LEN && e.raw_len <= MAX_OBJECT_LEN);
                prop_assert_eq!(e.base.is_some(), e.codec == Codec::Delta);
            }
            prop_assert!(idx.entries.windows(2).all(|w| w[0].id < w[1].id));
        }
    }

    /// Packs of random objects: scan, idx and read_record/decode_verified agree.
    #[test]
    fn built_packs_read_back(objs in proptest::collection::vec(
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..500),
            (any::<u8>(), 0usize..5000).prop_map(|(b, n)| vec![b; n]),
        ], 0..8))
    {
        let mut b = PackBuilder::new();
        let mut ids = Vec::new();
        for (i, o) in objs.iter().enumerate() {
            let kind = if i % 2 == 0 { Kind::Chunk } else { Kind::Node };
            ids.push((kind, b.add_raw(kind, o).unwrap(), o.clone()));
        }
        let built = b.finish();
        let (recs, err) = pack::scan(&built.pack);
        prop_assert!(err.is_none());
        prop_assert_eq!(recs.len(), built.entries.len());
        let idx = Idx::decode(&built.idx).unwrap();
        for (kind, id, raw) in ids {
            let e = idx.find(&id).unwrap();
            let r = e.range();
            let s = read_record(&built.hash, e, &built.pack[r.start as usize..r.end as usize]).unwrap();
            prop_assert_eq!(decode_verified(kind, &id, &s, None).unwrap(), raw);
        }
    }
}

/// Push's copy path: a local store's committed records (whole and delta) copied
/// as stored via `ObjectStore::stored_record` make a remote pack whose objects
/// verify; uncommitted or absent objects answer None; MemStore answers None.
#[test]
fn local_stored_records_copy_into_a_remote_pack() {
    use crate::store::{ObjectStore, PackStore};
    let d = tempfile::tempdir().unwrap();
    let s = PackStore::open(d.path()).unwrap();
    let base = text(30_000);
    let mut edited = base.clone();
    edited.extend_from_slice(b"tail\n");
    let bid = s.put(Kind::Chunk, &base).unwrap();
    let did = s.put_based(Kind::Chunk, &edited, Some(bid)).unwrap();
    assert_eq!(s.stored_record(&bid).unwrap(), None, "not committed yet");
    s.commit(vec![]).unwrap();
    let pending = s.put(Kind::Node, b"pending").unwrap();
    assert_eq!(s.stored_record(&pending).unwrap(), None);
    assert_eq!(s.stored_record(&ObjectId([3; 32])).unwrap(), None);

    let mut b = PackBuilder::new();
    for id in [bid, did] {
        let (loc, payload) = s.stored_record(&id).unwrap().unwrap();
        assert_eq!(payload.len(), loc.stored_len as usize);
        let h = RecordHeader {
            kind: loc.kind,
            codec: loc.codec,
            raw_len: loc.raw_len,
            stored_len: loc.stored_len,
            id,
        };
        let base = pack::delta_base(&h, &payload);
        b.add_record(loc.kind, id, loc.codec, loc.raw_len, &payload, base)
            .unwrap();
    }
    let built = b.finish();
    let idx = Idx::decode(&built.idx).unwrap();
    let de = idx.find(&did).unwrap();
    assert_eq!(de.codec, Codec::Delta, "the store kept a delta");
    assert_eq!(de.base, Some(bid));
    let read = |e: &IdxEntry| {
        let r = e.range();
        read_record(
            &built.hash,
            e,
            &built.pack[r.start as usize..r.end as usize],
        )
        .unwrap()
    };
    let got_base =
        decode_verified(Kind::Chunk, &bid, &read(idx.find(&bid).unwrap()), None).unwrap();
    let got = decode_verified(Kind::Chunk, &did, &read(de), Some(&got_base)).unwrap();
    assert_eq!(got, edited);
    let m = crate::store::MemStore::default();
    let mid = m.put(Kind::Chunk, b"x").unwrap();
    assert_eq!(m.stored_record(&mid).unwrap(), None);
}
