//! Fuzz targets of what a remote serves: pack indexes and packs, log segments, refs,
//! gc state, descriptors and stored remote configs.

use super::*;

pub(super) fn remote_idx(bytes: &[u8]) {
    use crate::remote::packidx::Idx;
    for b in [bytes.to_vec(), with_trailer(bytes)] {
        let r = Idx::decode(&b);
        assert_corrupt("remote idx", &r);
        if let Ok(idx) = r {
            accepted();
            assert_eq!(idx.encode(), b, "remote idx encoding is not canonical");
        }
    }
}

pub(super) fn sample_remote_pack() -> crate::remote::packidx::Built {
    use crate::remote::packidx::PackBuilder;
    use crate::store::pack::{RECORD_HEADER_LEN, RecordHeader, delta_base, scan};
    let pack = sample_pack();
    let (recs, err) = scan(&pack);
    assert!(err.is_none());
    let mut b = PackBuilder::new();
    for r in recs {
        let h: RecordHeader = r.header;
        let start = r.offset as usize + RECORD_HEADER_LEN;
        let payload = &pack[start..start + h.stored_len as usize];
        b.add_record(
            h.kind,
            h.id,
            h.codec,
            h.raw_len,
            payload,
            delta_base(&h, payload),
        )
        .expect("a well-formed record");
    }
    b.finish()
}

pub(super) fn remote_idx_seeds() -> Vec<Vec<u8>> {
    vec![sample_remote_pack().idx]
}

/// Input: idx length u32 LE | `.idx` (trailer recomputed) | pack bytes. Every entry
/// is read back as a pull does: its record range checked against the entry, then
/// decoded and verified, a delta against its base when that decoded earlier.
pub(super) fn remote_pack(bytes: &[u8]) {
    use crate::remote::packidx::{Idx, decode_verified, read_record};
    let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
        return;
    };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (idx, pack) = rest.split_at(len);
    let Ok(idx) = Idx::decode(&with_trailer(idx)) else {
        return;
    };
    let mut raw: HashMap<crate::id::ObjectId, Vec<u8>> = HashMap::new();
    // Whole records first, then deltas (their bases come first in a real pull too).
    let mut order: Vec<_> = idx.entries.iter().collect();
    order.sort_by_key(|e| e.base.is_some());
    for e in order {
        let range = e.range();
        let Some(rec) = pack.get(range.start as usize..range.end.min(usize::MAX as u64) as usize)
        else {
            continue;
        };
        let stored = read_record(&idx.pack_hash, e, rec);
        assert_corrupt("remote record", &stored);
        let Ok(stored) = stored else { continue };
        let base = e.base.and_then(|b| raw.get(&b)).map(Vec::as_slice);
        let got = decode_verified(e.kind, &e.id, &stored, base);
        assert_corrupt("remote object", &got);
        if let Ok(v) = got {
            accepted();
            assert_eq!(e.kind.hash(&v), e.id);
            raw.insert(e.id, v);
        }
    }
}

pub(super) fn remote_pack_seeds() -> Vec<Vec<u8>> {
    let b = sample_remote_pack();
    let mut v = (b.idx.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(&b.idx);
    v.extend_from_slice(&b.pack);
    vec![v]
}

/// First byte even: the rest is a segment as stored (zstd); odd: the rest is the
/// decompressed text, compressed here so the fuzzer reaches the line parser.
pub(super) fn log_segment(bytes: &[u8]) {
    use crate::remote::segment::{decode, encode};
    let Some((&mode, rest)) = bytes.split_first() else {
        return;
    };
    let stored = if mode % 2 == 0 {
        rest.to_vec()
    } else {
        zstd::bulk::compress(rest, 1).expect("zstd compression of a buffer")
    };
    let name = blake3::hash(&stored).to_hex().to_string();
    let r = decode(&stored, &name);
    assert_corrupt("log segment", &r);
    if let Ok(seg) = r {
        accepted();
        let (name, again) = encode(&seg);
        let seg2 = decode(&again, &name).expect("a re-encoded segment decodes");
        assert_eq!(seg, seg2, "segment decode(encode(x)) != x");
    }
}

pub(super) fn log_segment_seeds() -> Vec<Vec<u8>> {
    use crate::remote::segment::{SegEntry, Segment, encode};
    let seg = Segment {
        session: "agent-1".into(),
        entries: vec![
            SegEntry::Op {
                seq: 1,
                v: serde_json::json!({"version": 1, "kind": "checkpoint"}),
            },
            SegEntry::Attach {
                seq: 1,
                tag: b'o',
                bytes: b"stdout bytes\n".to_vec(),
            },
            SegEntry::Msg {
                tag: b'm',
                seq: 1,
                v: serde_json::json!({"role": "user", "content": "hi"}),
            },
            SegEntry::Touched {
                path: b"src/main.rs".to_vec(),
            },
        ],
    };
    let (_, stored) = encode(&seg);
    let text = zstd::bulk::decompress(&stored, 1 << 20).expect("our own frame");
    let mut a = vec![0u8];
    a.extend_from_slice(&stored);
    let mut b = vec![1u8];
    b.extend_from_slice(&text);
    vec![a, b]
}

/// First byte selects the value: a remote ref, `gc/condemned`, `gc/lock`, the
/// remote's descriptor, a remote's local config record; the rest is its JSON.
pub(super) fn remote_refs(bytes: &[u8]) {
    use crate::remote::refval::{self, Descriptor, GcCondemned, GcLock};
    let Some((&which, b)) = bytes.split_first() else {
        return;
    };
    match which % 5 {
        0 => {
            let r = refval::decode(b);
            assert_corrupt("remote ref", &r);
            if let Ok(v) = r {
                accepted();
                let again = refval::decode(&refval::encode(&v)).expect("re-encoded ref decodes");
                assert_eq!(again, v, "remote ref decode(encode(x)) != x");
            }
        }
        1 => {
            let r = GcCondemned::decode(b);
            assert_corrupt("gc/condemned", &r);
            if let Ok(v) = r {
                accepted();
                assert_eq!(GcCondemned::decode(&v.encode()).ok(), Some(v));
            }
        }
        2 => {
            let r = GcLock::decode(b);
            assert_corrupt("gc/lock", &r);
            if let Ok(v) = r {
                accepted();
                assert_eq!(GcLock::decode(&v.encode()).ok(), Some(v));
            }
        }
        3 => match Descriptor::decode(b) {
            Ok(v) => {
                accepted();
                assert_eq!(Descriptor::decode(&v.encode()).ok(), Some(v));
            }
            Err(e) => assert!(matches!(e, Error::Invalid(_)), "descriptor error {e:?}"),
        },
        _ => json_round_trip("remote config", b, |b| {
            crate::remote::config::RemoteConfig::decode("origin", b)
        }),
    }
}

pub(super) fn remote_refs_seeds() -> Vec<Vec<u8>> {
    use crate::remote::refval::{self, BranchRef, Descriptor, GcCondemned, GcLock, RefValue};
    let with = |b: u8, mut v: Vec<u8>| {
        v.insert(0, b);
        v
    };
    let hex = "ab".repeat(32);
    let session = serde_json::json!({
        "version": 1, "kind": "session", "session": "s1",
        "record": {"root": hex, "base": hex, "head": null, "branch": "main"},
        "logs": [hex], "time": 1,
    });
    vec![
        with(
            0,
            refval::encode(&RefValue::Branch(BranchRef::new(
                &crate::id::CheckpointId([7; 32]),
                5,
            ))),
        ),
        with(0, serde_json::to_vec(&session).unwrap()),
        with(
            1,
            GcCondemned {
                version: 1,
                time: 9,
                packs: vec![hex.clone()],
                logs: vec![],
                checkpoints: vec![hex.clone()],
            }
            .encode(),
        ),
        with(
            2,
            GcLock {
                owner: "t".into(),
                pid: 1,
                host: "h".into(),
                started: 1,
                expires: 2,
            }
            .encode(),
        ),
        with(3, Descriptor::new(3).encode()),
        with(
            4,
            serde_json::to_vec(&serde_json::json!({
                "version": 1, "name": "origin", "url": "s3://bucket/a/b", "bucket": "bucket",
                "prefix": "a/b", "endpoint": "http://127.0.0.1:9000", "region": "us-east-1",
                "single_writer": false, "conditional_writes": true, "created": 5,
            }))
            .unwrap(),
        ),
    ]
}
