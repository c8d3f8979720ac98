//! Encoding the live table into tree nodes, with the slow part outside the table lock.
//!
//! [`encode_tree`] works in three steps:
//! 1. **plan** (table lock held, no I/O in the common case): walk the dirty paths
//!    (post-order over an explicit stack) and capture what each node needs: records
//!    as they are at this instant, block lists (sharing in-memory blocks, not copying
//!    them), the ids of clean shards and clean block-map leaves to reuse. Only a dirty
//!    directory or file that is not loaded yet is read here (normally none is).
//! 2. **encode** (no table lock): seal the in-memory blocks the plan holds, encode,
//!    compress and delta-encode the nodes and put them; then the root node.
//! 3. **publish** (table lock held): install content ids, shard and leaf caches and
//!    clean record flags — except for what changed meanwhile. While a flush is out of
//!    the lock, `State::mark_dirty` records every inode it reaches in
//!    `State::touched`; those inodes and every planned directory above them keep
//!    their dirty flag and get no content id, so the next flush encodes them again.
//!    A change during a flush is never lost; the committed root is the table as it
//!    was at the plan.
//!
//! A file longer than [`MAP_MIN_SIZE`] is a block map: the plan encodes only the
//! leaves in `FileData::dirty_leaves` and reuses the others by id, so flushing a big
//! file costs O(changed leaves) plus its index (about 40 bytes per 32 MiB).
//!
//! Invariant kept: an inode's content id is set only from a plan taken while it was
//! unchanged since, and a record is marked clean only if its containing directory is
//! published in the same step (a shard reused by id must hold the current record).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::flush::{DELTA_FILE_MAX, base_chunks, canonical_block};
use super::inode::{Block, Data, State};
use crate::error::{Error, Result};
use crate::id::{ChunkId, NodeId};
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{
    BLOCK_SIZE, BlockLeaf, BlockMap, Content, DirIndex, DirNode, Entry, FileNode, INLINE_MAX, Kind,
    LEAF_BLOCKS, MAP_MIN_SIZE, Record, RootNode, ShardDigest, is_mapped, leaf_of, shard_ranges,
};

/// A record captured at the plan; `job` (an index into [`Plan::jobs`]) supplies its
/// content id once encoded.
struct Rec {
    rec: Record,
    job: Option<usize>,
}

enum PEntry {
    Inline(Rec),
    Link { ino: u64, kind: Kind },
}

type Pending = Vec<(Vec<u8>, PEntry)>;

enum ShardPlan {
    Reuse([u8; 32], u32, NodeId),
    Write([u8; 32], Pending),
}

enum LeafPlan {
    Reuse(NodeId),
    Write(Vec<(u64, Block)>),
}

enum FileBody {
    Inline(Option<Block>),
    Flat(Vec<(u64, Block)>),
    Map(Vec<(u64, LeafPlan)>),
}

enum Body {
    Dir(Pending),
    Sharded(Vec<ShardPlan>),
    File { size: u64, body: FileBody },
}

struct Job {
    ino: u64,
    base: Option<NodeId>,
    body: Body,
}

/// Everything the encode step needs, captured under the lock.
pub(super) struct Plan {
    jobs: Vec<Job>,
    root: Rec,
    links: Vec<Rec>,
    next_ino: u64,
    /// (captured record's ino, ino of the directory holding it; 0 for the root
    /// record and the link table).
    records: Vec<(u64, u64)>,
    /// Files whose `dirty_leaves` the plan took (reset to untracked on failure).
    mapped: Vec<u64>,
}

/// A sealed in-memory block: (index, the buffer sealed, its chunk or `None` = hole).
type Sealed = (u64, Arc<Vec<u8>>, Option<ChunkId>);

/// The outcome of one job.
#[derive(Default)]
struct Done {
    id: Option<NodeId>,
    shards: HashMap<[u8; 32], NodeId>,
    leaves: Option<Vec<(u64, NodeId)>>,
    sealed: Vec<Sealed>,
}

/// The encoded tree: per-job outcomes and the root node id.
pub(super) struct Encoded {
    done: Vec<Done>,
    root: NodeId,
}

fn not_encoded(ino: u64) -> Error {
    Error::corrupt(
        format!("live inode {ino}"),
        "content not encoded before its record",
    )
}

// ---- 1. plan (table lock held) ----

/// Plan the encoding of every dirty node. Clears `changed`/`links_dirty` and starts
/// recording touched inodes: a change from now on shows as `changed` again.
pub(super) fn plan(st: &mut State, store: &dyn ObjectStore) -> Result<Plan> {
    let mut p = Plan {
        jobs: Vec::new(),
        root: Rec {
            rec: st.get(1)?.record(1, Content::None),
            job: None,
        },
        links: Vec::new(),
        next_ino: 0,
        records: Vec::new(),
        mapped: Vec::new(),
    };
    let mut job_of: HashMap<u64, usize> = HashMap::new();
    for n in content_order(st, store, 1)? {
        plan_content(st, store, n, &mut p, &mut job_of)?;
    }
    p.root = capture(st, 1, 0, &job_of, &mut p.records)?;
    let link_inos: Vec<u64> = st.links.iter().copied().collect();
    for ino in link_inos {
        if st.inodes.contains_key(&ino) {
            for n in content_order(st, store, ino)? {
                plan_content(st, store, n, &mut p, &mut job_of)?;
            }
            p.links.push(capture(st, ino, 0, &job_of, &mut p.records)?);
        } else if let Some(r) = st.link_records.get(&ino) {
            p.links.push(Rec {
                rec: r.clone(),
                job: None,
            });
        }
    }
    p.next_ino = st.next_ino;
    st.changed = false;
    st.links_dirty = false;
    st.touched = Some(HashSet::new());
    Ok(p)
}

/// The inodes below (and including) `ino` whose content must be re-encoded, each
/// after all of its descendants (post-order). A clean directory's subtree is skipped:
/// its content id covers every record below it (`mark_dirty` unstores ancestors).
fn content_order(st: &mut State, store: &dyn ObjectStore, ino: u64) -> Result<Vec<u64>> {
    let mut order = Vec::new();
    let mut stack = vec![(ino, false)];
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            order.push(n);
            continue;
        }
        let i = st.get(n)?;
        if i.clean_content().is_some() {
            continue;
        }
        if !matches!(i.data, Data::Dir(_)) {
            order.push(n);
            continue;
        }
        st.load_dir(store, n)?;
        stack.push((n, true));
        let Data::Dir(d) = &st.get(n)?.data else {
            unreachable!("checked above")
        };
        for &child in d.entries.as_ref().expect("dir loaded").values() {
            if st.get(child).is_ok_and(|c| !c.hardlink) {
                stack.push((child, false));
            }
        }
    }
    Ok(order)
}

/// Capture the record of `ino` (held by directory `container`): its content is
/// clean or planned as a job.
fn capture(
    st: &mut State,
    ino: u64,
    container: u64,
    job_of: &HashMap<u64, usize>,
    records: &mut Vec<(u64, u64)>,
) -> Result<Rec> {
    let i = st.get_mut(ino)?;
    if i.kind == Kind::File {
        i.attr.blocks = i.blocks512();
    }
    let (content, job) = match job_of.get(&ino) {
        Some(&j) => (Content::None, Some(j)),
        None => (i.clean_content().ok_or_else(|| not_encoded(ino))?, None),
    };
    records.push((ino, container));
    Ok(Rec {
        rec: i.record(ino, content),
        job,
    })
}

fn capture_entries(
    st: &mut State,
    dir: u64,
    children: &[(Vec<u8>, u64)],
    job_of: &HashMap<u64, usize>,
    records: &mut Vec<(u64, u64)>,
) -> Result<Pending> {
    let mut out = Vec::with_capacity(children.len());
    for (name, child) in children {
        let c = st.get(*child)?;
        let e = if c.hardlink {
            PEntry::Link {
                ino: *child,
                kind: c.kind,
            }
        } else {
            PEntry::Inline(capture(st, *child, dir, job_of, records)?)
        };
        out.push((name.clone(), e));
    }
    Ok(out)
}

/// A live shard's membership digest, and whether every inline child in it is clean
/// (then the shard encodes to the leaf cached under that digest).
fn shard_state<'a>(
    st: &State,
    part: impl Iterator<Item = (&'a [u8], u64)>,
) -> Result<([u8; 32], bool)> {
    let mut digest = ShardDigest::default();
    let mut clean = true;
    for (name, c) in part {
        let i = st.get(c)?;
        digest.add(name, c, i.kind, i.hardlink);
        clean &= i.hardlink || i.is_clean();
    }
    Ok((digest.finish(), clean))
}

/// The shards of live directory `dir` that are known to equal a stored leaf: clean
/// (every inline child clean) and with a cached membership digest. Returns (leaf id,
/// the shard's names). Same partition and digest as the sharded encode.
pub(crate) fn clean_leaves(st: &State, dir: u64) -> Result<Vec<(NodeId, Vec<Vec<u8>>)>> {
    let Data::Dir(d) = &st.get(dir)?.data else {
        return Ok(Vec::new());
    };
    let Some(entries) = d.entries.as_ref() else {
        return Ok(Vec::new());
    };
    if d.shards.is_empty() || !crate::dirs::is_sharded_len(entries.len()) {
        return Ok(Vec::new());
    }
    let children: Vec<(&Vec<u8>, u64)> = entries.iter().map(|(k, v)| (k, *v)).collect();
    let mut out = Vec::new();
    for r in shard_ranges(children.iter().map(|(n, _)| n.as_slice())) {
        let part = &children[r];
        let (digest, clean) = shard_state(st, part.iter().map(|(n, c)| (n.as_slice(), *c)))?;
        if clean && let Some(id) = d.shards.get(&digest) {
            out.push((*id, part.iter().map(|(n, _)| (*n).clone()).collect()));
        }
    }
    Ok(out)
}

/// Plan the content node of dirty directory or file `ino` (its children are planned).
fn plan_content(
    st: &mut State,
    store: &dyn ObjectStore,
    ino: u64,
    p: &mut Plan,
    job_of: &mut HashMap<u64, usize>,
) -> Result<()> {
    let (base, body) = if matches!(st.get(ino)?.data, Data::Dir(_)) {
        plan_dir(st, store, ino, job_of, &mut p.records)?
    } else {
        let (base, body, mapped) = plan_file(st, store, ino)?;
        if mapped {
            p.mapped.push(ino);
        }
        (base, body)
    };
    job_of.insert(ino, p.jobs.len());
    p.jobs.push(Job { ino, base, body });
    Ok(())
}

fn plan_dir(
    st: &mut State,
    store: &dyn ObjectStore,
    ino: u64,
    job_of: &HashMap<u64, usize>,
    records: &mut Vec<(u64, u64)>,
) -> Result<(Option<NodeId>, Body)> {
    st.load_dir(store, ino)?;
    let Data::Dir(d) = &st.get(ino)?.data else {
        unreachable!("checked by the caller")
    };
    let base = d.base;
    let children: Vec<(Vec<u8>, u64)> = d
        .entries
        .as_ref()
        .expect("dir loaded")
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    if !crate::dirs::is_sharded_len(children.len()) {
        let pending = capture_entries(st, ino, &children, job_of, records)?;
        return Ok((base, Body::Dir(pending)));
    }
    let mut shards = Vec::new();
    for r in shard_ranges(children.iter().map(|(n, _)| n.as_slice())) {
        let part = &children[r];
        let (digest, clean) = shard_state(st, part.iter().map(|(n, c)| (n.as_slice(), *c)))?;
        let cached = match &st.get(ino)?.data {
            Data::Dir(d) => d.shards.get(&digest).copied(),
            _ => None,
        };
        shards.push(match cached {
            Some(id) if clean => ShardPlan::Reuse(digest, part.len() as u32, id),
            _ => ShardPlan::Write(digest, capture_entries(st, ino, part, job_of, records)?),
        });
    }
    Ok((base, Body::Sharded(shards)))
}

/// Plan a file's content node; the flag says the plan took its `dirty_leaves`.
fn plan_file(
    st: &mut State,
    store: &dyn ObjectStore,
    ino: u64,
) -> Result<(Option<NodeId>, Body, bool)> {
    st.load_file(store, ino)?;
    let size = st.get(ino)?.attr.size;
    let Data::File(f) = &mut st.get_mut(ino)?.data else {
        unreachable!("checked by the caller")
    };
    let blocks = f.blocks.as_ref().expect("file loaded");
    let below = |r: std::ops::Range<u64>| {
        blocks
            .range(r)
            .take_while(|(i, _)| *i * BLOCK_SIZE < size)
            .map(|(i, b)| (*i, b.clone()))
            .collect::<Vec<_>>()
    };
    let (body, mapped) = if size <= INLINE_MAX {
        (FileBody::Inline(blocks.get(&0).cloned()), false)
    } else if !is_mapped(size) {
        (FileBody::Flat(below(0..u64::MAX)), false)
    } else {
        let mut ks: BTreeSet<u64> = match f.dirty_leaves.take() {
            Some(d) => d,
            None => blocks.keys().map(|&i| leaf_of(i)).collect(),
        };
        ks.extend(f.leaves.keys().copied());
        let mut leaves = Vec::with_capacity(ks.len());
        for k in ks.into_iter().take_while(|k| k * MAP_MIN_SIZE < size) {
            leaves.push(match f.leaves.get(&k) {
                Some(id) => (k, LeafPlan::Reuse(*id)),
                None => (
                    k,
                    LeafPlan::Write(below(k * LEAF_BLOCKS..(k + 1) * LEAF_BLOCKS)),
                ),
            });
        }
        f.dirty_leaves = Some(BTreeSet::new());
        (FileBody::Map(leaves), true)
    };
    Ok((f.base, Body::File { size, body }, mapped))
}

// ---- 2. encode (no table lock) ----

/// Encode and put every planned node and the root node.
pub(super) fn encode(plan: &Plan, store: &dyn ObjectStore) -> Result<Encoded> {
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
    let root = NodeId(store.put(ObjKind::Node, &root.encode())?);
    Ok(Encoded { done, root })
}

fn put_node(store: &dyn ObjectStore, raw: &[u8], base: Option<NodeId>) -> Result<NodeId> {
    Ok(NodeId(store.put_based(
        ObjKind::Node,
        raw,
        base.as_ref().map(|b| &b.0),
    )?))
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
        .and_then(|b| store.get(ObjKind::Node, &b.0).ok())
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
                    let hint = hints.get(idx).map(|c| &c.0);
                    Some(ChunkId(store.put_based(ObjKind::Chunk, &bytes, hint)?))
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
                Some(Block::Stored(c)) => Some(store.get(ObjKind::Chunk, &c.0)?),
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
                .and_then(|b| store.get(ObjKind::Node, &b.0).ok())
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

// ---- 3. publish (table lock held) ----

/// Install what `enc` encoded, except for inodes touched since the plan (and the
/// planned directories above them). Ends the touched recording.
pub(super) fn publish(st: &mut State, plan: &Plan, enc: Encoded) {
    let touched = st.touched.take().unwrap_or_default();
    let container: HashMap<u64, u64> = plan.records.iter().copied().collect();
    let mut skip: HashSet<u64> = HashSet::new();
    for &t in &touched {
        let mut c = t;
        while skip.insert(c) {
            match container.get(&c) {
                Some(&p) if p != 0 => c = p,
                _ => break,
            }
        }
    }
    for (job, done) in plan.jobs.iter().zip(enc.done) {
        publish_job(st, job, done, skip.contains(&job.ino));
    }
    for &(ino, dir) in &plan.records {
        if !skip.contains(&ino)
            && !skip.contains(&dir)
            && let Some(i) = st.inodes.get_mut(&ino)
        {
            i.dirty = false;
        }
    }
    st.root_id = Some(enc.root);
    if !touched.is_empty() {
        log::debug!("flush: {} inodes changed while encoding", touched.len());
    }
}

fn publish_job(st: &mut State, job: &Job, done: Done, skipped: bool) {
    let Some(i) = st.inodes.get_mut(&job.ino) else {
        return;
    };
    match &mut i.data {
        Data::Dir(d) if !skipped => {
            d.stored = done.id;
            d.base = None;
            d.shards = done.shards;
        }
        Data::File(f) => {
            if let Some(blocks) = f.blocks.as_mut() {
                for (idx, arc, id) in done.sealed {
                    if let Some(Block::Mem(cur)) = blocks.get(&idx)
                        && Arc::ptr_eq(cur, &arc)
                    {
                        match id {
                            Some(c) => blocks.insert(idx, Block::Stored(c)),
                            None => blocks.remove(&idx),
                        };
                    }
                }
                if let (Some(leaves), Some(dirty)) = (done.leaves, f.dirty_leaves.as_ref()) {
                    // Leaves not touched since the plan hold what was encoded.
                    for (k, id) in leaves {
                        if !dirty.contains(&k) {
                            f.leaves.insert(k, id);
                        }
                    }
                } else if !skipped {
                    f.leaves.clear();
                    f.dirty_leaves = None;
                }
            }
            if skipped {
                // Still a better delta base than the older one.
                f.base = done.id.or(f.base);
            } else {
                f.stored = done.id;
                f.base = None;
                st.dirty_files.remove(&job.ino);
                st.maps.insert(job.ino);
            }
        }
        _ => {}
    }
}

/// After a failed encode: stop recording, and let every file the plan took leaves
/// from derive them again (the plan's leaves may not have been stored).
pub(super) fn abandon(st: &mut State, plan: &Plan) {
    st.touched = None;
    st.changed = true;
    for &ino in &plan.mapped {
        if let Some(i) = st.inodes.get_mut(&ino)
            && let Data::File(f) = &mut i.data
        {
            f.dirty_leaves = None;
        }
    }
}
