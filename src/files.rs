//! File contents in the store: one 'F' node, or an 'M' block map over 'B' leaves.
//!
//! Owns: reading a file node of either shape into its block list ([`load`]), and
//! writing a whole block list canonically ([`put_blocks`]: 'F' up to
//! [`crate::tree::MAP_MIN_SIZE`], 'M' + leaves above it). The live session writes
//! block maps itself (it rewrites only changed leaves) with the same rule, so import
//! and session give equal ids for equal content.
//!
//! Invariants checked on read: each leaf holds only blocks of its own span and below
//! the file's size (so the concatenation is sorted and within the file). A violation
//! is a `Corrupt` error naming the node.

use crate::error::{Error, Result};
use crate::id::{ChunkId, NodeId};
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{BlockLeaf, BlockMap, FileNode, is_mapped};

/// A file node read whole.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Inline bytes (small files); `None` for a block list.
    pub inline: Option<Vec<u8>>,
    /// (block index, chunk), sorted.
    pub blocks: Vec<(u64, ChunkId)>,
    /// For a block map: (leaf number, leaf id), sorted (empty otherwise).
    pub leaves: Vec<(u64, NodeId)>,
}

fn corrupt(id: NodeId, e: Error) -> Error {
    Error::corrupt(format!("file node {id}"), e.to_string())
}

/// Read file node `id` (and its leaves).
pub fn load(store: &dyn ObjectStore, id: NodeId) -> Result<Loaded> {
    let node =
        FileNode::decode(&store.get(ObjKind::Node, &id.into())?).map_err(|e| corrupt(id, e))?;
    Ok(match node {
        FileNode::Inline(d) => Loaded {
            inline: Some(d),
            ..Loaded::default()
        },
        FileNode::Blocks { blocks, .. } => Loaded {
            blocks,
            ..Loaded::default()
        },
        FileNode::Map(m) => {
            let mut blocks = Vec::new();
            for &(k, leaf) in &m.leaves {
                let l = BlockLeaf::decode(&store.get(ObjKind::Node, &leaf.into())?, k, m.size)
                    .map_err(|e| corrupt(leaf, e))?;
                blocks.extend(l.blocks);
            }
            Loaded {
                inline: None,
                blocks,
                leaves: m.leaves,
            }
        }
    })
}

/// Store a file of `size` bytes (> [`crate::tree::INLINE_MAX`]) with `blocks`
/// (sorted) canonically; returns the file node id.
pub fn put_blocks(
    store: &dyn ObjectStore,
    size: u64,
    blocks: Vec<(u64, ChunkId)>,
) -> Result<NodeId> {
    let node = if is_mapped(size) {
        let mut leaves = Vec::new();
        for (k, leaf) in BlockLeaf::split(&blocks) {
            leaves.push((k, store.put(ObjKind::Node, &leaf.encode())?.node()));
        }
        FileNode::Map(BlockMap { size, leaves })
    } else {
        FileNode::Blocks { size, blocks }
    };
    Ok(store.put(ObjKind::Node, &node.encode())?.node())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use crate::tree::{BLOCK_SIZE, LEAF_BLOCKS, MAP_MIN_SIZE};
    use proptest::prelude::*;

    fn chunk(i: u64) -> ChunkId {
        ChunkId::of(&i.to_le_bytes())
    }

    proptest! {
        /// Any sparse block list round-trips through `put_blocks` + `load`, and the
        /// same list always gives the same id (canonical).
        #[test]
        fn block_lists_round_trip(
            size in (INLINE_MAX_PLUS..(1u64 << 36)),
            idx in proptest::collection::btree_set(0u64..(1 << 20), 0..200),
        ) {
            let blocks: Vec<(u64, ChunkId)> = idx.into_iter()
                .filter(|i| i * BLOCK_SIZE < size)
                .map(|i| (i, chunk(i))).collect();
            let s = MemStore::default();
            let id = put_blocks(&s, size, blocks.clone()).unwrap();
            let l = load(&s, id).unwrap();
            prop_assert_eq!(&l.blocks, &blocks);
            prop_assert!(l.inline.is_none());
            prop_assert_eq!(l.leaves.is_empty(), !is_mapped(size) || blocks.is_empty());
            prop_assert_eq!(put_blocks(&s, size, blocks).unwrap(), id);
        }
    }

    const INLINE_MAX_PLUS: u64 = crate::tree::INLINE_MAX + 1;

    /// The 'F'/'M' boundary is the size alone; a leaf holds one span.
    #[test]
    fn shape_follows_size() {
        let s = MemStore::default();
        let blocks = vec![(0, chunk(0)), (LEAF_BLOCKS - 1, chunk(1))];
        let flat = put_blocks(&s, MAP_MIN_SIZE, blocks.clone()).unwrap();
        let raw = s.get(ObjKind::Node, &flat.into()).unwrap();
        assert!(matches!(
            FileNode::decode(&raw).unwrap(),
            FileNode::Blocks { .. }
        ));
        let mut big = blocks.clone();
        big.push((LEAF_BLOCKS, chunk(2)));
        big.push((5 * LEAF_BLOCKS + 3, chunk(3)));
        let mapped = put_blocks(&s, 6 * MAP_MIN_SIZE, big.clone()).unwrap();
        let raw = s.get(ObjKind::Node, &mapped.into()).unwrap();
        let FileNode::Map(m) = FileNode::decode(&raw).unwrap() else {
            panic!("not a block map")
        };
        assert_eq!(m.leaves.iter().map(|l| l.0).collect::<Vec<_>>(), [0, 1, 5]);
        assert_eq!(load(&s, mapped).unwrap().blocks, big);
    }

    /// A leaf stored under the wrong leaf number is refused, not misread.
    #[test]
    fn misplaced_leaf_is_corrupt() {
        let s = MemStore::default();
        let leaf = BlockLeaf {
            blocks: vec![(3, chunk(3))],
        };
        let lid = s.put(ObjKind::Node, &leaf.encode()).unwrap().node();
        let m = BlockMap {
            size: 4 * MAP_MIN_SIZE,
            leaves: vec![(2, lid)],
        };
        let id = s.put(ObjKind::Node, &m.encode()).unwrap().node();
        assert!(matches!(load(&s, id), Err(Error::Corrupt { .. })));
    }
}
