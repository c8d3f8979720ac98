//! Encoding the live table into tree nodes, with the slow part outside the table lock.
//!
//! A flush (`Session::flush_locked`) encodes in three steps, [`plan`], [`encode`]
//! and [`publish`]:
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
//! Layout: types and publish here, the plan in `plan.rs`, the encode step in
//! `nodes.rs`.
//!
//! Invariant kept: an inode's content id is set only from a plan taken while it was
//! unchanged since, and a record is marked clean only if its containing directory is
//! published in the same step (a shard reused by id must hold the current record).

mod nodes;
mod plan;

pub(crate) use nodes::encode;
pub(crate) use plan::{clean_leaves, plan};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::inode::{Block, Data, State};
use crate::error::Error;
use crate::id::{ChunkId, NodeId};
use crate::tree::{Kind, Record};

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
pub(crate) struct Plan {
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
pub(crate) struct Encoded {
    done: Vec<Done>,
    root: NodeId,
}

fn not_encoded(ino: u64) -> Error {
    Error::corrupt(
        format!("live inode {ino}"),
        "content not encoded before its record",
    )
}

// ---- 3. publish (table lock held) ----

/// Install what `enc` encoded, except for inodes touched since the plan (and the
/// planned directories above them). Ends the touched recording.
pub(crate) fn publish(st: &mut State, plan: &Plan, enc: Encoded) {
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
            d.like = None;
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
pub(crate) fn abandon(st: &mut State, plan: &Plan) {
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
