//! Fuzz targets of the control protocol and the local pack store (records, index,
//! descriptor).

use super::*;

pub(super) fn protocol(bytes: &[u8]) {
    use crate::control::protocol::{encode_request, parse};
    match parse::<crate::verbs::Request>(bytes) {
        Ok(req) => {
            accepted();
            // What parses re-encodes (the client's encoder) to the same op.
            let line = encode_request(&req.op, None);
            let again = parse::<crate::verbs::Request>(line.strip_suffix(b"\n").unwrap_or(&line))
                .unwrap_or_else(|e| panic!("re-encoded {:?} does not parse: {e:?}", req.op));
            assert_eq!(again.op, req.op, "parse(encode(op)) != op");
        }
        Err(e) => assert!(
            [
                "bad_request",
                "unknown_op",
                "unsupported_version",
                "too_large"
            ]
            .contains(&e.code),
            "unexpected protocol error code {}",
            e.code
        ),
    }
}

pub(super) fn protocol_seeds() -> Vec<Vec<u8>> {
    use crate::control::protocol::encode_request;
    use crate::verbs::Request;
    let mut v: Vec<Vec<u8>> = [
        r#"{"v":1,"op":"ping"}"#,
        r#"{"v":1,"op":"status","session":"s"}"#,
        r#"{"v":1,"op":"checkpoint","session":"s","message":"m","explanation":"why"}"#,
        r#"{"v":1,"op":"mount","session":"s","mountpoint":"/mnt/x","from":null}"#,
        r#"{"v":1,"op":"fork","session":"s","name":"f","from":"HEAD~1","mountpoint":"/tmp/f"}"#,
        r#"{"v":1,"op":"messages","session":"s","limit":1}"#,
        r#"{"v":1,"op":"message_append","session":"s","role":"user","content":{"a":[1,2.5,null]}}"#,
        r#"{"v":1,"op":"undo","session":"s"}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let mut line = encode_request(&Request::Ping(crate::verbs::Ping {}), None);
    line.pop();
    v.push(line);
    v
}

pub(super) fn pack_records(bytes: &[u8]) {
    use crate::store::pack::{self, Codec, RECORD_HEADER_LEN, RecordHeader};
    let h = RecordHeader::decode(bytes);
    assert_corrupt("record header", &h);
    if let Ok(h) = h {
        accepted();
        assert_eq!(RecordHeader::decode(&h.encode()).ok(), Some(h));
    }
    let (recs, err) = pack::scan(bytes);
    if let Some((off, e)) = &err {
        assert!(*off as usize <= bytes.len());
        assert!(matches!(e, Error::Corrupt { .. }), "scan error {e:?}");
    }
    // Decode every record, a delta against the previous record that decoded.
    let mut prev: Option<Vec<u8>> = None;
    for r in recs {
        let start = r.offset as usize + RECORD_HEADER_LEN;
        let payload = &bytes[start..start + r.header.stored_len as usize];
        let base = (r.header.codec == Codec::Delta)
            .then_some(prev.as_deref())
            .flatten();
        let got = pack::decode_payload_with(&r.header, payload, base);
        assert_corrupt("pack record", &got);
        if let Ok(raw) = got {
            accepted();
            assert_eq!(raw.len(), r.header.raw_len as usize);
            assert_eq!(r.header.kind.hash(&raw), r.header.id);
            prev = Some(raw);
        }
    }
}

pub(super) fn sample_objects() -> Vec<(crate::store::pack::Kind, Vec<u8>)> {
    use crate::store::pack::Kind;
    let text = b"fn main() { println!(\"hello\"); }\n".repeat(20);
    let mut edited = text.clone();
    edited.extend_from_slice(b"// one more line\n");
    vec![
        (Kind::Chunk, b"small".to_vec()),
        (Kind::Chunk, text),
        (Kind::Chunk, edited),
        (Kind::Node, tree_samples()[0].clone()),
    ]
}

/// A local pack image: header, then the sample objects compressed as the store does,
/// the third one as a delta on the second.
pub(super) fn sample_pack() -> Vec<u8> {
    use crate::store::pack::{self, Codec, RecordHeader};
    let objs = sample_objects();
    let mut out = pack::pack_header();
    for (i, (kind, raw)) in objs.iter().enumerate() {
        let (codec, payload) = if i == 2 {
            let base = &objs[1].1;
            let bid = kind.hash(base);
            let d = pack::compress_delta(raw, &bid, base).expect("zstd delta");
            (Codec::Delta, d)
        } else {
            pack::compress(raw)
        };
        let h = RecordHeader {
            kind: *kind,
            codec,
            raw_len: raw.len() as u32,
            stored_len: payload.len() as u32,
            id: kind.hash(raw),
        };
        out.extend_from_slice(&h.encode());
        out.extend_from_slice(&payload);
    }
    out
}

pub(super) fn pack_records_seeds() -> Vec<Vec<u8>> {
    let pack = sample_pack();
    let first = crate::store::pack::PACK_HEADER_LEN as usize;
    vec![pack.clone(), pack[first..].to_vec()]
}

/// The store's own index: an object's location (`o/` value, exactly
/// [`LOC_LEN`](crate::store::objects::LOC_LEN) bytes) and the store descriptor.
pub(super) fn pack_index(bytes: &[u8]) {
    use crate::store::objects::Loc;
    let d = crate::store::check_descriptor("fuzz", bytes);
    assert_corrupt("store descriptor", &d);
    if d.is_ok() {
        accepted();
    }
    let l = Loc::decode(bytes);
    assert_corrupt("index entry", &l);
    if let Ok(l) = l {
        accepted();
        assert_eq!(l.encode(), bytes, "Loc encoding is not canonical");
    }
}

pub(super) fn pack_index_seeds() -> Vec<Vec<u8>> {
    use crate::store::objects::Loc;
    use crate::store::pack::{Codec, Kind};
    vec![
        Loc {
            kind: Kind::Chunk,
            codec: Codec::Zstd,
            pack: 3,
            offset: 16,
            stored_len: 100,
            raw_len: 4096,
        }
        .encode(),
        Loc {
            kind: Kind::Node,
            codec: Codec::Delta,
            pack: 0,
            offset: 1 << 33,
            stored_len: 40,
            raw_len: 70,
        }
        .encode(),
        br#"{"format":"treefork-store","version":3}"#.to_vec(),
    ]
}
