//! Unit and property tests of the node formats.

use super::*;
use proptest::prelude::*;

fn rec(ino: u64, kind: Kind) -> Record {
    Record {
        kind,
        ino,
        attr: Attr {
            perm: 0o644,
            uid: 1,
            gid: 2,
            size: 10,
            blocks: 8,
            nlink: 1,
            rdev: 0,
            atime: Timespec { sec: -5, nsec: 7 },
            mtime: Timespec { sec: 1, nsec: 2 },
            ctime: Timespec::now(),
        },
        xattrs: vec![(b"user.a".to_vec(), b"v".to_vec())],
        content: Content::Node(NodeId::of(b"x")),
    }
}

#[test]
fn dir_round_trip() {
    let d = DirNode {
        entries: vec![
            (b"a".to_vec(), Entry::Inline(rec(5, Kind::File))),
            (
                b"b".to_vec(),
                Entry::HardLink {
                    ino: 9,
                    kind: Kind::File,
                },
            ),
        ],
    };
    assert_eq!(DirNode::decode(&d.encode()).unwrap(), d);
}

#[test]
fn root_round_trip() {
    let mut r = rec(1, Kind::Dir);
    r.content = Content::None;
    let root = RootNode {
        root: r,
        links: vec![rec(3, Kind::File), rec(4, Kind::Symlink)],
        next_ino: 100,
    };
    assert_eq!(RootNode::decode(&root.encode()).unwrap(), root);
}

/// The 'F' encoding is unchanged by block maps: a file node as written before
/// them (bytes spelled out here) still decodes, large or small.
#[test]
fn old_file_nodes_still_decode() {
    let mut old = b"TFND\x01F\x01".to_vec();
    let size: u64 = 10 << 30;
    old.extend_from_slice(&size.to_le_bytes());
    old.extend_from_slice(&2u32.to_le_bytes());
    for i in [7u64, 100_000] {
        old.extend_from_slice(&i.to_le_bytes());
        old.extend_from_slice(&ChunkId::of(&i.to_le_bytes()).0);
    }
    let want = FileNode::Blocks {
        size,
        blocks: vec![
            (7, ChunkId::of(&7u64.to_le_bytes())),
            (100_000, ChunkId::of(&100_000u64.to_le_bytes())),
        ],
    };
    assert_eq!(FileNode::decode(&old).unwrap(), want);
    assert_eq!(want.encode(), old);
    let inline = b"TFND\x01F\x00\x02\x00\x00\x00hi".to_vec();
    assert_eq!(
        FileNode::decode(&inline).unwrap(),
        FileNode::Inline(b"hi".to_vec())
    );
    // Unsorted or misplaced leaves are refused.
    let m = BlockMap {
        size: 3 * MAP_MIN_SIZE,
        leaves: vec![(1, NodeId::of(b"a")), (0, NodeId::of(b"b"))],
    };
    assert!(BlockMap::decode(&m.encode()).is_err());
    let m = BlockMap {
        size: 3 * MAP_MIN_SIZE,
        leaves: vec![(3, NodeId::of(b"a"))],
    };
    assert!(BlockMap::decode(&m.encode()).is_err());
    assert!(BlockLeaf::decode(&BlockLeaf::default().encode(), 0, u64::MAX).is_err());
}

#[test]
fn unsorted_dir_is_rejected() {
    let d = DirNode {
        entries: vec![
            (b"b".to_vec(), Entry::Inline(rec(5, Kind::File))),
            (b"a".to_vec(), Entry::Inline(rec(6, Kind::File))),
        ],
    };
    assert!(DirNode::decode(&d.encode()).is_err());
}

#[test]
fn index_round_trip() {
    let i = DirIndex {
        shards: vec![(3, NodeId::of(b"a")), (70, NodeId::of(b"b"))],
    };
    assert_eq!(DirIndex::decode(&i.encode()).unwrap(), i);
    assert_eq!(AnyDir::decode(&i.encode()).unwrap(), AnyDir::Index(i));
    let empty = DirIndex::default().encode();
    assert!(DirIndex::decode(&empty).is_err());
}

fn names(n: usize, salt: &str) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("{salt}{i:06}.rs").into_bytes())
        .collect();
    v.sort();
    v
}

#[test]
fn small_dirs_are_one_shard() {
    let v = names(SHARD_THRESHOLD, "f");
    assert_eq!(
        shard_ranges(v.iter().map(|n| n.as_slice())),
        vec![0..v.len()]
    );
    let empty = shard_ranges(std::iter::empty());
    assert_eq!((empty.len(), empty[0].len()), (1, 0));
}

proptest! {
    #[test]
    fn shards_cover_and_are_stable(n in 257usize..3000, ins in 0usize..3000, salt in "[a-z]{0,3}") {
        let v = names(n, &salt);
        let r = shard_ranges(v.iter().map(|n| n.as_slice()));
        // Contiguous, complete, within bounds.
        prop_assert_eq!(r[0].start, 0);
        prop_assert_eq!(r.last().unwrap().end, n);
        for w in r.windows(2) { prop_assert_eq!(w[0].end, w[1].start); }
        for x in &r { prop_assert!(!x.is_empty() && x.len() <= super::shard::SHARD_MAX); }
        // Inserting one name changes one or two shards' memberships, rarely more:
        // a name that lets a skipped boundary candidate (closer than SHARD_MIN to the
        // previous cut) become a cut can push the next cuts along too, each step with
        // a probability of about SHARD_MIN / 64 (seen: 3 shards for n = 1258,
        // ins = 1830, salt "iz"). The bound keeps that cascade short.
        let mut v2 = v.clone();
        let extra = format!("{salt}{:06}x", ins % n).into_bytes();
        let pos = v2.binary_search(&extra).unwrap_err();
        v2.insert(pos, extra);
        let r2 = shard_ranges(v2.iter().map(|n| n.as_slice()));
        let sets = |v: &Vec<Vec<u8>>, r: &Vec<std::ops::Range<usize>>| -> std::collections::HashSet<Vec<Vec<u8>>> {
            r.iter().map(|x| v[x.clone()].to_vec()).collect()
        };
        let (a, b) = (sets(&v, &r), sets(&v2, &r2));
        prop_assert!(a.difference(&b).count() <= 5, "{} shards changed", a.difference(&b).count());
    }

    #[test]
    fn file_round_trip(size in 1u64..1<<40, idx in proptest::collection::btree_set(0u64..1000, 0..20)) {
        let blocks: Vec<(u64, ChunkId)> = idx.into_iter()
            .filter(|i| i * BLOCK_SIZE < size)
            .map(|i| (i, ChunkId::of(&i.to_le_bytes()))).collect();
        let f = FileNode::Blocks { size, blocks };
        prop_assert_eq!(FileNode::decode(&f.encode()).unwrap(), f);
    }

    /// Block maps and leaves round-trip; a leaf decodes only at its own leaf
    /// number and within the file.
    #[test]
    fn block_map_round_trip(
        size in (MAP_MIN_SIZE + 1)..(1u64 << 44),
        ks in proptest::collection::btree_set(0u64..100_000, 0..40),
        offs in proptest::collection::btree_set(0u64..LEAF_BLOCKS, 1..20),
    ) {
        let leaves: Vec<(u64, NodeId)> = ks.iter().copied()
            .filter(|k| k * MAP_MIN_SIZE < size)
            .map(|k| (k, NodeId::of(&k.to_le_bytes()))).collect();
        let m = BlockMap { size, leaves };
        prop_assert_eq!(BlockMap::decode(&m.encode()).unwrap(), m.clone());
        prop_assert_eq!(FileNode::decode(&m.encode()).unwrap(), FileNode::Map(m));
        let k = ks.iter().next().copied().unwrap_or(3);
        let leaf = BlockLeaf {
            blocks: offs.iter().map(|o| (k * LEAF_BLOCKS + o, ChunkId::of(&o.to_le_bytes()))).collect(),
        };
        let enc = leaf.encode();
        prop_assert_eq!(BlockLeaf::decode(&enc, k, u64::MAX).unwrap(), leaf.clone());
        prop_assert_eq!(BlockLeaf::decode_unplaced(&enc).unwrap(), leaf.clone());
        prop_assert!(BlockLeaf::decode(&enc, k + 1, u64::MAX).is_err());
        let last = leaf.blocks.last().unwrap().0;
        prop_assert!(BlockLeaf::decode(&enc, k, last * BLOCK_SIZE).is_err());
    }

    #[test]
    fn decoders_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..300), ty in 0usize..6) {
        if bytes.len() >= 6 {
            bytes[..4].copy_from_slice(NODE_MAGIC);
            bytes[4] = NODE_VERSION;
            bytes[5] = [b'D', b'F', b'R', b'I', b'M', b'B'][ty];
        }
        let _ = BlockMap::decode(&bytes);
        let _ = BlockLeaf::decode(&bytes, 0, u64::MAX);
        let _ = BlockLeaf::decode_unplaced(&bytes);
        let _ = AnyDir::decode(&bytes);
        let _ = DirIndex::decode(&bytes);
        let _ = DirNode::decode(&bytes);
        let _ = FileNode::decode(&bytes);
        let _ = RootNode::decode(&bytes);
    }
}
