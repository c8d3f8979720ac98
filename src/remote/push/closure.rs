//! What a push sends: the checkpoint records and the objects a set of refs needs
//! that the remote lacks.
//!
//! Owns: the checkpoint ancestry walk (stopping at checkpoints the remote lists),
//! the object walk (`reach::Walk` with the remote index as boundary) and the
//! upload order of what it finds: chunks first, then tree nodes children before
//! parents (post-order), so every pack uploaded only names objects already on the
//! remote or in the same pack (the closure invariant of the remote tier).
//!
//! Invariants: a checkpoint the remote lists has its whole ancestry and every tree
//! it names on the remote (records are uploaded after the packs, parents before
//! children), so the walk stops there; an object the remote index has has its
//! whole subtree there (the closure invariant), so the object walk stops there.

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId, ObjectId};
use crate::reach::{ChunkCheck, Walk};
use crate::refs::Checkpoint;
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{AnyDir, BlockLeaf, Content, Entry, FileNode, NODE_MAGIC, Record, RootNode};

/// Checkpoint records to send, parents before children, grouped in levels: every
/// record's parents are on the remote or in an earlier level.
#[derive(Debug, Default)]
pub struct Checkpoints {
    /// Levels of (id hex, stored record bytes, decoded record).
    pub levels: Vec<Vec<(String, Vec<u8>, Checkpoint)>>,
}

impl Checkpoints {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// Every record, parents first.
    pub fn iter(&self) -> impl Iterator<Item = &(String, Vec<u8>, Checkpoint)> {
        self.levels.iter().flatten()
    }
}

/// The checkpoints reachable from `heads` (through parents) that `on_remote` does
/// not list. `required` heads must exist locally (or on the remote); `optional`
/// ones (named by an operation log or a message, possibly of a removed session)
/// are skipped when neither has them.
pub fn checkpoints(
    store: &dyn ObjectStore,
    on_remote: &HashSet<String>,
    required: &[String],
    optional: &[String],
) -> Result<Checkpoints> {
    let mut found: HashMap<String, (Vec<u8>, Checkpoint)> = HashMap::new();
    let mut stack: Vec<(String, bool)> = required
        .iter()
        .map(|h| (h.clone(), true))
        .chain(optional.iter().map(|h| (h.clone(), false)))
        .collect();
    while let Some((hex, must)) = stack.pop() {
        if on_remote.contains(&hex) || found.contains_key(&hex) {
            continue;
        }
        let id = CheckpointId::from_hex(&hex)
            .ok_or_else(|| Error::Invalid(format!("malformed checkpoint id {hex:?}")))?;
        let Some(bytes) = store.meta_get(&crate::meta::checkpoint_key(&id))? else {
            if must {
                return Err(Error::Missing(format!(
                    "checkpoint {hex} is neither in the local store nor on the remote"
                )));
            }
            continue;
        };
        let c = Checkpoint::decode(&hex, &bytes)?;
        for p in &c.parents {
            stack.push((p.to_hex(), true));
        }
        found.insert(hex, (bytes, c));
    }
    Ok(Checkpoints {
        levels: levels(found),
    })
}

/// Group `found` in levels: level n holds records whose parents are all outside
/// `found` or in levels below n.
fn levels(
    mut found: HashMap<String, (Vec<u8>, Checkpoint)>,
) -> Vec<Vec<(String, Vec<u8>, Checkpoint)>> {
    let mut level: HashMap<String, usize> = HashMap::new();
    let keys: Vec<String> = found.keys().cloned().collect();
    for k in &keys {
        // Iterative depth computation (histories are long; no recursion).
        let mut stack = vec![(k.clone(), false)];
        while let Some((h, expanded)) = stack.pop() {
            if level.contains_key(&h) {
                continue;
            }
            let parents: Vec<String> = found[&h]
                .1
                .parents
                .iter()
                .map(|p| p.to_hex())
                .filter(|p| found.contains_key(p))
                .collect();
            if expanded {
                let l = parents.iter().map(|p| level[p] + 1).max().unwrap_or(0);
                level.insert(h, l);
            } else {
                stack.push((h, true));
                for p in parents {
                    if !level.contains_key(&p) {
                        stack.push((p, false));
                    }
                }
            }
        }
    }
    let depth = level.values().max().map_or(0, |m| m + 1);
    let mut out: Vec<Vec<_>> = (0..depth).map(|_| Vec::new()).collect();
    let mut keys = keys;
    keys.sort();
    for k in keys {
        let (bytes, c) = found.remove(&k).expect("found");
        out[level[&k]].push((k, bytes, c));
    }
    out
}

/// Objects to send.
#[derive(Debug, Default)]
pub struct Objects {
    /// Chunk ids, each file's in block order, files in the walk's order (so a
    /// file's chunks are adjacent in the remote packs and a lazy reader's
    /// read-ahead brings the rest of the file; delta bases are ordered when packing).
    pub chunks: Vec<ObjectId>,
    /// Node ids, children before parents.
    pub nodes: Vec<ObjectId>,
}

impl Objects {
    /// Number of objects.
    pub fn len(&self) -> usize {
        self.chunks.len() + self.nodes.len()
    }
}

/// Every object under `roots` that `remote_has` says the remote lacks, in upload
/// order. A local object that cannot be read fails the push (a push never sends a
/// partial tree).
pub fn objects(
    store: &dyn ObjectStore,
    remote_has: &(dyn Fn(&ObjectId) -> bool + Sync),
    roots: &[NodeId],
) -> Result<Objects> {
    let read = |k: ObjKind, id: &ObjectId| store.get(k, id);
    let mut w = Walk::new(&read, ChunkCheck::Mark).with_boundary(remote_has);
    for r in roots {
        w.root("push", *r);
    }
    if let Some(p) = w.problems.first() {
        return Err(Error::Missing(format!(
            "cannot push: {} at {} ({}): {}",
            p.owner,
            p.path,
            p.object.as_deref().unwrap_or("-"),
            p.error
        )));
    }
    let send_nodes: HashSet<ObjectId> = w.nodes.difference(&w.at_boundary).copied().collect();
    let send_chunks: HashSet<ObjectId> = w.chunks.difference(&w.at_boundary).copied().collect();
    let (nodes, mut chunks) = post_order(store, roots, &send_nodes, &send_chunks)?;
    debug_assert_eq!(chunks.len(), send_chunks.len());
    if chunks.len() < send_chunks.len() {
        // Never expected (every sent chunk is named by a sent node); send them anyway.
        let named: HashSet<ObjectId> = chunks.iter().copied().collect();
        let mut rest: Vec<ObjectId> = send_chunks.difference(&named).copied().collect();
        rest.sort();
        chunks.extend(rest);
    }
    Ok(Objects { chunks, nodes })
}

type Ids = Vec<ObjectId>;

/// The nodes of `send`, children before parents (an iterative depth-first walk
/// from `roots`, restricted to `send`), and the chunks of `chunks` in the order
/// the file nodes name them.
fn post_order(
    store: &dyn ObjectStore,
    roots: &[NodeId],
    send: &HashSet<ObjectId>,
    chunks: &HashSet<ObjectId>,
) -> Result<(Ids, Ids)> {
    let mut out = Vec::with_capacity(send.len());
    let mut in_order = Vec::with_capacity(chunks.len());
    let mut seen: HashSet<ObjectId> = HashSet::with_capacity(chunks.len());
    let mut done: HashSet<ObjectId> = HashSet::with_capacity(send.len());
    let mut stack: Vec<(ObjectId, bool)> = roots.iter().rev().map(|r| (r.into(), false)).collect();
    while let Some((id, expanded)) = stack.pop() {
        if !send.contains(&id) || done.contains(&id) {
            continue;
        }
        if expanded {
            done.insert(id);
            out.push(id);
            continue;
        }
        stack.push((id, true));
        let raw = store.get(ObjKind::Node, &id)?;
        for c in node_chunks(&raw)? {
            if chunks.contains(&c) && seen.insert(c) {
                in_order.push(c);
            }
        }
        for c in node_children(&raw)?.into_iter().rev() {
            if send.contains(&c) && !done.contains(&c) {
                stack.push((c, false));
            }
        }
    }
    Ok((out, in_order))
}

/// The chunks a file node or block leaf names, in block order (none for other nodes).
fn node_chunks(raw: &[u8]) -> Result<Vec<ObjectId>> {
    if raw.len() <= 5 || &raw[..4] != NODE_MAGIC {
        return Err(Error::corrupt("tree node", "not a tree node"));
    }
    Ok(match raw[5] {
        b'F' => match FileNode::decode(raw)? {
            FileNode::Blocks { blocks, .. } => blocks.iter().map(|(_, c)| c.into()).collect(),
            _ => Vec::new(),
        },
        b'B' => BlockLeaf::decode_unplaced(raw)?
            .blocks
            .iter()
            .map(|(_, c)| c.into())
            .collect(),
        _ => Vec::new(),
    })
}

/// The tree nodes a node names (not its chunks), by its type byte.
pub fn node_children(raw: &[u8]) -> Result<Vec<ObjectId>> {
    if raw.len() <= 5 || &raw[..4] != NODE_MAGIC {
        return Err(Error::corrupt("tree node", "not a tree node"));
    }
    let of_record = |r: &Record, out: &mut Vec<ObjectId>| {
        if let Content::Node(id) = r.content {
            out.push(id.into());
        }
    };
    let mut out = Vec::new();
    match raw[5] {
        b'R' => {
            let r = RootNode::decode(raw)?;
            of_record(&r.root, &mut out);
            for l in &r.links {
                of_record(l, &mut out);
            }
        }
        b'F' | b'M' => {
            if let FileNode::Map(m) = FileNode::decode(raw)? {
                out.extend(m.leaves.iter().map(|(_, l)| ObjectId::from(l)));
            }
        }
        b'B' => {
            BlockLeaf::decode_unplaced(raw)?;
        }
        _ => match AnyDir::decode(raw)? {
            AnyDir::Index(ix) => out.extend(ix.shards.iter().map(|(_, l)| ObjectId::from(l))),
            AnyDir::Flat(d) => {
                for (_, e) in &d.entries {
                    if let Entry::Inline(r) = e {
                        of_record(r, &mut out);
                    }
                }
            }
        },
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    #[test]
    fn post_order_puts_children_before_parents_and_stops_at_the_boundary() {
        let store = MemStore::default();
        let (root, bottom) = crate::reach::tests::deep_chain(&store, 50);
        let all = objects(&store, &|_| false, &[root]).unwrap();
        assert_eq!(all.nodes.len(), 52);
        assert_eq!(all.nodes.first(), Some(&bottom));
        assert_eq!(all.nodes.last(), Some(&root.into()));
        let pos: HashMap<ObjectId, usize> = all
            .nodes
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, i))
            .collect();
        for id in &all.nodes {
            let raw = store.get(ObjKind::Node, id).unwrap();
            for c in node_children(&raw).unwrap() {
                assert!(pos[&c] < pos[id], "a child comes after its parent");
            }
        }
        // The remote has the bottom half: the walk neither sends nor reads it.
        let half: HashSet<ObjectId> = all.nodes[..26].iter().copied().collect();
        let rest = objects(&store, &|id| half.contains(id), &[root]).unwrap();
        assert_eq!(rest.nodes, all.nodes[26..].to_vec());
    }

    #[test]
    fn checkpoint_levels_put_parents_first_and_stop_at_the_remote() {
        let store = MemStore::default();
        let (root, _) = crate::reach::tests::deep_chain(&store, 1);
        let a = Checkpoint::new("s", root, None, "a", "manual", 0);
        let b = Checkpoint::new("s", root, Some(a.id), "b", "manual", 1);
        let c = Checkpoint::new("s", root, Some(b.id), "c", "manual", 2);
        store.commit(vec![a.op(), b.op(), c.op()]).unwrap();
        let none = HashSet::new();
        let all = checkpoints(&store, &none, &[c.id.to_hex()], &[]).unwrap();
        let order: Vec<&str> = all.iter().map(|(h, _, _)| h.as_str()).collect();
        assert_eq!(
            order,
            [
                a.id.to_hex().as_str(),
                b.id.to_hex().as_str(),
                c.id.to_hex().as_str()
            ]
        );
        let on_remote: HashSet<String> = [b.id.to_hex()].into();
        let some = checkpoints(&store, &on_remote, &[c.id.to_hex()], &[]).unwrap();
        assert_eq!(some.len(), 1);
        let missing = "ab".repeat(32);
        assert!(checkpoints(&store, &none, std::slice::from_ref(&missing), &[]).is_err());
        assert_eq!(
            checkpoints(&store, &none, &[], &[missing]).unwrap().len(),
            0
        );
    }
}
