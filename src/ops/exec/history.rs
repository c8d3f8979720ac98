//! Reading exec records: the history list, one record with its output, and the
//! state an exec left ([`exec_state`], for the `exec@N` ref syntax).
//!
//! Exec records are operations of kind `exec` in the session's operation log;
//! exec N is found by scanning from sequence number N (exec N's record can only
//! come at or after it: every exec appends exactly one operation). Every read is
//! a paged walk (`oplog::walk`) that stops as soon as it has its answer.

use serde_json::Value;

use super::KIND;
use super::answers::{ExecMeta, ExecSummary, HistoryAnswer, HistoryShown};
use crate::error::{Error, Result};
use crate::oplog::{self, Operation, tag, walk};
use crate::ops::Target;
use crate::store::ObjectStore;

/// Default number of history entries.
pub const DEFAULT_HISTORY_LIMIT: usize = 20;

fn exec_number(o: &Operation) -> Option<u64> {
    if o.kind != KIND {
        return None;
    }
    o.meta.get("exec")?.get("n")?.as_u64()
}

/// The record of exec `n` of `session` (a walk from operation `n`, one page of
/// records in memory, stopping at it).
pub fn find(store: &dyn ObjectStore, session: &str, n: u64) -> Result<Operation> {
    let mut found = None;
    walk::forward(store, session, n.max(1), usize::MAX, &mut |o| {
        if exec_number(&o) == Some(n) {
            found = Some(o);
            return Ok(false);
        }
        Ok(true)
    })?;
    found.ok_or_else(|| {
        Error::NotFound(format!(
            "session {session} has no exec {n} (see `treefork history`)"
        ))
    })
}

/// The checkpoint (hex) of the state after exec `n` of `session`: the exec's own
/// checkpoint when it changed anything, else the checkpoint it started from. The
/// state before it is the first parent of its own checkpoint; for an exec that
/// changed nothing both are the same state (read `meta.exec.before` to be exact).
pub fn exec_state(store: &dyn ObjectStore, session: &str, n: u64) -> Result<String> {
    let o = find(store, session, n)?;
    let meta = &o.meta["exec"];
    meta.get("after")
        .and_then(Value::as_str)
        .or_else(|| meta.get("before").and_then(Value::as_str))
        .map(str::to_string)
        .ok_or_else(|| Error::corrupt(format!("exec {n} of {session}"), "no checkpoint"))
}

/// A history line: the exec meta (without the changed-path list) with the
/// record's sequence number, time and explanation.
fn summary(o: &Operation) -> Result<ExecSummary> {
    let meta = o.meta.get("exec").cloned().unwrap_or(Value::Null);
    let mut exec: ExecMeta = serde_json::from_value(meta).map_err(|e| {
        Error::corrupt(
            format!("exec record {} of {}", o.seq, o.session),
            format!("meta.exec: {e}"),
        )
    })?;
    exec.changed = None;
    Ok(ExecSummary {
        exec,
        seq: o.seq,
        time_ns: o.time_ns.to_string(),
        time: (o.time_ns / 1_000_000_000) as i64,
        explanation: o.explanation.clone(),
        actor: o.actor.clone(),
        undone: false,
        reverted: false,
    })
}

/// What newer records say of older ones, gathered walking back (newest first):
/// the operations undone and not redone, and the execs reverted.
#[derive(Default)]
struct Later {
    redone: std::collections::HashSet<u64>,
    undone: std::collections::HashSet<u64>,
    reverted: std::collections::HashSet<u64>,
}

impl Later {
    fn see(&mut self, o: &Operation) {
        if let Some(u) = o.redoes {
            self.redone.insert(u);
        }
        if let Some(x) = o.undoes
            && !self.redone.contains(&o.seq)
        {
            self.undone.insert(x);
        }
        if let Some(n) = o.meta.get("reverts_exec").and_then(Value::as_u64)
            && !self.undone.contains(&o.seq)
        {
            self.reverted.insert(n);
        }
    }
}

/// At most `limit` exec records, newest first (a walk back that stops at `limit`
/// execs or after `walk::SCAN_LIMIT` records: then `scan_limited` says so).
pub(crate) fn list(t: &Target, limit: Option<usize>) -> Result<HistoryAnswer> {
    let s = &t.session;
    let (execs, walked) = newest(&**s.store(), s.name(), limit)?;
    Ok(HistoryAnswer {
        execs,
        scan_limited: (walked == walk::Walked::Exhausted).then_some(walk::SCAN_LIMIT as u64),
    })
}

/// The history lines of the newest `limit` execs and how the walk back ended.
pub(crate) fn newest(
    store: &dyn ObjectStore,
    session: &str,
    limit: Option<usize>,
) -> Result<(Vec<ExecSummary>, walk::Walked)> {
    let limit = limit.unwrap_or(DEFAULT_HISTORY_LIMIT).min(walk::MAX_SHOWN);
    let mut execs = Vec::new();
    let mut later = Later::default();
    let walked = walk::back(store, session, None, walk::SCAN_LIMIT, &mut |o| {
        if let Some(n) = exec_number(&o) {
            let mut line = summary(&o)?;
            line.undone = later.undone.contains(&o.seq);
            line.reverted = later.reverted.contains(&n);
            execs.push(line);
        }
        later.see(&o);
        Ok(execs.len() < limit)
    })?;
    Ok((execs, walked))
}

/// Exec `n`'s whole record and its captured output (base64).
pub(crate) fn show(t: &Target, n: u64) -> Result<HistoryShown> {
    let s = &t.session;
    let store = &**s.store();
    let o = find(store, s.name(), n)?;
    let out = oplog::attachment(store, s.name(), o.seq, tag::STDOUT)?.unwrap_or_default();
    let err = oplog::attachment(store, s.name(), o.seq, tag::STDERR)?.unwrap_or_default();
    Ok(HistoryShown {
        summary: summary(&o)?,
        record: o,
        stdout: crate::control::b64_encode(&out),
        stderr: crate::control::b64_encode(&err),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oplog::{Actor, NewOp, View};
    use crate::store::MemStore;
    use serde_json::json;

    fn view(head: &str) -> View {
        View {
            head: Some(crate::id::CheckpointId::of(head.as_bytes())),
            branch: None,
            workspace: crate::id::NodeId([0; 32]),
            branches: Default::default(),
        }
    }

    fn append(store: &MemStore, kind: &str, exec: Value) {
        let mut op = NewOp::new(&Actor::daemon(), kind, json!({}), view("b"), view("a"));
        if !exec.is_null() {
            op.meta.insert("exec".into(), exec);
        }
        let attach = |seq| vec![oplog::attachment_op("s", seq, tag::STDOUT, b"out".to_vec())];
        oplog::append_with(store, "s", op, &attach).unwrap();
    }

    #[test]
    fn exec_state_names_the_state_after_each_exec() {
        let store = MemStore::default();
        append(&store, "checkpoint", Value::Null);
        append(&store, KIND, json!({"n": 1, "before": "b1", "after": "a1"}));
        append(&store, "checkout", Value::Null);
        // An exec that changed nothing: its state is the one it started from.
        append(&store, KIND, json!({"n": 2, "before": "b2", "after": null}));
        assert_eq!(exec_state(&store, "s", 1).unwrap(), "a1");
        assert_eq!(exec_state(&store, "s", 2).unwrap(), "b2");
        assert_eq!(find(&store, "s", 2).unwrap().seq, 4);
        let out = oplog::attachment(&store, "s", 4, tag::STDOUT).unwrap();
        assert_eq!(
            out.as_deref(),
            Some(&b"out"[..]),
            "attachments share the record's seq"
        );
        for missing in [0, 3, u64::MAX] {
            assert!(matches!(
                exec_state(&store, "s", missing),
                Err(Error::NotFound(_))
            ));
        }
        assert!(matches!(
            exec_state(&store, "other", 1),
            Err(Error::NotFound(_))
        ));
    }
}
