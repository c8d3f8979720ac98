//! `exec_end` (and finalizing an abandoned exec): the after state, the changed
//! paths, the writers outside the command, and the one operation record.

use serde_json::{Map, json};

use super::answers::{Ended, ExecMeta, WriterView};
use super::slot::{self, Running};
use crate::diff;
use crate::error::Result;
use crate::id::NodeId;
use crate::oplog::{self, NewOp, tag};
use crate::ops::record::{self, view_of};
use crate::ops::txn::{self, Log};
use crate::ops::views::PathChange;
use crate::ops::{Target, syncfs};
use crate::session::relock;
use crate::session::watch::Seen;

/// Most changed paths listed in a record (the count is always exact).
pub const MAX_CHANGED: usize = 1000;
/// Most bytes of changed paths listed in a record.
const MAX_CHANGED_BYTES: usize = 256 << 10;

/// How the command ended, as the client reports it.
#[derive(Default)]
pub(crate) struct Ending {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub error: Option<String>,
    pub pid: Option<u32>,
    /// `None`: measured by the daemon (abandoned execs).
    pub duration_ms: Option<u64>,
    pub truncated: [bool; 2],
    pub timed_out: bool,
    pub abandoned: bool,
}

impl Ending {
    /// An exec whose client never reported its end.
    pub fn abandoned(why: String) -> Ending {
        Ending {
            error: Some(why),
            abandoned: true,
            ..Ending::default()
        }
    }
}

/// Finish running exec `n` as `e` reports.
pub(crate) fn end(t: &Target, n: u64, e: Ending) -> Result<Ended> {
    let r = slot::with(&t.session, |sl| {
        if sl.running.as_ref().is_some_and(|r| r.n == n) {
            sl.running.take()
        } else {
            None
        }
    });
    let r = r.ok_or_else(|| super::slot::not_running(n))?;
    finish(t, r, e)
}

/// Stop the watch and, in ONE batch (`crate::ops::txn`): checkpoint what changed
/// (trigger `exec`), the exec record with its captured output, and the command
/// in the session's metrics.
pub(super) fn finish(t: &Target, r: Running, e: Ending) -> Result<Ended> {
    let s = &t.session;
    if let Err(err) = syncfs(&t.mount) {
        // Unmounting: what reached the daemon is all there is.
        ::log::warn!("session {}: exec {}: syncfs: {err}", s.name(), r.n);
    }
    let gate = relock(s.gate.write());
    // Writes wait at the gate: the watch has seen every writer of what is saved.
    let seen = s.watch.stop();
    let res = commit_end(t, &r, &e, &seen);
    drop(gate);
    let (seq, meta, ckpt) = res?;
    slot::with(s, |sl| sl.since_auto += 1);
    Ok(Ended {
        exec: meta,
        seq,
        checkpoint: ckpt,
    })
}

/// The batch of [`finish`], under the write gate: (record number, exec meta,
/// checkpoint taken).
fn commit_end(
    t: &Target,
    r: &Running,
    e: &Ending,
    seen: &Seen,
) -> Result<(u64, ExecMeta, Option<String>)> {
    let s = &t.session;
    let store = s.store().clone();
    let mut tx = s.txn();
    let root = tx.flush()?;
    let ckpt = if diff::differ(&*store, r.before_root, root)? {
        let mut meta = Map::new();
        meta.insert("exec".into(), json!(r.n));
        let what = match &r.group {
            Some(g) => g.title(),
            None => crate::command::shell::quoted_short(&r.argv, 200),
        };
        let msg = format!("exec {}: {what}", r.n);
        Some(tx.checkpoint_with(&msg, "exec", &[], meta)?)
    } else {
        None
    };
    let changed = changed_paths(&*store, r.before_root, root)?;
    let hex = ckpt.as_ref().map(|c| c.id.to_hex());
    let meta = exec_meta(r, e, hex.as_deref(), changed, seen);
    let request = match &meta.tools {
        Some(calls) => json!({"op": "tool", "calls": calls, "cwd": r.cwd}),
        None => json!({"op": "exec", "argv": r.argv, "cwd": r.cwd}),
    };
    let meta_value = serde_json::to_value(&meta).map_err(|e| {
        crate::error::Error::Invalid(format!("exec record does not serialize: {e}"))
    })?;
    let duration = meta.duration_ms;
    let session = s.name().to_string();
    let out = &r.out;
    let txn = txn::Transaction::begin(t, super::KIND)
        .counting(move |m| {
            m.commands += 1;
            m.command_ms += duration;
        })
        .attaching(move |seq| {
            [(tag::STDOUT, &out[0]), (tag::STDERR, &out[1])]
                .into_iter()
                .filter(|(_, b)| !b.is_empty())
                .map(|(tg, b)| oplog::attachment_op(&session, seq, tg, b.clone()))
                .collect()
        });
    let moved: Vec<String> = tx.branch_moves().keys().cloned().collect();
    let rec = txn
        .commit(&mut tx, Log::Next, &mut |_, a| {
            let mut after = view_of(a, root);
            if let Some(br) = a.branch.clone().filter(|b| !moved.contains(b)) {
                record::touch(&mut after, &*store, &br)?;
            }
            let mut op = NewOp::new(
                &r.actor,
                super::KIND,
                request.clone(),
                r.before.clone(),
                after,
            );
            op.explanation = r.explanation.clone();
            op.meta.insert("exec".into(), meta_value.clone());
            Ok((op, Vec::new()))
        })
        .inspect_err(|err| ::log::error!("session {}: recording exec {}: {err}", s.name(), r.n))?;
    Ok((rec.seq, meta, hex))
}

/// The changed paths (listed up to the caps) and their exact count.
struct Changed {
    list: Vec<PathChange>,
    count: u64,
}

fn changed_paths(store: &dyn crate::store::ObjectStore, a: NodeId, b: NodeId) -> Result<Changed> {
    let mut c = Changed {
        list: Vec::new(),
        count: 0,
    };
    let mut bytes = 0;
    diff::diff_walk(store, a, b, &mut |e| {
        c.count += 1;
        if c.list.len() < MAX_CHANGED && bytes < MAX_CHANGED_BYTES {
            bytes += e.path.len();
            c.list.push(PathChange::from(&e));
        }
        true
    })?;
    Ok(c)
}

fn exec_meta(r: &Running, e: &Ending, after: Option<&str>, c: Changed, seen: &Seen) -> ExecMeta {
    let duration_ms = e
        .duration_ms
        .unwrap_or_else(|| r.started.elapsed().as_millis() as u64);
    let others = !seen.others.is_empty() || seen.overflow > 0;
    ExecMeta {
        n: r.n,
        argv: r.argv.clone(),
        cwd: r.cwd.clone(),
        exit: e.exit_code,
        signal: e.signal,
        error: e.error.clone(),
        pid: e.pid,
        duration_ms,
        timed_out: e.timed_out,
        abandoned: e.abandoned,
        before: r.before_ckpt.clone(),
        after: after.map(str::to_string),
        changed_truncated: (c.list.len() as u64) < c.count,
        changed: Some(c.list),
        changed_count: c.count,
        others: seen
            .others
            .iter()
            .map(|w| WriterView {
                pid: w.pid,
                comm: w.comm.clone(),
            })
            .collect(),
        others_overflow: seen.overflow,
        may_include_others: others,
        stdout_bytes: r.out[0].len() as u64,
        stderr_bytes: r.out[1].len() as u64,
        stdout_truncated: e.truncated[0] || r.cut[0],
        stderr_truncated: e.truncated[1] || r.cut[1],
        tools: r.group.as_ref().map(|g| {
            let why = if e.abandoned {
                e.error.as_deref().unwrap_or(super::calls::NO_END)
            } else {
                super::calls::NO_END
            };
            g.calls_closed(why)
        }),
    }
}
