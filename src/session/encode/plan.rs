//! Step 1 of a flush's encode, under the table lock: capture what every dirty node
//! needs (see the parent module).

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{Body, FileBody, Job, LeafPlan, PEntry, Pending, Plan, Rec, ShardPlan, not_encoded};
use crate::error::Result;
use crate::id::NodeId;
use crate::session::inode::{Data, State};
use crate::store::ObjectStore;
use crate::tree::{
    BLOCK_SIZE, Content, INLINE_MAX, Kind, LEAF_BLOCKS, MAP_MIN_SIZE, ShardDigest, is_mapped,
    leaf_of, shard_ranges,
};

/// Plan the encoding of every dirty node. Clears `changed`/`links_dirty` and starts
/// recording touched inodes: a change from now on shows as `changed` again.
pub(crate) fn plan(st: &mut State, store: &dyn ObjectStore) -> Result<Plan> {
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
