//! Fuzz entry points: one per family of decoders of bytes that reach the daemon from
//! outside its own memory — the control protocol (any local peer, agents included),
//! the store on disk (a damaged disk) and a remote (a hostile or broken server).
//!
//! Owns: [`TARGETS`], each a `run` function taking arbitrary bytes and a `seeds`
//! function giving valid inputs made by the real encoders. `fuzz/` (cargo-fuzz,
//! `scripts/fuzz.sh`) runs them under libFuzzer; the property tests at the end of this
//! file run them on arbitrary and mutated bytes in `cargo test --lib`.
//!
//! What a `run` asserts (a failed assertion is a panic, which is the finding):
//! every decoder returns instead of panicking or overflowing; its error is the typed
//! [`Error::Corrupt`] (or the protocol's `bad_request` family); and where the format
//! has an encoder, what decodes re-encodes to something that decodes to the same value
//! (byte-identical for the canonical binary formats). Formats behind a checksum
//! (pack index trailer, log segment name) are fed twice: as given, and with the
//! checksum recomputed, so the fuzzer reaches the parser behind it.
//!
//! Compiled only for tests and with the `fuzzing` feature: nothing here is part of the
//! daemon.

use std::collections::HashMap;

use serde::Serialize;

use crate::error::Error;

/// Inputs longer than this are cut (libFuzzer's `-max_len` is smaller still): no
/// decoder may need more to be exercised, and it bounds each run's memory.
pub const MAX_INPUT: usize = 1 << 20;

/// One fuzz target.
pub struct Target {
    /// Its name (`fuzz/fuzz_targets/<name>.rs`, `fuzz/corpus/<name>/`).
    pub name: &'static str,
    /// Decode `bytes` every way this target covers; panics on a finding.
    pub run: fn(&[u8]),
    /// Valid inputs made by the real encoders (the committed seed corpus).
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "protocol",
        run: protocol,
        seeds: protocol_seeds,
    },
    Target {
        name: "pack_records",
        run: pack_records,
        seeds: pack_records_seeds,
    },
    Target {
        name: "pack_index",
        run: pack_index,
        seeds: pack_index_seeds,
    },
    Target {
        name: "remote_idx",
        run: remote_idx,
        seeds: remote_idx_seeds,
    },
    Target {
        name: "remote_pack",
        run: remote_pack,
        seeds: remote_pack_seeds,
    },
    Target {
        name: "log_segment",
        run: log_segment,
        seeds: log_segment_seeds,
    },
    Target {
        name: "remote_refs",
        run: remote_refs,
        seeds: remote_refs_seeds,
    },
    Target {
        name: "tree_node",
        run: tree_node,
        seeds: tree_node_seeds,
    },
    Target {
        name: "block_map",
        run: block_map,
        seeds: block_map_seeds,
    },
    Target {
        name: "checkpoint_record",
        run: checkpoint_record,
        seeds: checkpoint_record_seeds,
    },
    Target {
        name: "session_record",
        run: session_record,
        seeds: session_record_seeds,
    },
    Target {
        name: "log_records",
        run: log_records,
        seeds: log_records_seeds,
    },
    Target {
        name: "meta_keys",
        run: meta_keys,
        seeds: meta_keys_seeds,
    },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Run target `name` on `bytes` (what each `fuzz/fuzz_targets/*.rs` calls).
pub fn run(name: &str, bytes: &[u8]) {
    let t = target(name).unwrap_or_else(|| panic!("no fuzz target {name}"));
    (t.run)(&bytes[..bytes.len().min(MAX_INPUT)]);
}

/// Once per fuzzer process: when `TREEFORK_FUZZ_SEEDS` names a directory, write
/// target `name`'s seeds into `<dir>/<name>/` (file name = hash of the content), so
/// the corpus always holds what today's encoders write.
pub fn init(name: &str) {
    let Some(dir) = std::env::var_os("TREEFORK_FUZZ_SEEDS") else {
        return;
    };
    let t = target(name).unwrap_or_else(|| panic!("no fuzz target {name}"));
    let dir = std::path::Path::new(&dir).join(name);
    std::fs::create_dir_all(&dir).expect("create the seed directory");
    for s in (t.seeds)() {
        let file = format!("seed-{}", &blake3::hash(&s).to_hex()[..16]);
        std::fs::write(dir.join(file), &s).expect("write a seed");
    }
}

thread_local! {
    /// Inputs some decoder accepted since the last [`take_accepted`] (lets the tests
    /// check that every seed is a valid encoding, so the corpus reaches past the
    /// first checks).
    static ACCEPTED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn accepted() {
    ACCEPTED.with(|c| c.set(c.get() + 1));
}

/// How many decodes succeeded on this thread since the last call.
pub fn take_accepted() -> u32 {
    ACCEPTED.with(|c| c.replace(0))
}

fn assert_corrupt<T>(what: &str, r: &crate::Result<T>) {
    if let Err(e) = r {
        assert!(
            matches!(e, Error::Corrupt { .. }),
            "{what}: a decode error must be Error::Corrupt, got {e:?}"
        );
    }
}

/// `bytes` with its last 32 bytes replaced by the blake3 of the rest (a trailer).
fn with_trailer(bytes: &[u8]) -> Vec<u8> {
    let body = &bytes[..bytes.len().saturating_sub(32)];
    let mut v = body.to_vec();
    v.extend_from_slice(blake3::hash(body).as_bytes());
    v
}

/// Decode JSON record `bytes` with `decode`; if it decodes, its JSON re-encoding
/// must decode to the same value.
fn json_round_trip<T>(what: &str, bytes: &[u8], decode: impl Fn(&[u8]) -> crate::Result<T>)
where
    T: Serialize + PartialEq + std::fmt::Debug,
{
    let r = decode(bytes);
    assert_corrupt(what, &r);
    if let Ok(x) = r {
        accepted();
        let again = serde_json::to_vec(&x).expect("a decoded record serializes");
        match decode(&again) {
            Ok(y) => assert_eq!(x, y, "{what}: decode(encode(x)) != x"),
            Err(e) => panic!("{what}: re-encoding of a decoded record does not decode: {e}"),
        }
    }
}

// ---- control protocol ----

fn protocol(bytes: &[u8]) {
    use crate::control::protocol::{encode_request, parse};
    match parse(bytes) {
        Ok(req) => {
            accepted();
            // What parses re-encodes (the client's encoder) to the same op.
            let line = encode_request(&req.op);
            let again = parse(line.strip_suffix(b"\n").unwrap_or(&line))
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

fn protocol_seeds() -> Vec<Vec<u8>> {
    use crate::control::protocol::{Op, encode_request};
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
    let mut line = encode_request(&Op::Ping);
    line.pop();
    v.push(line);
    v
}

// ---- local packs ----

fn pack_records(bytes: &[u8]) {
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

fn sample_objects() -> Vec<(crate::store::pack::Kind, Vec<u8>)> {
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
fn sample_pack() -> Vec<u8> {
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

fn pack_records_seeds() -> Vec<Vec<u8>> {
    let pack = sample_pack();
    let first = crate::store::pack::PACK_HEADER_LEN as usize;
    vec![pack.clone(), pack[first..].to_vec()]
}

/// The store's own index: an object's location (`o/` value, exactly
/// [`LOC_LEN`](crate::store::objects::LOC_LEN) bytes) and the store descriptor.
fn pack_index(bytes: &[u8]) {
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

fn pack_index_seeds() -> Vec<Vec<u8>> {
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

// ---- remote packs ----

fn remote_idx(bytes: &[u8]) {
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

fn sample_remote_pack() -> crate::remote::packidx::Built {
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

fn remote_idx_seeds() -> Vec<Vec<u8>> {
    vec![sample_remote_pack().idx]
}

/// Input: idx length u32 LE | `.idx` (trailer recomputed) | pack bytes. Every entry
/// is read back as a pull does: its record range checked against the entry, then
/// decoded and verified, a delta against its base when that decoded earlier.
fn remote_pack(bytes: &[u8]) {
    use crate::remote::packidx::{Idx, decode_verified, read_record};
    let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
        return;
    };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (idx, pack) = rest.split_at(len);
    let Ok(idx) = Idx::decode(&with_trailer(idx)) else {
        return;
    };
    let mut raw: HashMap<[u8; 32], Vec<u8>> = HashMap::new();
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

fn remote_pack_seeds() -> Vec<Vec<u8>> {
    let b = sample_remote_pack();
    let mut v = (b.idx.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(&b.idx);
    v.extend_from_slice(&b.pack);
    vec![v]
}

// ---- remote log segments and refs ----

/// First byte even: the rest is a segment as stored (zstd); odd: the rest is the
/// decompressed text, compressed here so the fuzzer reaches the line parser.
fn log_segment(bytes: &[u8]) {
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

fn log_segment_seeds() -> Vec<Vec<u8>> {
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
fn remote_refs(bytes: &[u8]) {
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

fn remote_refs_seeds() -> Vec<Vec<u8>> {
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
            refval::encode(&RefValue::Branch(BranchRef::new(&[7; 32], 5))),
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

// ---- tree nodes ----

fn tree_round_trip<T: PartialEq + std::fmt::Debug>(
    what: &str,
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> crate::Result<T>,
    encode: impl Fn(&T) -> Vec<u8>,
) {
    let r = decode(bytes);
    assert_corrupt(what, &r);
    if let Ok(x) = r {
        accepted();
        assert_eq!(encode(&x), bytes, "{what}: encoding is not canonical");
    }
}

fn tree_node(bytes: &[u8]) {
    use crate::tree::{AnyDir, DirIndex, DirNode, FileNode, RootNode};
    tree_round_trip("dir node", bytes, DirNode::decode, DirNode::encode);
    tree_round_trip("dir index", bytes, DirIndex::decode, DirIndex::encode);
    tree_round_trip("root node", bytes, RootNode::decode, RootNode::encode);
    tree_round_trip("file node", bytes, FileNode::decode, FileNode::encode);
    tree_round_trip("any dir", bytes, AnyDir::decode, |d| match d {
        AnyDir::Flat(d) => d.encode(),
        AnyDir::Index(i) => i.encode(),
    });
}

fn sample_record(kind: crate::tree::Kind, ino: u64) -> crate::tree::Record {
    use crate::id::NodeId;
    use crate::tree::{Attr, Content, Record, Timespec};
    let ts = Timespec {
        sec: 1_700_000_000,
        nsec: 5,
    };
    Record {
        kind,
        ino,
        attr: Attr {
            perm: 0o644,
            uid: 1000,
            gid: 1000,
            size: 12,
            blocks: 1,
            nlink: 1,
            rdev: 0,
            atime: ts,
            mtime: ts,
            ctime: ts,
        },
        xattrs: vec![(b"user.a".to_vec(), b"1".to_vec())],
        content: if ino.is_multiple_of(2) {
            Content::Node(NodeId([ino as u8; 32]))
        } else {
            Content::Bytes(b"target".to_vec())
        },
    }
}

fn tree_samples() -> Vec<Vec<u8>> {
    use crate::id::{ChunkId, NodeId};
    use crate::tree::{DirIndex, DirNode, Entry, FileNode, Kind, RootNode};
    let dir = DirNode {
        entries: vec![
            (
                b"a.txt".to_vec(),
                Entry::Inline(sample_record(Kind::File, 2)),
            ),
            (
                b"link".to_vec(),
                Entry::HardLink {
                    ino: 9,
                    kind: Kind::File,
                },
            ),
            (
                b"sym".to_vec(),
                Entry::Inline(sample_record(Kind::Symlink, 3)),
            ),
        ],
    };
    let root = RootNode {
        root: sample_record(Kind::Dir, 1),
        links: vec![sample_record(Kind::File, 9)],
        next_ino: 10,
    };
    vec![
        dir.encode(),
        root.encode(),
        DirIndex {
            shards: vec![(3, NodeId([1; 32])), (5, NodeId([2; 32]))],
        }
        .encode(),
        FileNode::Inline(b"hello".to_vec()).encode(),
        FileNode::Blocks {
            size: 200_000,
            blocks: vec![(0, ChunkId([3; 32])), (2, ChunkId([4; 32]))],
        }
        .encode(),
    ]
}

fn tree_node_seeds() -> Vec<Vec<u8>> {
    tree_samples()
}

fn block_map(bytes: &[u8]) {
    use crate::tree::{BlockLeaf, BlockMap, FileNode, LEAF_BLOCKS, leaf_of};
    tree_round_trip("block map", bytes, BlockMap::decode, BlockMap::encode);
    tree_round_trip("file node", bytes, FileNode::decode, FileNode::encode);
    tree_round_trip(
        "block leaf",
        bytes,
        BlockLeaf::decode_unplaced,
        BlockLeaf::encode,
    );
    if let Ok(l) = BlockLeaf::decode_unplaced(bytes) {
        // Placed where its first block says, in a file just long enough: accepted.
        let (first, _) = l.blocks[0];
        let (last, _) = *l.blocks.last().unwrap();
        let size = (last + 1).saturating_mul(crate::tree::BLOCK_SIZE);
        let placed = BlockLeaf::decode(bytes, leaf_of(first), size);
        assert_eq!(placed.as_ref().ok(), Some(&l), "{placed:?}");
        // At any other leaf number: refused.
        let other = (leaf_of(first) + 1) % (u64::MAX / LEAF_BLOCKS);
        let r = BlockLeaf::decode(bytes, other, size);
        assert!(
            matches!(r, Err(Error::Corrupt { .. })),
            "leaf {other}: {r:?}"
        );
    }
    if let Some((&k, rest)) = bytes.split_first() {
        let r = BlockLeaf::decode(rest, k as u64, u64::MAX);
        assert_corrupt("block leaf", &r);
        if r.is_ok() {
            accepted();
        }
    }
}

fn block_map_seeds() -> Vec<Vec<u8>> {
    use crate::id::{ChunkId, NodeId};
    use crate::tree::{BlockLeaf, BlockMap, LEAF_BLOCKS, MAP_MIN_SIZE};
    let leaf = BlockLeaf {
        blocks: vec![
            (LEAF_BLOCKS, ChunkId([1; 32])),
            (LEAF_BLOCKS + 7, ChunkId([2; 32])),
        ],
    };
    let map = BlockMap {
        size: 3 * MAP_MIN_SIZE + 1,
        leaves: vec![(0, NodeId([5; 32])), (3, NodeId([6; 32]))],
    };
    let mut with_leaf_no = vec![1u8];
    with_leaf_no.extend_from_slice(&leaf.encode());
    vec![leaf.encode(), map.encode(), with_leaf_no]
}

// ---- stored records (metadata store) ----

/// First byte selects: checkpoint record, branch ref record.
fn checkpoint_record(bytes: &[u8]) {
    use crate::refs::{Checkpoint, RefRecord};
    let Some((&which, b)) = bytes.split_first() else {
        return;
    };
    if which % 2 == 0 {
        json_round_trip("checkpoint", b, |b| Checkpoint::decode("fuzz", b));
        if let Ok(c) = Checkpoint::decode("fuzz", b) {
            // What later code relies on once a record decoded.
            let _ = (c.cid(), c.root_id(), c.parent_ids(), c.id_matches());
        }
    } else {
        json_round_trip("ref", b, |b| RefRecord::decode("fuzz", b));
    }
}

fn checkpoint_record_seeds() -> Vec<Vec<u8>> {
    let hex = |b: u8| crate::id::hex(&[b; 32]);
    let v2 = serde_json::json!({
        "version": 2, "id": hex(1), "session": "s", "root": hex(2),
        "parents": [hex(3), hex(4)], "time_ns": 1_700_000_000_000_000_000i128,
        "message": "m", "trigger": "manual", "files_changed": 3,
        "meta": {"k": [1, "x", {"y": null}]}, "usage": {"bytes": 10, "inodes": 2},
    });
    let v1 = serde_json::json!({
        "version": 1, "id": hex(1), "session": "s", "root": hex(2), "parent": hex(3),
        "time_ns": 5, "message": "", "trigger": "auto", "files_changed": 0,
    });
    let refrec = serde_json::json!({"checkpoint": hex(1), "created": 7});
    [(0u8, v2), (0, v1), (1, refrec)]
        .into_iter()
        .map(|(b, v)| {
            let mut out = vec![b];
            out.extend_from_slice(&serde_json::to_vec(&v).unwrap());
            out
        })
        .collect()
}

/// First byte selects: session record, session info record.
fn session_record(bytes: &[u8]) {
    use crate::lifecycle::SessionInfo;
    use crate::session::SessionRecord;
    let Some((&which, b)) = bytes.split_first() else {
        return;
    };
    if which % 2 == 0 {
        json_round_trip("session record", b, |b| SessionRecord::decode("fuzz", b));
    } else {
        json_round_trip("session info", b, |b| SessionInfo::decode("fuzz", b));
    }
}

fn session_record_seeds() -> Vec<Vec<u8>> {
    let hex = crate::id::hex(&[9; 32]);
    let rec = serde_json::json!({
        "version": 2, "name": "s", "root": hex, "base": hex, "created": 1, "updated": 2,
        "bytes": 3, "inodes": 4, "head": hex, "branch": "main",
        "config": {"auto_checkpoint_ops": 5, "auto_checkpoint_idle_secs": 0,
                   "last_checkpoint": 3},
        "meta": {"a": 1},
    });
    let info = crate::lifecycle::SessionInfo::decode(
        "s",
        br#"{"version":1,"id":"00ff","session":"s","created":1,"updated":2,"last_access":3}"#,
    )
    .expect("a minimal info record");
    vec![
        [vec![0], serde_json::to_vec(&rec).unwrap()].concat(),
        [vec![1], serde_json::to_vec(&info).unwrap()].concat(),
    ]
}

/// First byte selects: operation record, message record.
fn log_records(bytes: &[u8]) {
    use crate::messages::Message;
    use crate::oplog::Operation;
    let Some((&which, b)) = bytes.split_first() else {
        return;
    };
    if which % 2 == 0 {
        json_round_trip("operation", b, |b| Operation::decode("fuzz", b));
        if let Ok(op) = Operation::decode("fuzz", b) {
            let _ = op.checkpoints().count();
        }
    } else {
        json_round_trip("message", b, |b| Message::decode("fuzz", b));
        if let Ok(m) = Message::decode("fuzz", b) {
            let _ = m.json();
        }
    }
}

fn log_records_seeds() -> Vec<Vec<u8>> {
    let hex = crate::id::hex(&[4; 32]);
    let op = serde_json::json!({
        "version": 1, "session": "s", "seq": 2, "parent": 1, "time_ns": "1700000000000000000",
        "actor": {"role": "agent", "uid": 65534, "pid": 7}, "kind": "checkpoint",
        "request": {"op": "checkpoint"}, "explanation": "e",
        "before": {"head": null, "workspace": hex},
        "after": {"head": hex, "branch": "main", "workspace": hex,
                  "branches": {"main": hex, "gone": null}},
        "undoes": 1,
    });
    let msg = serde_json::json!({
        "version": 1, "id": "u-1", "seq": 1, "time_ns": "1700000000000000000",
        "role": "assistant", "content": {"text": "hi"}, "tool_calls": [{"id": "t"}],
        "meta": {"k": 1}, "op": 2, "checkpoint": hex, "workspace": hex,
    });
    vec![
        [vec![0], serde_json::to_vec(&op).unwrap()].concat(),
        [vec![1], serde_json::to_vec(&msg).unwrap()].concat(),
    ]
}

/// Metadata keys: every parser of a key's parts rebuilds the same key.
fn meta_keys(k: &[u8]) {
    use crate::meta::keys::*;
    let parsed = op_parts(k).is_some()
        || attach_parts(k).is_some()
        || message_parts(k).is_some()
        || tracking_parts(k).is_some()
        || object_id(k).is_some()
        || checkpoint_id(k).is_some()
        || session_name(k).is_some()
        || ref_name(k).is_some()
        || lost_original(k).is_some()
        || touched_path(k).is_some();
    if parsed {
        accepted();
    }
    if let Some((s, n)) = op_parts(k) {
        assert_eq!(op_key(s, n), k);
    }
    if let Some((s, n, t)) = attach_parts(k) {
        assert_eq!(attach_key(s, n, t), k);
    }
    if let Some((s, t, n)) = message_parts(k) {
        assert_eq!(message_key(s, t, n), k);
    }
    if let Some((r, kind, n)) = tracking_parts(k) {
        assert_eq!(tracking_key(r, kind, n), k);
    }
    if let Some(id) = object_id(k) {
        assert_eq!(object_key(&id), k);
    }
    if let Some(id) = checkpoint_id(k) {
        assert_eq!(checkpoint_key(&id), k);
    }
    if let Some(n) = session_name(k) {
        assert_eq!(session_key(n), k);
    }
    if let Some(n) = ref_name(k) {
        assert_eq!(ref_key(n), k);
    }
    if let Some(n) = remote_name(k) {
        assert_eq!(remote_key(n), k);
    }
    if let Some(n) = info_session(k) {
        assert_eq!(info_key(n), k);
    }
    if let Some(p) = lost_original(k) {
        assert_eq!(lost_key(p), k);
    }
    let _ = touched_path(k);
}

fn meta_keys_seeds() -> Vec<Vec<u8>> {
    use crate::meta::keys::*;
    vec![
        op_key("s", 3),
        attach_key("s", 3, b'o'),
        message_key("s", b'm', 1),
        tracking_key("origin", TrackKind::Session, "a/b"),
        object_key(&[1; 32]),
        checkpoint_key(&[2; 32]),
        session_key("s"),
        ref_key("main"),
        lost_key(b"o/xyz"),
        touched_key("s", b"dir/file"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seeds_decode_and_round_trip() {
        for t in TARGETS {
            let seeds = (t.seeds)();
            assert!(!seeds.is_empty(), "{} has no seeds", t.name);
            for s in seeds {
                take_accepted();
                (t.run)(&s);
                assert!(
                    take_accepted() > 0,
                    "{}: seed {s:?} decodes nowhere",
                    t.name
                );
            }
        }
    }

    /// Every input a fuzzer crashed on, kept as `fuzz/regressions/<target>/<what>`
    /// once fixed: each must now run clean.
    #[test]
    fn fuzz_regressions() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
        let mut n = 0;
        for t in std::fs::read_dir(&dir).expect("fuzz/regressions") {
            let t = t.unwrap().path();
            let name = t.file_name().unwrap().to_str().unwrap().to_string();
            assert!(target(&name).is_some(), "{name}: not a fuzz target");
            for f in std::fs::read_dir(&t).unwrap() {
                let f = f.unwrap().path();
                run(&name, &std::fs::read(&f).unwrap());
                n += 1;
            }
        }
        assert!(n > 0);
    }

    fn mutate(mut s: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
        for &(at, op, b) in edits {
            if s.is_empty() {
                s.push(b);
                continue;
            }
            let at = at % s.len();
            match op % 4 {
                0 => s[at] = b,
                1 => s[at] ^= 1 << (b % 8),
                2 => s.truncate(at),
                _ => s.insert(at, b),
            }
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// Arbitrary bytes into every decoder: no panic, typed errors.
        #[test]
        fn arbitrary_bytes(t in 0..TARGETS.len(), bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            (TARGETS[t].run)(&bytes);
        }

        /// Seeds with a few bytes flipped, replaced, inserted or cut: these get past
        /// the magic numbers and reach the field checks.
        #[test]
        fn mutated_seeds(
            t in 0..TARGETS.len(),
            pick in any::<usize>(),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6),
        ) {
            let seeds = (TARGETS[t].seeds)();
            let seed = seeds[pick % seeds.len()].clone();
            (TARGETS[t].run)(&mutate(seed, &edits));
        }
    }
}
