//! Step 2 of a flush's encode, outside the table lock: seal the planned in-memory
//! blocks, encode, compress, delta and put every node, then the root.

use std::collections::HashMap;

use super::{
    Body, Done, Encoded, FileBody, LeafPlan, PEntry, Pending, Plan, Rec, Sealed, ShardPlan,
    not_encoded,
};
use crate::error::Result;
use crate::id::{ChunkId, NodeId, ObjectId};
use crate::session::flush::{DELTA_FILE_MAX, base_chunks, canonical_block};
use crate::session::inode::Block;
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{
    BlockLeaf, BlockMap, Content, DirIndex, DirNode, Entry, FileNode, Record, RootNode,
};

/// Encode and put every planned node and the root node.
pub(crate) fn encode(plan: &Plan, store: &dyn ObjectStore) -> Result<Encoded> {
    let mut done: Vec<Done> = Vec::with_capacity(plan.jobs.len());
    for job in &plan.jobs {
        let d = match &job.body {
            Body::Dir(pending) => {
                let node = DirNode {
                    entries: resolve(pending, &done)?,
                };
                Done {
                    id: Some(put_node(store, &node.encode(), job.base)?),
                    ..Done::default()
                }
            }
            Body::Sharded(shards) => encode_sharded(store, job.base, shards, &done)?,
            Body::File { size, body } => encode_file(store, job.base, *size, body)?,
        };
        done.push(d);
    }
    let root = RootNode {
        root: resolve_rec(&plan.root, &done)?,
        links: plan
            .links
            .iter()
            .map(|r| resolve_rec(r, &done))
            .collect::<Result<_>>()?,
        next_ino: plan.next_ino,
    };
    let root = store.put(ObjKind::Node, &root.encode())?.node();
    Ok(Encoded { done, root })
}

fn put_node(store: &dyn ObjectStore, raw: &[u8], base: Option<NodeId>) -> Result<NodeId> {
    Ok(store
        .put_based(ObjKind::Node, raw, base.map(ObjectId::from))?
        .node())
}

fn resolve_rec(r: &Rec, done: &[Done]) -> Result<Record> {
    let mut rec = r.rec.clone();
    if let Some(j) = r.job {
        let d = done.get(j).ok_or_else(|| not_encoded(rec.ino))?;
        rec.content = d.id.map_or(Content::None, Content::Node);
    }
    Ok(rec)
}

fn resolve(pending: &Pending, done: &[Done]) -> Result<Vec<(Vec<u8>, Entry)>> {
    pending
        .iter()
        .map(|(name, e)| {
            Ok((
                name.clone(),
                match e {
                    PEntry::Inline(r) => Entry::Inline(resolve_rec(r, done)?),
                    PEntry::Link { ino, kind } => Entry::HardLink {
                        ino: *ino,
                        kind: *kind,
                    },
                },
            ))
        })
        .collect()
}

fn encode_sharded(
    store: &dyn ObjectStore,
    base: Option<NodeId>,
    shards: &[ShardPlan],
    done: &[Done],
) -> Result<Done> {
    // A changed leaf's delta base: the old index's leaf at the same position
    // (membership changes move few names across leaves).
    let old_leaves: Vec<NodeId> = base
        .and_then(|b| store.get(ObjKind::Node, &b.into()).ok())
        .and_then(|raw| DirIndex::decode(&raw).ok())
        .map(|ix| ix.shards.into_iter().map(|(_, id)| id).collect())
        .unwrap_or_default();
    let mut out = Done::default();
    let mut index = DirIndex::default();
    for (pos, s) in shards.iter().enumerate() {
        let (digest, count, id) = match s {
            ShardPlan::Reuse(digest, count, id) => (*digest, *count, *id),
            ShardPlan::Write(digest, pending) => {
                let leaf = DirNode {
                    entries: resolve(pending, done)?,
                };
                let id = put_node(store, &leaf.encode(), old_leaves.get(pos).copied())?;
                (*digest, pending.len() as u32, id)
            }
        };
        out.shards.insert(digest, id);
        index.shards.push((count, id));
    }
    out.id = Some(put_node(store, &index.encode(), base)?);
    Ok(out)
}

/// Seal the in-memory blocks of `list` (all-zero ones become holes); returns the
/// stored (index, chunk) list. `hints`: delta bases by index (small files).
fn seal_list(
    store: &dyn ObjectStore,
    size: u64,
    list: &[(u64, Block)],
    hints: &HashMap<u64, ChunkId>,
    sealed: &mut Vec<Sealed>,
) -> Result<Vec<(u64, ChunkId)>> {
    let mut out = Vec::with_capacity(list.len());
    for (idx, b) in list {
        match b {
            Block::Stored(c) => out.push((*idx, *c)),
            Block::Mem(d) => {
                let bytes = canonical_block(d, *idx, size);
                let id = if bytes.iter().all(|&x| x == 0) {
                    None
                } else {
                    let hint = hints.get(idx).map(ObjectId::from);
                    Some(store.put_based(ObjKind::Chunk, &bytes, hint)?.chunk())
                };
                out.extend(id.map(|c| (*idx, c)));
                sealed.push((*idx, d.clone(), id));
            }
        }
    }
    Ok(out)
}

fn encode_file(
    store: &dyn ObjectStore,
    base: Option<NodeId>,
    size: u64,
    body: &FileBody,
) -> Result<Done> {
    let mut out = Done::default();
    let node = match body {
        FileBody::Inline(b) => {
            let mut buf = vec![0u8; size as usize];
            let d = match b {
                Some(Block::Mem(d)) => Some(d.clone()),
                Some(Block::Stored(c)) => Some(store.get(ObjKind::Chunk, &c.into())?),
                None => None,
            };
            if let Some(d) = d {
                let n = d.len().min(buf.len());
                buf[..n].copy_from_slice(&d[..n]);
            }
            FileNode::Inline(buf)
        }
        FileBody::Flat(list) => {
            let hints =
                if size <= DELTA_FILE_MAX && list.iter().any(|(_, b)| matches!(b, Block::Mem(_))) {
                    base_chunks(store, base, size)
                } else {
                    HashMap::new()
                };
            let blocks = seal_list(store, size, list, &hints, &mut out.sealed)?;
            FileNode::Blocks { size, blocks }
        }
        FileBody::Map(plans) => {
            // A rewritten leaf's delta base: the old map's leaf of the same number.
            let old: HashMap<u64, NodeId> = base
                .and_then(|b| store.get(ObjKind::Node, &b.into()).ok())
                .and_then(|raw| BlockMap::decode(&raw).ok())
                .map(|m| m.leaves.into_iter().collect())
                .unwrap_or_default();
            let mut leaves = Vec::with_capacity(plans.len());
            for (k, lp) in plans {
                let id = match lp {
                    LeafPlan::Reuse(id) => *id,
                    LeafPlan::Write(list) => {
                        let blocks =
                            seal_list(store, size, list, &HashMap::new(), &mut out.sealed)?;
                        if blocks.is_empty() {
                            continue;
                        }
                        let leaf = BlockLeaf { blocks };
                        put_node(store, &leaf.encode(), old.get(k).copied())?
                    }
                };
                leaves.push((*k, id));
            }
            out.leaves = Some(leaves.clone());
            FileNode::Map(BlockMap { size, leaves })
        }
    };
    out.id = Some(put_node(store, &node.encode(), base)?);
    Ok(out)
}
