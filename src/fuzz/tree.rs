//! Fuzz targets of tree nodes and block maps.

use super::*;

pub(super) fn tree_round_trip<T: PartialEq + std::fmt::Debug>(
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

pub(super) fn tree_node(bytes: &[u8]) {
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

pub(super) fn sample_record(kind: crate::tree::Kind, ino: u64) -> crate::tree::Record {
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

pub(super) fn tree_samples() -> Vec<Vec<u8>> {
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

pub(super) fn tree_node_seeds() -> Vec<Vec<u8>> {
    tree_samples()
}

pub(super) fn block_map(bytes: &[u8]) {
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

pub(super) fn block_map_seeds() -> Vec<Vec<u8>> {
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
