//! The typed answers against the JSON the verbs answered when they were untyped
//! `json!` values: each test builds an answer, and checks its `serde_json` form
//! field by field (names, nulls vs absent fields, strings vs numbers) — where the
//! old value was built from a record, against that old expression itself — and
//! that it reads back (also with a field a newer daemon might add).

use std::collections::BTreeSet;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::*;
use crate::control::Verb;
use crate::diff::Change;
use crate::ops::exec::answers::{
    Begun, Ended, ExecMeta, ExecSummary, HistoryAnswer, HistoryShown, OutputTaken, WriterView,
};
use crate::ops::views::{BranchMoved, CheckpointView, MessageView, OpView, PathChange, Saved};

/// `v`'s JSON, after checking it reads back equal, also with an unknown field.
fn wire<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) -> Value {
    let j = serde_json::to_value(v).unwrap();
    let back: T = serde_json::from_value(j.clone()).unwrap();
    assert_eq!(&back, v, "round trip of {j}");
    if let Value::Object(mut o) = j.clone() {
        o.insert("added_by_a_newer_daemon".into(), json!(1));
        let back: T = serde_json::from_value(Value::Object(o)).unwrap();
        assert_eq!(&back, v, "an unknown field is tolerated");
    }
    j
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

fn set<'a>(k: &[&'a str]) -> BTreeSet<&'a str> {
    k.iter().copied().collect()
}

fn checkpoint(parents: &[&str]) -> crate::refs::Checkpoint {
    let mut meta = Map::new();
    meta.insert("k".into(), json!("v"));
    crate::refs::Checkpoint {
        version: crate::refs::CHECKPOINT_VERSION,
        id: "ab".repeat(32),
        session: "s".into(),
        root: "cd".repeat(32),
        parents: parents.iter().map(|p| p.to_string()).collect(),
        time_ns: 1_700_000_000_123_456_789,
        message: "m".into(),
        trigger: "manual".into(),
        files_changed: 3,
        meta,
        usage: None,
    }
}

/// `ops::ckpt_json` as it was before the answers were typed.
fn old_ckpt_json(c: &crate::refs::Checkpoint) -> Value {
    json!({
        "id": c.id, "short": &c.id[..12], "session": c.session, "root": c.root,
        "parent": c.parent(), "parents": c.parents, "meta": c.meta, "time_ns": c.time_ns.to_string(),
        "time": (c.time_ns / 1_000_000_000) as i64,
        "message": c.message, "trigger": c.trigger, "files_changed": c.files_changed,
    })
}

fn change(path: &str, change: Change) -> PathChange {
    PathChange {
        path: path.into(),
        change,
    }
}

#[test]
fn checkpoint_view_is_the_old_json() {
    for parents in [&[][..], &["ef"; 1][..], &["ef", "01"][..]] {
        let c = checkpoint(parents);
        let v = wire(&CheckpointView::from(&c));
        assert_eq!(v, old_ckpt_json(&c));
        assert!(v["time_ns"].is_string() && v["time"].is_i64());
    }
    assert!(old_ckpt_json(&checkpoint(&[]))["parent"].is_null());
}

#[test]
fn saved_is_null_or_checkpoint_and_ref() {
    let c = checkpoint(&[]);
    let none: Option<Saved> = Saved::of(&None);
    assert_eq!(serde_json::to_value(none).unwrap(), Value::Null);
    let some = Saved::of(&Some((c.clone(), "auto/x-1".into()))).unwrap();
    assert_eq!(wire(&some), json!({"checkpoint": c.id, "ref": "auto/x-1"}));
}

#[test]
fn checkpoint_answer() {
    let c = checkpoint(&["ef"]);
    let a = crate::ops::checkpoint::CheckpointAnswer {
        checkpoint: CheckpointView::from(&c),
        branch: None,
    };
    let v = wire(&a);
    assert_eq!(keys(&v), set(&["checkpoint", "branch"]));
    assert!(v["branch"].is_null(), "null, not absent, when detached");
    assert_eq!(v["checkpoint"], old_ckpt_json(&c));
}

#[test]
fn log_answer() {
    let c = checkpoint(&[]);
    let a = crate::ops::log::LogAnswer {
        checkpoints: vec![CheckpointView::from(&c)],
    };
    assert_eq!(wire(&a), json!({"checkpoints": [old_ckpt_json(&c)]}));
}

#[test]
fn status_answer_and_branch_moved() {
    let mut a = crate::ops::status::StatusAnswer {
        head: None,
        branch: Some("main".into()),
        changes: vec![change("a/b", Change::Added), change("c", Change::Deleted)],
        branch_moved: None,
    };
    let v = wire(&a);
    assert_eq!(
        v,
        json!({"head": null, "branch": "main", "changes": [
            {"path": "a/b", "change": "added"}, {"path": "c", "change": "deleted"}]})
    );
    let moved = BranchMoved {
        branch: "main".into(),
        to: None,
        head: Some("ab".into()),
        detached: false,
        message: "m".into(),
    };
    assert_eq!(
        wire(&moved),
        json!({"branch": "main", "to": null, "head": "ab", "detached": false, "message": "m"})
    );
    // The daemon adds it to the answer; the CLI reads it from there.
    a.branch_moved = Some(moved);
    assert_eq!(
        keys(&wire(&a)),
        set(&["head", "branch", "changes", "branch_moved"])
    );
}

fn operation() -> crate::oplog::Operation {
    let view = |h: &str| crate::oplog::View {
        head: Some(h.into()),
        workspace: "00".repeat(32),
        ..Default::default()
    };
    crate::oplog::Operation {
        version: crate::oplog::OP_VERSION,
        session: "s".into(),
        seq: 7,
        parent: Some(6),
        time_ns: 2_000_000_000_500,
        actor: crate::oplog::Actor::daemon(),
        kind: "checkout".into(),
        request: json!({"op": "checkout", "target": "main"}),
        explanation: None,
        before: view("aa"),
        after: view("bb"),
        undoes: None,
        redoes: None,
        inert: false,
        meta: Map::new(),
    }
}

#[test]
fn op_log_answer_is_the_record_with_time_and_summary() {
    let o = operation();
    // `op_json` as it was before.
    let mut old = serde_json::to_value(&o).unwrap();
    old["time"] = json!((o.time_ns / 1_000_000_000) as i64);
    old["summary"] = json!(crate::ops::oplog_list::summary(&o));
    let a = crate::ops::oplog_list::OpLogAnswer {
        operations: vec![crate::ops::oplog_list::op_view(&o)],
    };
    let v = wire(&a);
    assert_eq!(v, json!({ "operations": [old] }));
    assert_eq!(v["operations"][0]["time"], 2000);
    let back: OpView = serde_json::from_value(v["operations"][0].clone()).unwrap();
    assert_eq!(back.record, o);
}

#[test]
fn diff_answer() {
    use crate::ops::diff::{DiffAnswer, DiffEntryView};
    let entry = |added, removed, binary| DiffEntryView {
        change: change("f", Change::Modified),
        added,
        removed,
        binary,
    };
    let a = DiffAnswer {
        a: "aa".into(),
        b: "bb".into(),
        entries: vec![
            entry(None, None, None),
            entry(Some(2), Some(1), None),
            entry(None, None, Some(true)),
        ],
        patch: None,
    };
    assert_eq!(
        wire(&a),
        json!({"a": "aa", "b": "bb", "patch": null, "entries": [
            {"path": "f", "change": "modified"},
            {"path": "f", "change": "modified", "added": 2, "removed": 1},
            {"path": "f", "change": "modified", "binary": true},
        ]})
    );
}

#[test]
fn show_answers() {
    use crate::ops::show::{DirEntryView, ShowAnswer, ShownCheckpoint, ShownPath};
    let c = checkpoint(&[]);
    let a = ShowAnswer::Checkpoint(ShownCheckpoint {
        checkpoint: CheckpointView::from(&c),
        changes: None,
    });
    assert_eq!(
        wire(&a),
        json!({"checkpoint": old_ckpt_json(&c), "changes": null})
    );
    let file = ShowAnswer::Path(ShownPath {
        checkpoint: c.id.clone(),
        path: "f".into(),
        kind: "file".into(),
        mode: 0o644,
        entries: None,
        size: Some(3),
        blake3: Some("h".into()),
    });
    assert_eq!(
        wire(&file),
        json!({"checkpoint": c.id, "path": "f", "kind": "file", "mode": 0o644, "size": 3, "blake3": "h"})
    );
    let dir = ShowAnswer::Path(ShownPath {
        checkpoint: c.id.clone(),
        path: "d".into(),
        kind: "dir".into(),
        mode: 0o755,
        entries: Some(vec![DirEntryView {
            name: "x".into(),
            kind: None,
            size: None,
        }]),
        size: None,
        blake3: None,
    });
    assert_eq!(
        wire(&dir),
        json!({"checkpoint": c.id, "path": "d", "kind": "dir", "mode": 0o755,
               "entries": [{"name": "x", "kind": null, "size": null}]})
    );
}

fn exec_meta() -> ExecMeta {
    ExecMeta {
        n: 1,
        argv: vec!["make".into()],
        cwd: String::new(),
        exit: Some(0),
        signal: None,
        error: None,
        pid: Some(42),
        duration_ms: 5,
        timed_out: false,
        abandoned: false,
        before: "aa".into(),
        after: None,
        changed: Some(vec![change("out", Change::Added)]),
        changed_count: 1,
        changed_truncated: false,
        others: vec![WriterView {
            pid: 9,
            comm: "vim".into(),
        }],
        others_overflow: 0,
        may_include_others: true,
        stdout_bytes: 3,
        stderr_bytes: 0,
        stdout_truncated: false,
        stderr_truncated: false,
    }
}

const EXEC_FIELDS: &[&str] = &[
    "n",
    "argv",
    "cwd",
    "exit",
    "signal",
    "error",
    "pid",
    "duration_ms",
    "timed_out",
    "abandoned",
    "before",
    "after",
    "changed",
    "changed_count",
    "changed_truncated",
    "others",
    "others_overflow",
    "may_include_others",
    "stdout_bytes",
    "stderr_bytes",
    "stdout_truncated",
    "stderr_truncated",
];

#[test]
fn exec_answers() {
    assert_eq!(
        wire(&Begun {
            exec: 3,
            before: "aa".into()
        }),
        json!({"exec": 3, "before": "aa"})
    );
    assert_eq!(
        wire(&OutputTaken { exec: 3, bytes: 10 }),
        json!({"exec": 3, "bytes": 10})
    );
    let m = exec_meta();
    let v = wire(&m);
    assert_eq!(keys(&v), set(EXEC_FIELDS));
    assert!(v["signal"].is_null() && v["after"].is_null() && v["error"].is_null());
    assert_eq!(v["changed"], json!([{"path": "out", "change": "added"}]));
    assert_eq!(v["others"], json!([{"pid": 9, "comm": "vim"}]));
    let end = Ended {
        exec: m.clone(),
        seq: 4,
        checkpoint: None,
    };
    let v = wire(&end);
    assert_eq!(keys(&v), set(&["exec", "seq", "checkpoint"]));
    assert!(v["checkpoint"].is_null());
}

#[test]
fn history_answers() {
    let mut exec = exec_meta();
    exec.changed = None;
    let line = ExecSummary {
        exec,
        seq: 4,
        time_ns: "2000000000500".into(),
        time: 2,
        explanation: None,
        actor: crate::oplog::Actor::daemon(),
    };
    let v = wire(&line);
    let mut want = set(EXEC_FIELDS);
    want.remove("changed");
    want.extend(["seq", "time_ns", "time", "explanation", "actor"]);
    assert_eq!(keys(&v), want, "a history line has no changed list");
    assert!(v["explanation"].is_null());
    let list = HistoryAnswer {
        execs: vec![line.clone()],
        scan_limited: None,
    };
    assert_eq!(keys(&wire(&list)), set(&["execs"]));
    let limited = HistoryAnswer {
        execs: vec![],
        scan_limited: Some(10_000),
    };
    assert_eq!(wire(&limited), json!({"execs": [], "scan_limited": 10_000}));
    let mut record = operation();
    record.meta.insert("exec".into(), json!(exec_meta()));
    let shown = HistoryShown {
        record: record.clone(),
        summary: line,
        stdout: "b3V0".into(),
        stderr: String::new(),
    };
    let v = wire(&shown);
    assert_eq!(keys(&v), set(&["record", "summary", "stdout", "stderr"]));
    assert_eq!(v["record"], serde_json::to_value(&record).unwrap());
}

#[test]
fn message_answers() {
    use crate::ops::messages::{ConversationMeta, Durable, MessagesAnswer, MetaUpdated, Queued};
    for (tool_calls, meta) in [(None, None), (Some(json!([1])), Some(Map::new()))] {
        let m = crate::messages::Message {
            version: crate::messages::MSG_VERSION,
            id: "id".into(),
            seq: 2,
            time_ns: 3_000_000_000_001,
            role: "user".into(),
            content: json!({"text": "hi"}),
            tool_calls,
            tool_call_id: None,
            meta,
            op: None,
            checkpoint: Some("ab".into()),
            workspace: "cd".into(),
        };
        let a = MessagesAnswer {
            messages: vec![MessageView::from(&m)],
            more: false,
        };
        // `Message::json` is the protocol form the untyped answer carried.
        assert_eq!(wire(&a), json!({"messages": [m.json()], "more": false}));
    }
    let q = |duplicate| Queued {
        id: "id".into(),
        queued: true,
        duplicate,
    };
    assert_eq!(wire(&q(false)), json!({"id": "id", "queued": true}));
    assert_eq!(
        wire(&q(true)),
        json!({"id": "id", "queued": true, "duplicate": true})
    );
    assert_eq!(wire(&Durable { durable: 7 }), json!({"durable": 7}));
    let c = MetaUpdated {
        conversation: Some(ConversationMeta {
            cost: Some(1.5),
            exit_reason: None,
            model: Some("m".into()),
            turns: Some(2),
        }),
    };
    assert_eq!(
        wire(&c),
        json!({"conversation": {"cost": 1.5, "model": "m", "turns": 2}})
    );
    assert_eq!(
        wire(&MetaUpdated { conversation: None }),
        json!({ "conversation": null })
    );
}

/// The verbs whose answers are typed: their response schema describes an object
/// (or a choice of objects), never "any value".
#[test]
fn typed_answers_have_object_schemas() {
    let typed = [
        Checkpoint::NAME,
        Log::NAME,
        Status::NAME,
        OpLog::NAME,
        Diff::NAME,
        Show::NAME,
        ExecBegin::NAME,
        ExecOutput::NAME,
        ExecEnd::NAME,
        History::NAME,
        HistoryShow::NAME,
        Messages::NAME,
        MessageAppend::NAME,
        MessageFlush::NAME,
        SessionMetaUpdate::NAME,
        ExperimentBegin::NAME,
        Continue::NAME,
        Config::NAME,
        Note::NAME,
        Timeline::NAME,
        Rewind::NAME,
        ExperimentAdopt::NAME,
        ExperimentEnd::NAME,
        ExperimentShow::NAME,
        Promote::NAME,
    ];
    for s in schemas().iter().filter(|s| typed.contains(&s.name)) {
        let r = s.response.as_value();
        assert!(
            r["type"] == "object" || r.get("anyOf").is_some(),
            "{}: response schema {r}",
            s.name
        );
        // Every field is described (the MCP server shows these to models).
        let props = r.get("properties").and_then(Value::as_object);
        for (k, p) in props.into_iter().flatten() {
            let described = p.get("description").is_some() || p.get("$ref").is_some();
            assert!(described, "{}: field {k} has no description", s.name);
        }
    }
    assert_eq!(
        schemas().iter().filter(|s| typed.contains(&s.name)).count(),
        typed.len()
    );
}

#[test]
fn experiment_begin_answer() {
    use crate::command::RunCommand;
    use crate::ops::experiment::begin::{Begun, ForkMade};
    let a = Begun {
        id: "e1".into(),
        base: "ab".into(),
        cwd: None,
        forks: vec![ForkMade {
            run: 1,
            label: "1".into(),
            name: "s-exp-e1-1".into(),
            mountpoint: "/m/1".into(),
            command: RunCommand::Shell("true".into()),
            env: [("K".to_string(), "A".to_string())].into(),
        }],
    };
    assert_eq!(
        wire(&a),
        json!({"id": "e1", "base": "ab", "cwd": null, "forks": [{
            "run": 1, "label": "1", "name": "s-exp-e1-1", "mountpoint": "/m/1",
            "command": "true", "env": {"K": "A"}}]})
    );
}

#[test]
fn continue_answer() {
    let a = crate::ops::messages::cont::Continued {
        session: "b".into(),
        mountpoint: "/m/b".into(),
        from: "a".into(),
        checkpoint: None,
        messages: 4,
    };
    assert_eq!(
        wire(&a),
        json!({"session": "b", "mountpoint": "/m/b", "from": "a", "checkpoint": null, "messages": 4})
    );
}

#[test]
fn config_and_note_answers() {
    let cfg = crate::session::SessionConfig::default();
    let a = crate::ops::config::ConfigAnswer {
        config: cfg.clone(),
    };
    // `json!({"config": cfg})` as it was.
    let v = wire(&a);
    assert_eq!(v, json!({ "config": cfg }));
    assert!(v["config"]["auto_checkpoint_ops"].is_u64());
    assert!(v["config"]["auto_checkpoint_on"].is_string());
    let n = crate::ops::timeline::Noted { op: 7 };
    assert_eq!(wire(&n), json!({"op": 7}));
}

#[test]
fn timeline_answer() {
    use crate::ops::timeline::{FilesTouched, TimelineAnswer, TimelineEntry};
    let o = operation();
    let listed = FilesTouched::Listed {
        count: 60,
        paths: vec![change("a", Change::Added), change("b", Change::Deleted)],
    };
    let entry = TimelineEntry {
        op: crate::ops::oplog_list::op_view(&o),
        files: listed.clone(),
    };
    // `op_json(o)` plus `files`, as it was.
    let mut old = serde_json::to_value(&o).unwrap();
    old["time"] = json!(2000);
    old["summary"] = json!(crate::ops::oplog_list::summary(&o));
    old["files"] = json!({"count": 60, "paths": [
        {"path": "a", "change": "added"}, {"path": "b", "change": "deleted"}]});
    assert_eq!(wire(&entry), old);
    let unknown = FilesTouched::Unknown {
        error: "bad workspace id".into(),
    };
    assert_eq!(wire(&unknown), json!({"error": "bad workspace id"}));
    let a = TimelineAnswer {
        entries: vec![entry.clone()],
        scan_limited: None,
    };
    assert_eq!(keys(&wire(&a)), set(&["entries"]));
    let a = TimelineAnswer {
        entries: vec![],
        scan_limited: Some(10_000),
    };
    assert_eq!(wire(&a), json!({"entries": [], "scan_limited": 10_000}));
}

#[test]
fn rewind_answer() {
    use crate::ops::messages::rewind::{Rewound, RewoundConversation, RewoundFiles};
    let c = checkpoint(&[]);
    let mut a = Rewound {
        dry_run: true,
        op: None,
        message: "m1".into(),
        seq: 4,
        files: RewoundFiles {
            changes: vec![change("f", Change::Modified)],
            saved: None,
        },
        conversation: RewoundConversation { dropped: 2 },
    };
    assert_eq!(
        wire(&a),
        json!({"dry_run": true, "op": null, "message": "m1", "seq": 4,
               "files": {"changes": [{"path": "f", "change": "modified"}], "saved": null},
               "conversation": {"dropped": 2}})
    );
    a.dry_run = false;
    a.op = Some(9);
    a.files.saved = Saved::of(&Some((c.clone(), "auto/r-1".into())));
    let v = wire(&a);
    assert_eq!(
        v["files"]["saved"],
        json!({"checkpoint": c.id, "ref": "auto/r-1"})
    );
    assert_eq!(v["op"], 9);
}

#[test]
fn experiment_adopt_answer() {
    let c = checkpoint(&["ef"]);
    let a = crate::ops::experiment::adopt::Adopted {
        id: "e1".into(),
        run: 2,
        checkpoint: CheckpointView::from(&c),
        saved: None,
        op: 5,
        removed: Some("s-xe1-2".into()),
    };
    assert_eq!(
        wire(&a),
        json!({"id": "e1", "run": 2, "checkpoint": old_ckpt_json(&c), "saved": null,
               "op": 5, "removed": "s-xe1-2"})
    );
}

fn recorded() -> crate::ops::experiment::answer::Recorded {
    use crate::command::{RunCommand, RunResult};
    use crate::ops::experiment::answer::{FileDiff, Pair, Recorded, RunEntry};
    use crate::ops::experiment::compare;
    let run = |n: u32, exit: i32, out: &str| RunEntry {
        result: RunResult {
            run: n,
            exit: Some(exit),
            duration_ms: 10,
            stdout: out.into(),
            ..RunResult::default()
        },
        label: n.to_string(),
        command: RunCommand::Shell("true".into()),
        env: [("K".to_string(), "A".to_string())].into(),
        fork: format!("s-xe1-{n}"),
        checkpoint: "ab".repeat(32),
        files_changed: 1,
    };
    let runs = vec![run(1, 0, "a\n"), run(2, 1, "b\n")];
    let results: Vec<RunResult> = runs.iter().map(|r| r.result.clone()).collect();
    Recorded {
        id: "e1".into(),
        source: "s".into(),
        base: "cd".repeat(32),
        cwd: None,
        rank_by: compare::RankBy::Default,
        keep: false,
        aborted: false,
        ranking: compare::rank(&results, compare::RankBy::Default),
        winner: Some(1),
        stats: compare::stats(&results),
        pairs: vec![Pair {
            a: 1,
            b: 2,
            files: vec![FileDiff {
                path: "f".into(),
                kind: "modified".into(),
                a_hash: Some("11".into()),
                b_hash: None,
            }],
            files_truncated: false,
            output: None,
        }],
        runs,
    }
}

#[test]
fn experiment_record_and_comparison() {
    use crate::ops::experiment::answer::{Cleanup, CleanupError, Comparison};
    let doc = recorded();
    // The stored document: the keys `end` always wrote, each run its result plus
    // its fork's facts, each pair without output diffs.
    let stored = wire(&doc);
    assert_eq!(
        keys(&stored),
        set(&[
            "id", "source", "base", "cwd", "rank_by", "keep", "aborted", "runs", "ranking",
            "winner", "stats", "pairs"
        ])
    );
    assert!(stored["cwd"].is_null());
    assert_eq!(stored["rank_by"], "default");
    let mut run_keys = keys(&serde_json::to_value(&doc.runs[0].result).unwrap())
        .into_iter()
        .map(str::to_string)
        .collect::<BTreeSet<_>>();
    run_keys.extend(
        [
            "label",
            "command",
            "env",
            "fork",
            "checkpoint",
            "files_changed",
        ]
        .map(String::from),
    );
    let got: BTreeSet<String> = keys(&stored["runs"][0])
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(got, run_keys);
    assert_eq!(stored["runs"][0]["command"], "true");
    assert_eq!(
        stored["pairs"][0],
        json!({"a": 1, "b": 2, "files_truncated": false,
               "files": [{"path": "f", "type": "modified", "a_hash": "11", "b_hash": null}]})
    );
    assert_eq!(
        keys(&stored["stats"]),
        set(&[
            "runs",
            "min_duration_ms",
            "max_duration_ms",
            "mean_duration_ms",
            "success_rate"
        ])
    );
    // The answer: the document, each pair with its output diffs, and the op.
    let shown: Comparison = doc.clone().answer(8);
    let v = wire(&shown);
    let mut want = keys(&stored);
    want.insert("op");
    assert_eq!(keys(&v), want);
    assert_eq!(v["op"], 8);
    let p = &v["pairs"][0];
    assert_eq!(p["exit_code_diff"], -1);
    assert!(p["stdout_diff"].as_str().unwrap().contains("-a"));
    assert_eq!(p["stderr_diff"], "");
    let mut ended = shown;
    ended.cleanup = Some(Cleanup {
        removed: vec!["s-xe1-2".into()],
        kept: vec!["s-xe1-1".into()],
        errors: vec![CleanupError {
            fork: "x".into(),
            error: "busy".into(),
        }],
    });
    assert_eq!(
        wire(&ended)["cleanup"],
        json!({"removed": ["s-xe1-2"], "kept": ["s-xe1-1"],
               "errors": [{"fork": "x", "error": "busy"}]})
    );
}

#[test]
fn promote_answers() {
    use crate::ops::promote::answer::{
        Committed, Landed, PathWhy, PromoteAnswer, PromoteChange, PromoteTarget,
    };
    let mut a = PromoteAnswer {
        dry_run: true,
        strategy: "commit".into(),
        changes: vec![PromoteChange {
            path: "f".into(),
            change: Change::Deleted,
            mode: None,
            old_mode: Some("100644".into()),
            size: 0,
        }],
        skipped: vec![PathWhy {
            path: "big".into(),
            why: "too large".into(),
        }],
        unchanged: vec![],
        transient: vec!["tmp".into()],
        target: PromoteTarget {
            name: Some("refs/heads/main".into()),
            from: Some("aa".into()),
            base: Some("aa".into()),
        },
        landed: Landed::default(),
        saved: None,
        op: None,
    };
    // A dry run: the report alone.
    assert_eq!(
        wire(&a),
        json!({"dry_run": true, "strategy": "commit",
               "changes": [{"path": "f", "change": "deleted", "mode": null, "old_mode": "100644", "size": 0}],
               "skipped": [{"path": "big", "why": "too large"}], "unchanged": [], "transient": ["tmp"],
               "target": {"ref": "refs/heads/main", "from": "aa", "base": "aa"}})
    );
    // A commit: what landed (worktree_error null, not absent), saved and op.
    let commit = Landed {
        commit: Some(Committed {
            sha: "bb".into(),
            branch: "main".into(),
            parent: "aa".into(),
            worktree_error: None,
        }),
        ..Landed::default()
    };
    assert_eq!(
        wire(&commit),
        json!({"sha": "bb", "branch": "main", "parent": "aa", "worktree_error": null})
    );
    a.dry_run = false;
    a.landed = commit;
    a.saved = Some("cc".into());
    a.op = Some(3);
    let v = wire(&a);
    let mut want = set(&[
        "dry_run",
        "strategy",
        "changes",
        "skipped",
        "unchanged",
        "transient",
        "target",
    ]);
    let report = want.clone();
    want.extend(["sha", "branch", "parent", "worktree_error", "saved", "op"]);
    assert_eq!(keys(&v), want);
    assert!(v["worktree_error"].is_null());
    // A patch: the text, or base64 when it is not UTF-8; nothing of a commit.
    for (landed, key) in [
        (
            Landed {
                patch: Some("diff".into()),
                ..Landed::default()
            },
            "patch",
        ),
        (
            Landed {
                patch_base64: Some("AA==".into()),
                ..Landed::default()
            },
            "patch_base64",
        ),
    ] {
        assert_eq!(keys(&wire(&landed)), set(&[key]));
        a.landed = landed;
        let mut want = report.clone();
        want.extend([key, "saved", "op"]);
        assert_eq!(keys(&wire(&a)), want);
    }
}

/// A document as `experiment_end` stored it before the answers were typed (its
/// `json!` expressions, over a run result written by an older CLI without the
/// fields added since) reads as a `Recorded`, and reads back equal.
#[test]
fn a_stored_experiment_document_reads() {
    use crate::ops::experiment::answer::Recorded;
    let doc = recorded();
    let mut runs = Vec::new();
    for r in &doc.runs {
        // `run_entry` as it was: the result's JSON plus the fork's facts.
        let mut v = json!(r.result);
        for k in ["interrupted", "stdout_len", "stderr_len", "score_error"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v["label"] = json!(r.label);
        v["command"] = json!(r.command);
        v["env"] = json!(r.env);
        v["fork"] = json!(r.fork);
        v["checkpoint"] = json!(r.checkpoint);
        v["files_changed"] = json!(r.files_changed);
        runs.push(v);
    }
    let old = json!({
        "id": doc.id, "source": doc.source, "base": doc.base, "cwd": doc.cwd,
        "rank_by": doc.rank_by, "keep": doc.keep, "aborted": doc.aborted, "runs": runs,
        "ranking": doc.ranking, "winner": doc.winner, "stats": doc.stats,
        "pairs": [{"a": 1, "b": 2, "files_truncated": false,
                   "files": [{"path": "f", "type": "modified", "a_hash": "11", "b_hash": null}]}],
    });
    let read: Recorded = serde_json::from_value(old).unwrap();
    assert_eq!(read, doc);
    // What this version stores is the same document, whole.
    let mut whole = wire(&doc);
    let read: Recorded = serde_json::from_value(whole.clone()).unwrap();
    assert_eq!(serde_json::to_value(&read).unwrap(), whole);
    whole["runs"][0]["stdout"] = json!("changed");
    assert_ne!(serde_json::from_value::<Recorded>(whole).unwrap(), doc);
}
