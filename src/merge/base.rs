//! The merge base of two checkpoints: the nearest checkpoint (breadth-first from
//! ours) that is also an ancestor of theirs, walking every parent. With several
//! equally near (criss-cross histories) the first found is taken, not a virtual
//! merge of them as git's recursive strategy would.

use std::collections::{HashSet, VecDeque};

use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::refs;
use crate::store::ObjectStore;

/// Most checkpoints one walk visits (a bound on what a history can cost).
pub const WALK_MAX: usize = 1_000_000;

/// Every ancestor of `from` (itself included); a missing record ends its line
/// (one that does not read or decode is the error: a wrong base merges wrongly).
fn ancestors(store: &dyn ObjectStore, from: CheckpointId) -> Result<HashSet<CheckpointId>> {
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([from]);
    while let Some(id) = queue.pop_front() {
        if !seen.insert(id) {
            continue;
        }
        if seen.len() > WALK_MAX {
            return Err(Error::Invalid(format!(
                "merge base: the history has more than {WALK_MAX} checkpoints"
            )));
        }
        if let Some(c) = refs::load_present(store, &id)? {
            queue.extend(c.parents);
        }
    }
    Ok(seen)
}

/// The merge base of `ours` and `theirs`, if they share any history: of the
/// common ancestors nearest to ours (the walk stops at each), one that is no
/// ancestor of another (so after a merge of theirs, theirs itself).
pub fn merge_base(
    store: &dyn ObjectStore,
    ours: CheckpointId,
    theirs: CheckpointId,
) -> Result<Option<CheckpointId>> {
    let theirs_side = ancestors(store, theirs)?;
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    let mut queue = VecDeque::from([ours]);
    while let Some(id) = queue.pop_front() {
        if !seen.insert(id) || seen.len() > WALK_MAX {
            continue;
        }
        if theirs_side.contains(&id) {
            found.push(id);
            continue;
        }
        if let Some(c) = refs::load_present(store, &id)? {
            queue.extend(c.parents);
        }
    }
    if found.len() > 1 {
        let mut keep = Vec::new();
        for &c in &found {
            let mut below_another = false;
            for &d in found.iter().filter(|&&d| d != c) {
                if ancestors(store, d)?.contains(&c) {
                    below_another = true;
                    break;
                }
            }
            if !below_another {
                keep.push(c);
            }
        }
        found = keep;
    }
    Ok(found.first().copied())
}
