//! Crash after every batch, driven by the verb table (in the manner of redb's
//! crash backend): every verb of the table runs here on the in-memory host over a
//! store that logs its metadata batches ([`MemStore::logging`]), or is named in
//! [`ELSEWHERE`] with the reason and the integration test that covers it. The
//! test fails when a verb is in neither (a new verb must say how it is covered).
//!
//! For each request it checks:
//! - a request that appends an operation record commits exactly ONE batch;
//! - the record appears only for verbs whose [`Verb::RECORDS`] says so (or for
//!   the end of something a recording verb began: `exec_end` after `exec_begin`),
//!   and a verb that says so appends one (by itself or by the end of what it
//!   began): the flag is checked, not trusted;
//! - after a crash after each batch k of the request (the durable prefix a crash
//!   leaves: [`MemStore::prefix`]), the record is present exactly when the rest of
//!   the metadata is the state after the request, and absent exactly when it is
//!   the state before; and the session opens again from what survived, showing
//!   the files it showed before (no record) or after (record).
//!
//! [`Verb::RECORDS`]: crate::control::Verb::RECORDS

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::serve;
use crate::meta;
use crate::ops::Host;
use crate::ops::memhost::{self, MemHost};
use crate::session::Session;
use crate::store::{MemStore, ObjectStore};
use crate::verbs::{NAMES, Request};

const SESSION: &str = "m";

/// Verbs not run here: why, and where they are covered on real mounts.
const ELSEWHERE: &[(&str, &str)] = &[
    ("ping", "daemon only; reads nothing of a session"),
    ("mount", "daemon only (mount table); tests/it/mount*.rs"),
    ("umount", "daemon only (mount table); tests/it/umount.rs"),
    ("shutdown", "daemon only"),
    ("gc", "daemon only (store-wide sweep); tests/it/gc*.rs"),
    ("fsck", "daemon only; tests/it/fsck.rs"),
    ("session_rm", "daemon only (mount table)"),
    ("session_show", "daemon only"),
    ("session_discard", "daemon only"),
    ("session_sweep", "daemon only"),
    ("store_trim", "daemon only (remote tier)"),
    (
        "experiment_begin",
        "makes fork directories on the host; tests/it/experiment*.rs, tests/it/txn.rs",
    ),
    (
        "experiment_end",
        "after experiment_begin; tests/it/experiment*.rs",
    ),
    (
        "experiment_show",
        "after experiment_begin; tests/it/experiment*.rs",
    ),
    (
        "experiment_adopt",
        "after experiment_end; tests/it/experiment*.rs",
    ),
    (
        "bisect_begin",
        "makes fork directories on the host; tests/it/bisect.rs",
    ),
    ("bisect_step", "after bisect_begin; tests/it/bisect.rs"),
    ("bisect_end", "after bisect_begin; tests/it/bisect.rs"),
    (
        "rebase",
        "needs a git baseline (a mount --from a git work tree); tests/it/rebase.rs",
    ),
    (
        "promote",
        "needs a git repository on the host; tests/it/promote*.rs",
    ),
    (
        "continue",
        "needs a project imported from the host; tests/it/continue.rs",
    ),
    (
        "history_show",
        "needs a finished exec's number; tests/it/exec.rs",
    ),
    ("exec_output", "needs a running exec; tests/it/exec.rs"),
    ("remote_add", "needs a remote (S3); tests/it/remote*.rs"),
    ("remote_list", "remote tier; tests/it/remote*.rs"),
    ("remote_rm", "remote tier; tests/it/remote*.rs"),
    ("remote_trust", "remote tier; tests/it/remote*.rs"),
    ("push", "needs a remote (S3); tests/it/push*.rs"),
    ("pull", "needs a remote (S3); tests/it/pull*.rs"),
    ("hydrate", "needs a remote (S3); tests/it/lazy*.rs"),
    ("remote_gc", "needs a remote (S3); tests/it/remote_gc.rs"),
];

/// The requests run for verb `name` on the common history ([`setup`]): each is
/// measured, the last is the verb's own. `None`: not run here ([`ELSEWHERE`]).
fn case(name: &str) -> Option<Vec<Value>> {
    let exec_begin = json!({"op": "exec_begin", "argv": ["true"], "cwd": "."});
    let tool_begin = json!({
        "op": "tool_begin", "runtime": "claude", "call": "c1", "tool": "Bash",
        "summary": "true", "cwd": ".",
    });
    let undo = json!({"op": "undo"});
    let append = json!({"op": "message_append", "role": "user", "content": "hello"});
    Some(match name {
        "sessions" => vec![json!({"op": "sessions"})],
        "limits" => vec![json!({"op": "limits"})],
        "checkpoint" => vec![json!({"op": "checkpoint", "message": "crash"})],
        "log" => vec![json!({"op": "log"})],
        "status" => vec![json!({"op": "status"})],
        "branch" => vec![json!({"op": "branch", "name": "new"})],
        "branches" => vec![json!({"op": "branches"})],
        "branch_delete" => vec![json!({"op": "branch_delete", "name": "side"})],
        "checkout" => vec![json!({"op": "checkout", "ref": "side"})],
        "branch_share" => vec![json!({"op": "branch_share", "name": "side", "with": "m"})],
        "branch_rename" => vec![json!({"op": "branch_rename", "old": "side", "new": "side2"})],
        "undo" => vec![undo],
        "redo" => vec![undo, json!({"op": "redo"})],
        "op_restore" => vec![json!({"op": "op_restore", "operation": 1})],
        "timeline" => vec![json!({"op": "timeline"})],
        "note" => vec![json!({"op": "note", "text": "a note"})],
        "op_log" => vec![json!({"op": "op_log"})],
        "fork" => vec![json!({"op": "fork", "name": "m2", "mountpoint": "/memhost/m2"})],
        "diff" => vec![json!({"op": "diff", "a": "HEAD", "b": "WORKING"})],
        "restore" => vec![json!({"op": "restore", "ref": "side"})],
        "merge" => vec![json!({"op": "merge", "ref": "side"})],
        "cherry_pick" => vec![json!({"op": "cherry_pick", "ref": "side"})],
        "revert" => vec![json!({"op": "revert", "ref": "HEAD"})],
        "session_extend" => vec![json!({"op": "session_extend", "name": "m", "ttl_idle": "4h"})],
        "show" => vec![json!({"op": "show", "ref": "HEAD"})],
        "config" => vec![json!({"op": "config", "set": {"auto_checkpoint_ops": 5}})],
        "exec_begin" => vec![exec_begin],
        "exec_end" => vec![
            exec_begin,
            json!({"op": "exec_end", "exec": 1, "exit_code": 0, "duration_ms": 3}),
        ],
        "tool_begin" => vec![tool_begin],
        "tool_end" => vec![tool_begin, json!({"op": "tool_end", "call": "c1"})],
        "tool_settle" => vec![
            tool_begin,
            json!({"op": "tool_settle", "runtime": "claude"}),
        ],
        "history" => vec![json!({"op": "history"})],
        "message_append" => vec![append],
        "message_flush" => vec![append, json!({"op": "message_flush"})],
        "messages" => vec![append, json!({"op": "messages"})],
        // (The appended message is buffered until a flush: its batch is the
        // append's, not the rewind's.)
        "rewind" => vec![
            append,
            json!({"op": "message_flush"}),
            json!({"op": "rewind", "prompt": 1}),
        ],
        "session_meta_update" => vec![json!({"op": "session_meta_update", "model": "m1"})],
        _ => return None,
    })
}

/// The verb that began what `name` ends, if it is an end.
fn begun_by(name: &str) -> Option<&'static str> {
    Some(match name {
        "exec_end" => "exec_begin",
        "tool_end" | "tool_settle" => "tool_begin",
        "experiment_end" => "experiment_begin",
        "bisect_end" => "bisect_begin",
        _ => return None,
    })
}

fn records(name: &str) -> bool {
    crate::verbs::records_of(name).expect("a verb of the table")
}

/// The common history: files, two branches that diverged, a checkpoint on
/// each, HEAD attached to `base`, and a pending change.
fn setup(host: &MemHost) {
    let t = host.create(SESSION).unwrap();
    let s = &t.session;
    let run = |v: Value| serve(host, SESSION, serde_json::from_value(v).unwrap()).unwrap();
    memhost::write_file(s, "f0", b"zero\n").unwrap();
    run(json!({"op": "checkpoint", "message": "one"}));
    run(json!({"op": "checkout", "create": "base"}));
    run(json!({"op": "branch", "name": "side"}));
    run(json!({"op": "checkout", "ref": "side"}));
    memhost::write_file(s, "f3", b"side\n").unwrap();
    run(json!({"op": "checkpoint", "message": "on side"}));
    run(json!({"op": "checkout", "ref": "base"}));
    memhost::write_file(s, "f1", b"base\n").unwrap();
    run(json!({"op": "checkpoint", "message": "on base"}));
    memhost::write_file(s, "f2", b"pending\n").unwrap();
}

/// The metadata but the operation log and its attachments.
fn state(store: &dyn ObjectStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let all = store.meta_scan(b"").unwrap();
    all.into_iter()
        .filter(|(k, _)| !k.starts_with(meta::OP_PREFIX) && !k.starts_with(meta::ATTACH_PREFIX))
        .collect()
}

fn newest(store: &dyn ObjectStore) -> u64 {
    crate::oplog::last(store, SESSION)
        .unwrap()
        .map_or(0, |o| o.seq)
}

/// The files session `SESSION` shows when opened from `store`'s record.
fn reopened(store: Arc<dyn ObjectStore>) -> BTreeMap<String, Vec<u8>> {
    let rec = crate::session::load_record(&*store, SESSION)
        .unwrap()
        .expect("the session's record survives");
    let s = Session::open(store, rec).unwrap();
    memhost::files(&s).unwrap()
}

/// Run `req` on `host` and check what the module docs say; returns whether it
/// appended a record.
fn measured(host: &MemHost, mem: &MemStore, name: &str, req: &Value) -> bool {
    let store = host.store();
    let op: Request = serde_json::from_value(req.clone()).unwrap();
    let verb = op.name();
    let live = host.target(Some(SESSION)).unwrap();
    let files_before = memhost::files(&live.session).unwrap();
    live.session.flush().unwrap();
    let (b0, seq0, before) = (mem.batches(), newest(&*store), state(&*store));
    let r = serve(host, SESSION, op.clone());
    assert!(r.is_ok(), "{name}: {req}: {r:?}");
    let (b1, seq1) = (mem.batches(), newest(&*store));
    let appended = seq1 > seq0;
    if !appended {
        return false;
    }
    assert_eq!(seq1, seq0 + 1, "{name}: {verb} appends one record");
    let records = op.records() || begun_by(verb).is_some_and(records);
    assert!(
        records,
        "{verb} appended a record but its RECORDS says it does not"
    );
    let batches: Vec<_> = (b0..b1).map(|k| mem.batch_keys(k)).collect();
    assert_eq!(
        b1 - b0,
        1,
        "{verb} committed {} batches, not one: {batches:?}",
        b1 - b0
    );
    let after = state(&*store);
    let files_after = memhost::files(&live.session).unwrap();
    for k in 0..=(b1 - b0) {
        let durable: Arc<dyn ObjectStore> = Arc::new(mem.prefix(b0 + k).unwrap());
        let present = newest(&*durable) == seq1;
        let now = state(&*durable);
        if !present && now != before {
            let diff: Vec<_> = now
                .iter()
                .filter(|(k, v)| before.get(*k) != Some(*v))
                .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                .chain(
                    before
                        .keys()
                        .filter(|k| !now.contains_key(*k))
                        .map(|k| format!("gone {}", String::from_utf8_lossy(k))),
                )
                .collect();
            panic!("{verb}, crash after batch {k}: not the state before: {diff:?}");
        }
        // (A record whose op changes nothing else, like a note, has before ==
        // after: then only its presence tells the two apart.)
        if present {
            assert!(
                now == after,
                "{verb}, crash after batch {k}: the record without the state after"
            );
        }
        let want = if present { &files_after } else { &files_before };
        assert_eq!(
            &reopened(durable),
            want,
            "{verb}: files after a crash at {k}"
        );
    }
    true
}

#[test]
fn every_verb_is_run_here_or_said_where() {
    for name in NAMES {
        let here = case(name).is_some();
        let there = ELSEWHERE.iter().any(|(n, _)| n == name);
        assert!(
            here != there,
            "verb {name}: run here {here}, named elsewhere {there}"
        );
    }
}

#[test]
fn every_recording_verb_commits_one_batch_and_survives_a_crash_after_it() {
    for name in NAMES {
        let Some(reqs) = case(name) else { continue };
        let mem = Arc::new(MemStore::logging());
        let host = MemHost::over(mem.clone());
        setup(&host);
        let mut any = false;
        for req in &reqs {
            any |= measured(&host, &mem, name, req);
        }
        if records(name) {
            assert!(
                any,
                "{name}: its RECORDS says it records, and nothing was recorded"
            );
        }
    }
}
