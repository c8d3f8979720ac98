//! `op_log`: the session's operations, newest first.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::views::OpView;
use super::{DEFAULT_LOG_LIMIT, Target};
use crate::error::Result;
use crate::id::CheckpointId;
use crate::oplog::{self, Operation, stack::Stacks};

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
    let ops = oplog::list(&**s.store(), s.name(), limit)?;
    Ok(OpLogAnswer {
        operations: ops.iter().map(op_view).collect(),
    })
}

/// An operation as shown to clients (the record plus a time in seconds and a
/// one-line summary).
pub(crate) fn op_view(o: &Operation) -> OpView {
    OpView {
        record: o.clone(),
        time: (o.time_ns / 1_000_000_000) as i64,
        summary: summary(o),
    }
}

fn short(id: &Option<CheckpointId>) -> String {
    id.map_or_else(|| "-".into(), |h| h.short())
}

/// One line saying what the operation did.
pub(crate) fn summary(o: &Operation) -> String {
    let head = |v: &oplog::View| match &v.branch {
        Some(b) => format!("{b} ({})", short(&v.head)),
        None => format!("{} (detached)", short(&v.head)),
    };
    let mut s = match (o.undoes, o.redoes) {
        (Some(t), _) => format!("undo of operation {t}"),
        (_, Some(u)) => format!("redo (reverts operation {u})"),
        _ => o.kind.clone(),
    };
    if o.before.head != o.after.head || o.before.branch != o.after.branch {
        s.push_str(&format!(": HEAD {} -> {}", head(&o.before), head(&o.after)));
    }
    for (b, v) in &o.after.branches {
        let was = o.before.branches.get(b).cloned().flatten();
        if was != *v {
            s.push_str(&format!("; branch {b} {} -> {}", short(&was), short(v)));
        }
    }
    if o.before.workspace != o.after.workspace {
        s.push_str("; workspace changed");
    }
    s
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
