//! `op_log`: the session's operations, newest first.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::oplog_words as words;
use super::views::OpView;
use super::{DEFAULT_LOG_LIMIT, Target};
use crate::command::shell::cut;
use crate::error::Result;
use crate::id::CheckpointId;
use crate::oplog::{self, Operation, stack::Stacks};
use crate::store::ObjectStore;

/// The answer to `op_log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpLogAnswer {
    /// The operations, newest first.
    pub operations: Vec<OpView>,
}

pub(crate) fn run(t: &Target, limit: Option<usize>) -> Result<OpLogAnswer> {
    let s = &t.session;
    let limit = limit
        .unwrap_or(DEFAULT_LOG_LIMIT)
        .min(oplog::walk::MAX_SHOWN);
    let store = s.store();
    let ops = oplog::list(&**store, s.name(), limit)?;
    Ok(OpLogAnswer {
        operations: ops.iter().map(|o| op_view_in(&**store, o)).collect(),
    })
}

/// An operation as shown to clients (the record plus a time in seconds and a
/// one-line summary), its workspace roots compared by id only (what
/// [`op_view_in`] answers for records whose roots are equal).
#[cfg(test)]
pub(crate) fn op_view(o: &Operation) -> OpView {
    OpView {
        record: shown(o),
        time: (o.time_ns / 1_000_000_000) as i64,
        summary: summary(o),
    }
}

/// [`op_view`], the files compared: a workspace whose root moved while no file
/// did (a checkout of a checkpoint with the same files, metadata such as access
/// times aside) is not called changed. A tree that cannot be read counts as
/// changed.
pub(crate) fn op_view_in(store: &dyn ObjectStore, o: &Operation) -> OpView {
    let (a, b) = (o.before.workspace, o.after.workspace);
    let moved = a != b && crate::diff::differ(store, a, b).unwrap_or(true);
    OpView {
        record: shown(o),
        time: (o.time_ns / 1_000_000_000) as i64,
        summary: summary_of(o, moved),
    }
}

/// The record as its session writes its branch names: the stored names of its
/// views (`SESSION:BRANCH`, `refs::names`) never leave the daemon.
fn shown(o: &Operation) -> Operation {
    let mut r = o.clone();
    let name = |n: &str| crate::refs::names::display(n, Some(&o.session));
    for v in [&mut r.before, &mut r.after] {
        v.branch = v.branch.as_deref().map(name);
        v.branches = std::mem::take(&mut v.branches)
            .into_iter()
            .map(|(b, c)| (name(&b), c))
            .collect();
    }
    r
}

fn short(id: &Option<CheckpointId>) -> String {
    id.map_or_else(|| "-".into(), |h| h.short())
}

/// One line saying what the operation did (its workspace changed when the root
/// moved: [`op_view_in`] compares the files).
pub(crate) fn summary(o: &Operation) -> String {
    summary_of(o, o.before.workspace != o.after.workspace)
}

/// Longest summary (then cut, `...`).
pub const SUMMARY_SHOWN: usize = 400;

/// [`summary`], given whether the workspace changed: what the operation came to
/// (`oplog_words`), then how it moved HEAD and branches.
fn summary_of(o: &Operation, workspace_changed: bool) -> String {
    if o.undoes.is_some() || o.redoes.is_some() {
        return cut(&words::reverted(o, workspace_changed), SUMMARY_SHOWN);
    }
    let shown = |n: &str| crate::refs::names::display(n, Some(&o.session));
    let head = |v: &oplog::View| match &v.branch {
        Some(b) => format!("{} ({})", shown(b), short(&v.head)),
        None => format!("{} (detached)", short(&v.head)),
    };
    let mut s = words::outcome(o).unwrap_or_else(|| words::what(o));
    if o.before.head != o.after.head || o.before.branch != o.after.branch {
        s.push_str(&format!(": HEAD {} -> {}", head(&o.before), head(&o.after)));
    }
    for (b, v) in &o.after.branches {
        let was = o.before.branches.get(b).cloned().flatten();
        if was != *v {
            s.push_str(&format!(
                "; branch {} {} -> {}",
                shown(b),
                short(&was),
                short(v)
            ));
        }
    }
    if workspace_changed {
        s.push_str("; workspace changed");
    }
    cut(&s, SUMMARY_SHOWN)
}

/// The undo/redo stacks of the session's retained log: the session's cached
/// stacks with the records appended since replayed onto them
/// ([`oplog::walk::stacks`]), so an undo costs what happened since the last one,
/// not the length of the log.
pub(crate) fn stacks(t: &Target) -> Result<(Stacks, Option<Operation>)> {
    let s = &t.session;
    let mut cache = crate::session::relock(s.undo_stacks.lock());
    oplog::walk::stacks(&**s.store(), s.name(), &mut cache)
}
