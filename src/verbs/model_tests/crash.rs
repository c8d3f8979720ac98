//! Crash after every batch, driven by the verb table (in the manner of redb's
//! crash backend): every verb of the table runs here on the in-memory host over a
//! store that logs its metadata batches ([`MemStore::logging`]), or is named in
//! [`ELSEWHERE`] with the reason and the integration test that covers it. The
//! test fails when a verb is in neither (a new verb must say how it is covered).
//!
//! For each request it checks:
//! - a request that appends an operation record (in any session's log:
//!   `continue` starts the new session's) commits exactly ONE batch, but for
//!   the verbs named, with what else they commit, in [`SAVES_FIRST`] (a save
//!   of the pending changes first, its own record and batch; the forks an
//!   experiment's end or adopt removes go in its one batch);
//! - the record appears in the session's log only for verbs whose
//!   [`Verb::RECORDS`] says so (or for the end of something a recording verb
//!   began: `exec_end` after `exec_begin`), and a verb that says so appends one
//!   (in its own case or in its end's): the flag is checked, not trusted;
//! - after a crash after each batch k of the request (the durable prefix a crash
//!   leaves: [`MemStore::prefix`]), the record is present exactly when the rest of
//!   the metadata is the state after the request, and absent exactly when it is
//!   the state before; and the session opens again from what survived, showing
//!   the files it showed before (no record) or after (record).
//!
//! A case is a list of requests; a later one may name what an earlier one
//! answered ([`ID`], [`VERDICTS`]). Cases that need an origin (a project, a git
//! repository made here with the git CLI) get it from [`setup_for`].
//!
//! [`Verb::RECORDS`]: crate::control::Verb::RECORDS

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
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
    ("remote_add", "needs a remote (S3); tests/it/remote*.rs"),
    ("remote_list", "remote tier; tests/it/remote*.rs"),
    ("remote_rm", "remote tier; tests/it/remote*.rs"),
    ("remote_trust", "remote tier; tests/it/remote*.rs"),
    ("push", "needs a remote (S3); tests/it/push*.rs"),
    ("pull", "needs a remote (S3); tests/it/pull*.rs"),
    ("hydrate", "needs a remote (S3); tests/it/lazy*.rs"),
    ("remote_gc", "needs a remote (S3); tests/it/remote_gc.rs"),
];

/// Verbs whose request saves the pending changes first as a `checkpoint`
/// operation (its own batch and record), then does what cannot be in a batch,
/// then commits its own record in ONE batch. Checked: one record per batch; a
/// crash after the save leaves the save's record with its checkpoint.
const SAVES_FIRST: &[(&str, &str)] = &[(
    "promote",
    "the checkpoint `before promote` (`ref_or_fresh`), then the git commit in the durable \
     repository, then the `promote` record with the session's info",
)];

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
    // Two runs: the first exits 0 (the winner), the second 1.
    let experiment_begin = json!({
        "op": "experiment_begin",
        "runs": [{"command": ["true"]}, {"command": ["false"]}],
    });
    let experiment_end = json!({
        "op": "experiment_end", "id": ID,
        "results": [{"run": 1, "exit": 0, "duration_ms": 2}, {"run": 2, "exit": 1, "duration_ms": 3}],
    });
    // A search from the first checkpoint (`one`) to HEAD (`on base`, after the
    // checkpoint `crash` of the pending change: three candidates).
    let checkpoint = json!({"op": "checkpoint", "message": "crash"});
    let bisect_begin = json!({
        "op": "bisect_begin",
        "search": {"good": "HEAD~2", "jobs": 1, "command": ["true"]},
    });
    let bisect_step = json!({"op": "bisect_step", "id": ID, "results": VERDICTS});
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
        "history_show" => vec![
            exec_begin,
            json!({"op": "exec_end", "exec": 1, "exit_code": 0, "duration_ms": 3}),
            json!({"op": "history_show", "exec": 1}),
        ],
        "exec_output" => vec![
            exec_begin,
            json!({"op": "exec_output", "exec": 1, "stream": "stdout", "data": "aGkK"}),
        ],
        "experiment_begin" => vec![experiment_begin],
        "experiment_end" => vec![experiment_begin, experiment_end],
        "experiment_show" => vec![
            experiment_begin,
            experiment_end,
            json!({"op": "experiment_show", "id": ID}),
        ],
        "experiment_adopt" => vec![
            experiment_begin,
            experiment_end,
            json!({"op": "experiment_adopt", "id": ID, "winner": true}),
        ],
        // (`setup_for` gives the session an origin: a project, a git baseline.)
        "continue" => vec![json!({
            "op": "continue", "project": PROJECT, "name": "m3", "mountpoint": "/memhost/m3",
        })],
        "rebase" => vec![json!({"op": "rebase"})],
        "promote" => vec![json!({"op": "promote", "paths": ["f1", "f2"], "message": "promoted"})],
        "bisect_begin" => vec![checkpoint, bisect_begin],
        "bisect_step" => vec![checkpoint, bisect_begin, bisect_step],
        // (Steps until the search is over: the last request is the end.)
        "bisect_end" => vec![
            checkpoint,
            bisect_begin,
            bisect_step.clone(),
            bisect_step,
            json!({"op": "bisect_end", "id": ID}),
        ],
        _ => return None,
    })
}

/// In a request: the id the case's `experiment_begin` or `bisect_begin`
/// answered.
const ID: &str = "$id";
/// In a request: one result per candidate the previous answer asks to test
/// (`bisect_begin`'s `search.next`, `bisect_step`'s `next`): the good end (0)
/// passes, every other candidate fails.
const VERDICTS: &str = "$verdicts";

/// `req` with [`ID`] and [`VERDICTS`] filled in from the case's answers so far
/// (each with its verb's name).
fn filled(req: &Value, answers: &[(&str, Value)]) -> Value {
    match req {
        Value::String(s) if s == ID => answers
            .iter()
            .find(|(v, _)| matches!(*v, "experiment_begin" | "bisect_begin"))
            .map(|(_, a)| a["id"].clone())
            .unwrap_or_else(|| panic!("{req}: no begin before it: {answers:?}")),
        Value::String(s) if s == VERDICTS => {
            let (_, last) = answers.last().expect("an answer before the verdicts");
            let next = last.get("search").map_or(&last["next"], |s| &s["next"]);
            assert_eq!(next["kind"], "test", "{req}: nothing to test in {last}");
            let forks = next["forks"].as_array().expect("the forks to test");
            let verdict = |n: u64| json!({"exit": i32::from(n != 0), "duration_ms": 1});
            forks
                .iter()
                .map(|f| {
                    let n = f["n"].as_u64().expect("a candidate's number");
                    json!({"candidate": n, "outcome": verdict(n)})
                })
                .collect()
        }
        Value::Array(a) => a.iter().map(|v| filled(v, answers)).collect(),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), filled(v, answers)))
            .collect(),
        v => v.clone(),
    }
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

/// The project session `SESSION` is imported from, for `continue` (not on the
/// host: the in-memory host reads no directory of it).
const PROJECT: &str = "/memhost/project";

/// What the case of verb `name` needs besides the common history: an origin on
/// the session's info record (the project `continue` looks for; for `rebase`, a
/// git repository made here with the git CLI, whose first commit is the
/// baseline, the tree of the first checkpoint, and whose branch `main` moved on
/// by one commit adding a file). Returns the temporary directory to keep.
fn setup_for(host: &MemHost, name: &str) -> Option<tempfile::TempDir> {
    let (origin, dir) = match name {
        "continue" => (origin(host, Path::new(PROJECT), None), None),
        "rebase" | "promote" => {
            let dir = tempfile::tempdir().unwrap();
            let repo = dir.path();
            git(repo, &["init", "-q", "-b", "main"]);
            std::fs::write(repo.join("f0"), b"zero\n").unwrap();
            git(repo, &["add", "f0"]);
            git(repo, &["commit", "-q", "-m", "one"]);
            let baseline = git(repo, &["rev-parse", "HEAD"]);
            if name == "rebase" {
                std::fs::write(repo.join("g"), b"from git\n").unwrap();
                git(repo, &["add", "g"]);
                git(repo, &["commit", "-q", "-m", "two"]);
            }
            (origin(host, repo, Some(baseline)), Some(dir))
        }
        _ => return None,
    };
    let store = host.store();
    let mut info = crate::lifecycle::load(&*store, SESSION).unwrap().unwrap();
    info.origin = Some(origin);
    store.commit(vec![info.op()]).unwrap();
    dir
}

/// An origin at `path`: a git work tree on `main` when `baseline` is given, its
/// tree the first checkpoint's (`f0` only).
fn origin(host: &MemHost, path: &Path, baseline: Option<String>) -> crate::lifecycle::Origin {
    let store = host.store();
    let head = crate::session::load_record(&*store, SESSION)
        .unwrap()
        .unwrap()
        .head;
    let first = crate::refs::resolve(&*store, head, "HEAD~1").unwrap();
    crate::lifecycle::Origin {
        path: path.to_path_buf(),
        git: baseline.is_some(),
        branch: baseline.as_ref().map(|_| "main".to_string()),
        baseline,
        baseline_root: first.root.to_hex(),
        promoted: Vec::new(),
    }
}

/// Run git in `repo` (the test's; the daemon runs git only on a durable
/// repository, through `promote::gitio`); its output's first line.
fn git(repo: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// The metadata but the operation log and its attachments.
fn state(store: &dyn ObjectStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let all = store.meta_scan(b"").unwrap();
    all.into_iter()
        .filter(|(k, _)| !k.starts_with(meta::OP_PREFIX) && !k.starts_with(meta::ATTACH_PREFIX))
        .collect()
}

/// The keys of every session's operation records.
fn op_keys(store: &dyn ObjectStore) -> BTreeSet<Vec<u8>> {
    let all = store.meta_scan(meta::OP_PREFIX).unwrap();
    all.into_iter().map(|(k, _)| k).collect()
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
/// appended a record, and the answer.
fn measured(host: &MemHost, mem: &MemStore, name: &str, req: &Value) -> (bool, Value) {
    let store = host.store();
    let op: Request = serde_json::from_value(req.clone()).unwrap();
    let verb = op.name();
    let live = host.target(Some(SESSION)).unwrap();
    let files_before = memhost::files(&live.session).unwrap();
    live.session.flush().unwrap();
    let (b0, ops0, before) = (mem.batches(), op_keys(&*store), state(&*store));
    let r = serve(host, SESSION, op.clone());
    let answer = match r {
        Ok(a) => a,
        Err(e) => panic!("{name}: {req}: {e:?}"),
    };
    let (b1, ops1) = (mem.batches(), op_keys(&*store));
    let new: Vec<_> = ops1.difference(&ops0).collect();
    let Some(&record) = new.last() else {
        return (false, answer);
    };
    let saves_first = SAVES_FIRST.iter().any(|(n, _)| *n == verb);
    // The records but the request's own: the save's (`SAVES_FIRST`).
    let first = &new[..new.len() - 1];
    assert!(
        first.is_empty() || saves_first && first.len() == 1,
        "{name}: {verb} appends one record: {new:?}"
    );
    // (RECORDS speaks of the session's own log, whose quota it is: `continue`
    // starts the new session's log with a record, and says it records nothing.)
    let own = meta::op_parts(record).is_some_and(|(s, _)| s == SESSION);
    let records = op.records() || begun_by(verb).is_some_and(records);
    assert!(
        records || !own,
        "{verb} appended a record but its RECORDS says it does not"
    );
    let batches: Vec<_> = (b0..b1).map(|k| mem.batch_keys(k)).collect();
    let after = state(&*store);
    if saves_first {
        let puts = |b: &[String]| {
            let put = |r: &Vec<u8>| format!("put {}", String::from_utf8_lossy(r));
            b.iter()
                .filter(|op| new.iter().any(|r| **op == put(r)))
                .count()
        };
        assert!(
            batches.len() == new.len() && batches.iter().all(|b| puts(b) == 1),
            "{verb}: one batch per record: {batches:?}"
        );
    } else {
        assert_eq!(
            b1 - b0,
            1,
            "{verb} committed {} batches, not one: {batches:?}",
            b1 - b0
        );
    }
    let files_after = memhost::files(&live.session).unwrap();
    for k in 0..=(b1 - b0) {
        let durable: Arc<dyn ObjectStore> = Arc::new(mem.prefix(b0 + k).unwrap());
        let present = durable.meta_get(record).unwrap().is_some();
        let now = state(&*durable);
        // (After the save's batch alone: the save's record and its checkpoint,
        // a state of the log's, checked by `checkpoint`'s own case.)
        let saved_only = !present && k > 0;
        if saved_only {
            assert!(saves_first && durable.meta_get(first[0]).unwrap().is_some());
        }
        if !present && !saved_only && now != before {
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
        assert!(
            k < b1 - b0 || now == after,
            "{verb}: the last batch leaves the state after"
        );
        // (A checkpoint shows the files it saved: the files before.)
        let want = if present { &files_after } else { &files_before };
        assert_eq!(
            &reopened(durable),
            want,
            "{verb}: files after a crash at {k}"
        );
    }
    (true, answer)
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
    let mut recorded = BTreeSet::new();
    for &name in NAMES {
        let Some(reqs) = case(name) else { continue };
        let mem = Arc::new(MemStore::logging());
        let host = MemHost::over(mem.clone());
        setup(&host);
        let _dir = setup_for(&host, name);
        let mut answers = Vec::new();
        for req in &reqs {
            let req = filled(req, &answers);
            let (appended, answer) = measured(&host, &mem, name, &req);
            let verb = verb_of(&req);
            if appended && (verb == name || begun_by(verb) == Some(name)) {
                recorded.insert(name);
            }
            answers.push((verb, answer));
        }
    }
    // A verb that says it records does, in its own case or in the case of the
    // end of what it begins (`bisect_begin`'s record is `bisect_end`'s).
    for &name in NAMES {
        let ended = NAMES
            .iter()
            .any(|e| begun_by(e) == Some(name) && recorded.contains(e));
        if case(name).is_some() && records(name) {
            assert!(
                recorded.contains(name) || ended,
                "{name}: its RECORDS says it records, and nothing was recorded"
            );
        }
    }
}

/// The verb of a request, as the table names it.
fn verb_of(req: &Value) -> &'static str {
    let op: Request = serde_json::from_value(req.clone()).unwrap();
    op.name()
}
