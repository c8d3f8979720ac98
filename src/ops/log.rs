//! `log`: the checkpoints a ref (default HEAD) descends from, through every
//! parent (a merge's merged side too), each once, newest first by time like
//! `git log`; with `first_parent`, only along first parents (the session's own
//! line). With a path, only those where that path differs from the first
//! parent's. At most `limit` are listed: the walk keeps a frontier of unvisited
//! parents (a heap by time), so it reads only as many records as it lists plus
//! that frontier.
//!
//! The path filter compares the records found by path in the two roots (kind,
//! content id, permissions, owner, size, xattrs: see [`diff::same`]), so a
//! directory compares by its subtree's node id — no tree walk per checkpoint.
//! Equal directory ids stand for equal subtrees only when the two roots'
//! hard-link tables agree; when they do not, that one pair falls back to a diff
//! walk stopped at the first difference under the path. Symbolic links inside the
//! tree are never followed (a path through one is absent).

use std::collections::{BinaryHeap, HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::restore::clean_path;
use super::views::CheckpointView;
use super::{DEFAULT_LOG_LIMIT, Target, refctx};
use crate::diff::{self, Tree};
use crate::error::Result;
use crate::id::{CheckpointId, NodeId};
use crate::refs::{self, Checkpoint};
use crate::store::ObjectStore;
use crate::tree::Record;

/// The answer to `log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LogAnswer {
    /// The checkpoints, newest first.
    pub checkpoints: Vec<CheckpointView>,
}

pub(crate) fn run(
    t: &Target,
    limit: Option<usize>,
    from: Option<&str>,
    path: Option<&str>,
    first_parent: bool,
) -> Result<LogAnswer> {
    let limit = limit.unwrap_or(DEFAULT_LOG_LIMIT);
    let store = t.session.store();
    let path = path.map(clean_path).transpose()?;
    let start = match from {
        Some(spec) => Some(refctx::resolve(t, spec)?),
        None => match t.session.record().head {
            Some(_) => Some(refctx::resolve(t, "HEAD")?),
            None => None,
        },
    };
    let mut out = Vec::new();
    let mut walk = Walk::default();
    if let Some(c) = start {
        walk.push(c);
    }
    // The path's record in a checkpoint's tree, carried from the child that
    // looked it up (as its first parent's).
    let mut carried: HashMap<CheckpointId, (Tree, Option<Record>)> = HashMap::new();
    while let Some(c) = walk.pop() {
        if out.len() >= limit {
            break;
        }
        let parent = match c.parent() {
            Some(p) => Some(refs::load(&**store, &p)?),
            None => None,
        };
        let keep = match &path {
            None => true,
            Some(p) => {
                let here = match carried.remove(&c.id) {
                    Some(x) => x,
                    None => lookup(&**store, c.root, p)?,
                };
                let there = match &parent {
                    Some(pc) => Some(lookup(&**store, pc.root, p)?),
                    None => None,
                };
                let changed =
                    path_changed(&**store, &c, parent.as_ref(), &here, there.as_ref(), p)?;
                if let (Some(pc), Some(there)) = (&parent, there) {
                    carried.insert(pc.id, there);
                }
                changed
            }
        };
        if keep {
            out.push(CheckpointView::from(&c));
        }
        let more = if first_parent {
            &[][..]
        } else {
            c.parents.get(1..).unwrap_or(&[])
        };
        for p in more {
            if !walk.seen(p) {
                walk.push(refs::load(&**store, p)?);
            }
        }
        if let Some(pc) = parent {
            walk.push(pc);
        }
    }
    Ok(LogAnswer { checkpoints: out })
}

/// The frontier of a log walk: checkpoints not listed yet, newest (by time, then
/// id) first; each checkpoint enters once.
#[derive(Default)]
struct Walk {
    heap: BinaryHeap<(i128, [u8; 32])>,
    waiting: HashMap<CheckpointId, Checkpoint>,
    seen: HashSet<CheckpointId>,
}

impl Walk {
    fn seen(&self, id: &CheckpointId) -> bool {
        self.seen.contains(id)
    }

    fn push(&mut self, c: Checkpoint) {
        if self.seen.insert(c.id) {
            self.heap.push((c.time_ns, c.id.0));
            self.waiting.insert(c.id, c);
        }
    }

    fn pop(&mut self) -> Option<Checkpoint> {
        let (_, id) = self.heap.pop()?;
        self.waiting.remove(&CheckpointId(id))
    }
}

/// The tree of `root` and the record at `path` in it.
fn lookup(store: &dyn ObjectStore, root: NodeId, path: &[u8]) -> Result<(Tree, Option<Record>)> {
    let tree = Tree::load(store, root)?;
    let r = tree.lookup(store, path)?;
    Ok((tree, r))
}

/// Whether `path` differs between checkpoint `c` (its tree and record `here`) and
/// its first parent (`there`; a checkpoint without a parent changed every path it
/// has).
fn path_changed(
    store: &dyn ObjectStore,
    c: &Checkpoint,
    parent: Option<&Checkpoint>,
    here: &(Tree, Option<Record>),
    there: Option<&(Tree, Option<Record>)>,
    path: &[u8],
) -> Result<bool> {
    let (Some(parent), Some(there)) = (parent, there) else {
        return Ok(here.1.is_some());
    };
    match (&here.1, &there.1) {
        (None, None) => Ok(false),
        (Some(a), Some(b)) if diff::same(a, b) => {
            if a.kind != crate::tree::Kind::Dir || here.0.links_agree(&there.0) {
                return Ok(false);
            }
            // Equal directory ids, different hard-link records: look under it.
            let mut under = false;
            diff::diff_walk(store, parent.root, c.root, &mut |e| {
                under = path.is_empty()
                    || e.path.starts_with(path)
                        && (e.path.len() == path.len() || e.path.get(path.len()) == Some(&b'/'));
                !under
            })?;
            Ok(under)
        }
        _ => Ok(true),
    }
}
