use super::*;
use proptest::prelude::*;

fn sample() -> Segment {
    Segment {
        session: "s1".into(),
        entries: vec![
            SegEntry::Op {
                seq: 1,
                v: json!({"kind": "write", "x": [1, 2]}),
            },
            SegEntry::Attach {
                seq: 1,
                tag: b'o',
                bytes: b"out\n\x00\xff".to_vec(),
            },
            SegEntry::Msg {
                tag: b't',
                seq: 7,
                v: json!({"text": "hi"}),
            },
            SegEntry::Touched {
                path: b"dir/f\xff".to_vec(),
            },
        ],
    }
}

#[test]
fn round_trip_and_hash_named() {
    let s = sample();
    let (h, bytes) = encode(&s);
    assert_eq!(h, blake3::hash(&bytes).to_hex().as_str());
    assert_eq!(decode(&bytes, &h).unwrap(), s);
    // Deterministic: the same content names the same object.
    assert_eq!(encode(&s).0, h);
}

#[test]
fn wrong_hash_is_refused_before_decoding() {
    let (_, bytes) = encode(&sample());
    let other = "0".repeat(64);
    assert!(matches!(decode(&bytes, &other), Err(Error::Corrupt { .. })));
}

fn framed(text: &str) -> (String, Vec<u8>) {
    let b = zstd::bulk::compress(text.as_bytes(), 1).unwrap();
    (blake3::hash(&b).to_hex().to_string(), b)
}

#[test]
fn unknown_entries_are_skipped_known_bad_ones_refused() {
    let head = r#"{"format":"treefork-log-segment","version":1,"session":"s1"}"#;
    let (h, b) = framed(&format!(
        "{head}\n{{\"f\":\"future\",\"x\":1}}\n{{\"f\":\"touched\",\"path\":\"YQ==\"}}\n"
    ));
    let s = decode(&b, &h).unwrap();
    assert_eq!(
        s.entries,
        vec![SegEntry::Touched {
            path: b"a".to_vec()
        }]
    );
    for bad in [
        r#"{"f":"attach","seq":1,"tag":"x","v":""}"#,
        r#"{"f":"attach","seq":1,"tag":"o","v":"!!"}"#,
        r#"{"f":"msg","tag":"m","seq":-1,"v":{}}"#,
        r#"{"f":"op","seq":1}"#,
        r#"{"no":"f"}"#,
        "not json",
    ] {
        let (h, b) = framed(&format!("{head}\n{bad}\n"));
        assert!(
            matches!(decode(&b, &h), Err(Error::Corrupt { .. })),
            "{bad}"
        );
    }
    for head in [
        r#"{"format":"treefork-log-segment","version":2,"session":"s1"}"#,
        r#"{"format":"other","version":1,"session":"s1"}"#,
        r#"{"format":"treefork-log-segment","version":1,"session":"../x"}"#,
    ] {
        let (h, b) = framed(&format!("{head}\n"));
        assert!(decode(&b, &h).is_err(), "{head}");
    }
}

/// A zstd bomb (a small frame decompressing past the bound) is refused without
/// decompressing it all.
#[test]
fn oversized_segment_is_refused() {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 19).unwrap();
    let zeros = vec![b' '; 1 << 20];
    for _ in 0..(MAX_SEGMENT_RAW >> 20) + 1 {
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
    }
    let b = enc.finish().unwrap();
    let h = blake3::hash(&b).to_hex().to_string();
    match decode(&b, &h) {
        Err(Error::Corrupt { reason, .. }) => assert!(reason.contains("256 MiB"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

fn entry_strategy() -> impl Strategy<Value = SegEntry> {
    prop_oneof![
        (any::<u64>(), any::<i64>()).prop_map(|(seq, x)| SegEntry::Op {
            seq,
            v: json!({"x": x})
        }),
        (
            any::<u64>(),
            prop_oneof![Just(b'o'), Just(b'e')],
            proptest::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(seq, tag, bytes)| SegEntry::Attach { seq, tag, bytes }),
        (any::<u64>(), prop_oneof![Just(b'm'), Just(b't')], ".{0,20}").prop_map(|(seq, tag, s)| {
            SegEntry::Msg {
                tag,
                seq,
                v: json!({"text": s}),
            }
        }),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(|path| SegEntry::Touched { path }),
    ]
}

proptest! {
    #[test]
    fn segment_round_trip(entries in proptest::collection::vec(entry_strategy(), 0..20)) {
        let s = Segment { session: "sess.1".into(), entries };
        let (h, b) = encode(&s);
        prop_assert_eq!(decode(&b, &h).unwrap(), s);
    }

    /// Arbitrary bytes (named by their own hash, so decoding is attempted) and bit
    /// flips of a real segment (with the hash recomputed, so the zstd and JSON
    /// layers are exercised): never a panic, only Ok or Corrupt.
    #[test]
    fn segment_decoder_never_panics(
        raw in proptest::collection::vec(any::<u8>(), 0..300),
        entries in proptest::collection::vec(entry_strategy(), 0..6),
        at in any::<usize>(),
        bit in 0u8..8,
        cut in any::<usize>(),
    ) {
        let h = blake3::hash(&raw).to_hex().to_string();
        if let Err(e) = decode(&raw, &h) {
            prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e);
        }
        let (_, mut b) = encode(&Segment { session: "s".into(), entries });
        let i = at % b.len();
        b[i] ^= 1 << bit;
        let b = &b[..(cut % b.len()).max(1)];
        let h = blake3::hash(b).to_hex().to_string();
        if let Err(e) = decode(b, &h) {
            prop_assert!(matches!(e, Error::Corrupt { .. }), "{}", e);
        }
    }
}
