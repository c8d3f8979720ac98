//! Directory contents in the store, flat or sharded.
//!
//! Owns: reading a directory node of either shape ([`crate::tree::AnyDir`]) into its
//! entries or its shards, and writing a directory's entries as one 'D' node or as an
//! 'I' index over 'D' leaves (split by [`crate::tree::shard_ranges`]).
//!
//! Invariants checked on read: index leaves are flat 'D' nodes, each holds exactly the
//! count the index gives, and names increase across leaves. A violation is a
//! `Corrupt` error naming the node, never a silently wrong listing.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::store::cache::Decoded;
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{AnyDir, DirIndex, DirNode, Entry, shard_ranges};

/// One shard of a directory: its node id and its entries.
pub struct Shard {
    /// Leaf node id (for a flat directory, the directory node itself).
    pub id: NodeId,
    /// The leaf's entries, sorted by name.
    pub node: DirNode,
}

/// The shard ids of directory node `id` (a flat directory is one shard: itself), and
/// whether it is sharded. Reads only the index, not the leaves.
pub fn shard_ids(store: &dyn ObjectStore, id: NodeId) -> Result<(Vec<NodeId>, bool)> {
    let bytes = store.get(ObjKind::Node, &id.into())?;
    if !crate::tree::is_dir_index(&bytes) {
        // A flat directory (verified when its entries are read).
        return Ok((vec![id], false));
    }
    let index = DirIndex::decode(&bytes)
        .map_err(|e| Error::corrupt(format!("directory node {id}"), e.to_string()))?;
    Ok((index.shards.into_iter().map(|(_, id)| id).collect(), true))
}

/// One leaf of a sharded directory (or a flat directory node), decoded once and
/// shared while the store's cache keeps its bytes ([`ObjectStore::get_decoded`]).
pub fn leaf(store: &dyn ObjectStore, id: NodeId) -> Result<Arc<DirNode>> {
    let decode = |b: &[u8]| -> Result<Decoded> {
        let d = DirNode::decode(b)
            .map_err(|e| Error::corrupt(format!("directory node {id}"), e.to_string()))?;
        Ok(Arc::new(d))
    };
    let d = store.get_decoded(ObjKind::Node, &id.into(), &decode)?;
    match d.downcast::<DirNode>() {
        Ok(d) => Ok(d),
        // Kept decoded as something else: decode afresh.
        Err(_) => Ok(Arc::new(load_leaf(store, id)?)),
    }
}

/// Read one leaf of a sharded directory (or a flat directory node).
pub fn load_leaf(store: &dyn ObjectStore, id: NodeId) -> Result<DirNode> {
    DirNode::decode(&store.get(ObjKind::Node, &id.into())?)
        .map_err(|e| Error::corrupt(format!("directory node {id}"), e.to_string()))
}

/// All shards of directory node `id`, verified (see module invariants).
pub fn load_shards(store: &dyn ObjectStore, id: NodeId) -> Result<Vec<Shard>> {
    let node = AnyDir::decode(&store.get(ObjKind::Node, &id.into())?)
        .map_err(|e| Error::corrupt(format!("directory node {id}"), e.to_string()))?;
    let index = match node {
        AnyDir::Flat(node) => return Ok(vec![Shard { id, node }]),
        AnyDir::Index(i) => i,
    };
    let mut out: Vec<Shard> = Vec::with_capacity(index.shards.len());
    for (count, leaf) in index.shards {
        let node = load_leaf(store, leaf)?;
        if node.entries.len() != count as usize {
            return Err(Error::corrupt(
                format!("directory index {id}"),
                format!(
                    "leaf {leaf} holds {} entries, index says {count}",
                    node.entries.len()
                ),
            ));
        }
        if let (Some(prev), Some((first, _))) = (
            out.last().and_then(|s| s.node.entries.last()),
            node.entries.first(),
        ) && prev.0 >= *first
        {
            return Err(Error::corrupt(
                format!("directory index {id}"),
                format!("leaf {leaf} is out of name order"),
            ));
        }
        out.push(Shard { id: leaf, node });
    }
    Ok(out)
}

/// The entry named `name` in directory node `id`, if any. Reads one leaf of a
/// sharded directory (the first whose last name is not below `name`), not all.
pub fn find_entry(store: &dyn ObjectStore, id: NodeId, name: &[u8]) -> Result<Option<Entry>> {
    let (ids, _) = shard_ids(store, id)?;
    for leaf_id in ids {
        let l = leaf(store, leaf_id)?;
        if l.entries.last().is_some_and(|(n, _)| n.as_slice() < name) {
            continue;
        }
        return Ok(l
            .entries
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()
            .map(|i| l.entries[i].1.clone()));
    }
    Ok(None)
}

/// All entries of a directory (`None` = empty directory), in name order.
pub fn load_dir(store: &dyn ObjectStore, id: Option<NodeId>) -> Result<Arc<DirNode>> {
    let Some(id) = id else {
        return Ok(Arc::default());
    };
    if !shard_ids(store, id)?.1 {
        return leaf(store, id);
    }
    let shards = load_shards(store, id)?;
    let mut entries = Vec::with_capacity(shards.iter().map(|s| s.node.entries.len()).sum());
    for s in shards {
        entries.extend(s.node.entries);
    }
    Ok(Arc::new(DirNode { entries }))
}

/// The entries of directories `a` and `b` except those in shards both share (which
/// are identical on both sides): what a comparison of the two has to look at. Cost is
/// proportional to the shards that differ, not to the directories' size.
pub fn load_differing(
    store: &dyn ObjectStore,
    a: NodeId,
    b: NodeId,
) -> Result<(Arc<DirNode>, Arc<DirNode>)> {
    if a == b {
        return Ok((Arc::default(), Arc::default()));
    }
    let (sa, a_sharded) = shard_ids(store, a)?;
    let (sb, b_sharded) = shard_ids(store, b)?;
    if !a_sharded && !b_sharded {
        return Ok((leaf(store, a)?, leaf(store, b)?));
    }
    let common: std::collections::HashSet<NodeId> = sa
        .iter()
        .copied()
        .collect::<std::collections::HashSet<_>>()
        .intersection(&sb.iter().copied().collect())
        .copied()
        .collect();
    let rest = |ids: Vec<NodeId>, whole: NodeId| -> Result<Arc<DirNode>> {
        // Verify the whole directory when nothing is shared (cheap enough, and the
        // same checks as a full load); otherwise read just the differing leaves.
        if common.is_empty() {
            return load_dir(store, Some(whole));
        }
        let mut entries = Vec::new();
        for id in ids.into_iter().filter(|id| !common.contains(id)) {
            entries.extend(leaf(store, id)?.entries.iter().cloned());
        }
        Ok(Arc::new(DirNode { entries }))
    };
    Ok((rest(sa, a)?, rest(sb, b)?))
}

/// Store a directory's entries (sorted by name) in canonical shape; returns the id
/// to put in its record.
pub fn put_dir(store: &dyn ObjectStore, entries: Vec<(Vec<u8>, Entry)>) -> Result<NodeId> {
    if !is_sharded_len(entries.len()) {
        return Ok(store
            .put(ObjKind::Node, &DirNode { entries }.encode())?
            .node());
    }
    let ranges = shard_ranges(entries.iter().map(|(n, _)| n.as_slice()));
    let mut index = DirIndex::default();
    let mut it = entries.into_iter();
    for r in ranges {
        let leaf = DirNode {
            entries: it.by_ref().take(r.len()).collect(),
        };
        let id = store.put(ObjKind::Node, &leaf.encode())?.node();
        index.shards.push((r.len() as u32, id));
    }
    Ok(store.put(ObjKind::Node, &index.encode())?.node())
}

/// Whether a directory of `n` entries is stored sharded.
pub fn is_sharded_len(n: usize) -> bool {
    n > crate::tree::SHARD_THRESHOLD
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use crate::tree::{Attr, Content, Kind, Record};

    fn entries(n: usize) -> Vec<(Vec<u8>, Entry)> {
        (0..n)
            .map(|i| {
                (
                    format!("f{i:05}").into_bytes(),
                    Entry::Inline(Record {
                        kind: Kind::File,
                        ino: i as u64 + 2,
                        attr: Attr::default(),
                        xattrs: vec![],
                        content: Content::None,
                    }),
                )
            })
            .collect()
    }

    #[test]
    fn flat_and_sharded_round_trip() {
        let store = MemStore::default();
        for n in [0, 1, 256, 257, 5000] {
            let e = entries(n);
            let id = put_dir(&store, e.clone()).unwrap();
            assert_eq!(load_dir(&store, Some(id)).unwrap().entries, e, "n={n}");
            let (ids, sharded) = shard_ids(&store, id).unwrap();
            assert_eq!(sharded, n > 256);
            assert!(!sharded || ids.len() > 1);
        }
    }

    #[test]
    fn one_change_rewrites_one_leaf() {
        let store = MemStore::default();
        let mut e = entries(3000);
        let a = shard_ids(&store, put_dir(&store, e.clone()).unwrap())
            .unwrap()
            .0;
        if let Entry::Inline(r) = &mut e[1234].1 {
            r.attr.size = 7;
        }
        let b = shard_ids(&store, put_dir(&store, e).unwrap()).unwrap().0;
        assert_eq!(a.len(), b.len());
        assert_eq!(a.iter().zip(&b).filter(|(x, y)| x != y).count(), 1);
    }

    #[test]
    fn differing_skips_shared_shards() {
        let store = MemStore::default();
        let a = entries(3000);
        let mut b = a.clone();
        b.remove(100);
        if let Entry::Inline(r) = &mut b[2000].1 {
            r.attr.size = 9;
        }
        let (ia, ib) = (
            put_dir(&store, a.clone()).unwrap(),
            put_dir(&store, b.clone()).unwrap(),
        );
        let (da, db) = load_differing(&store, ia, ib).unwrap();
        assert!(da.entries.len() < 600 && db.entries.len() < 600);
        // Whatever is left out is identical on both sides.
        let left_a: Vec<_> = a.iter().filter(|e| !da.entries.contains(e)).collect();
        let left_b: Vec<_> = b.iter().filter(|e| !db.entries.contains(e)).collect();
        assert_eq!(left_a, left_b);
        assert!(da.entries.iter().any(|(n, _)| n == b"f00100"));
        assert!(db.entries.iter().any(|(n, _)| n == b"f02001"));
        // Flat vs flat: everything.
        let (x, y) = (
            put_dir(&store, entries(10)).unwrap(),
            put_dir(&store, entries(11)).unwrap(),
        );
        let (dx, dy) = load_differing(&store, x, y).unwrap();
        assert_eq!((dx.entries.len(), dy.entries.len()), (10, 11));
    }

    #[test]
    fn inconsistent_index_is_corrupt() {
        let store = MemStore::default();
        let e = entries(300);
        let id = put_dir(&store, e).unwrap();
        let (ids, _) = shard_ids(&store, id).unwrap();
        // Leaves swapped: names no longer increase.
        let mut bad = DirIndex::default();
        for leaf in ids.iter().rev() {
            let n = load_leaf(&store, *leaf).unwrap().entries.len() as u32;
            bad.shards.push((n, *leaf));
        }
        let bad_id = store.put(ObjKind::Node, &bad.encode()).unwrap().node();
        assert!(load_dir(&store, Some(bad_id)).is_err());
        // Wrong count.
        let wrong = DirIndex {
            shards: vec![(1, ids[0])],
        };
        let wrong_id = store.put(ObjKind::Node, &wrong.encode()).unwrap().node();
        assert!(load_dir(&store, Some(wrong_id)).is_err());
    }
}
