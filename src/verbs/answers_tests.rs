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
use crate::diff::Change;
use crate::ops::exec::answers::{
    Begun, Ended, ExecMeta, ExecSummary, HistoryAnswer, HistoryShown, OutputTaken, WriterView,
};
use crate::ops::views::{BranchMoved, CheckpointView, MessageView, OpView, PathChange, Saved};

/// `v`'s JSON, after checking it reads back equal, also with an unknown field.
pub(super) fn wire<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) -> Value {
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

pub(super) fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

pub(super) fn set<'a>(k: &[&'a str]) -> BTreeSet<&'a str> {
    k.iter().copied().collect()
}

/// The checkpoint id spelled by repeating the hex digits `digits` to 64.
pub(super) fn cid(digits: &str) -> crate::id::CheckpointId {
    crate::id::CheckpointId::from_hex(&digits.repeat(64 / digits.len())).expect("hex")
}

/// The node id spelled by repeating the hex digits `digits` to 64.
pub(super) fn nid(digits: &str) -> crate::id::NodeId {
    crate::id::NodeId(cid(digits).0)
}

pub(super) fn checkpoint(parents: &[&str]) -> crate::refs::Checkpoint {
    let mut meta = Map::new();
    meta.insert("k".into(), json!("v"));
    crate::refs::Checkpoint {
        version: crate::refs::CHECKPOINT_VERSION,
        id: cid("ab"),
        session: "s".into(),
        root: nid("cd"),
        parents: parents.iter().map(|p| cid(p)).collect(),
        time_ns: 1_700_000_000_123_456_789,
        message: "m".into(),
        trigger: "manual".into(),
        files_changed: 3,
        meta,
        usage: None,
    }
}

/// `ops::ckpt_json` as it was before the answers were typed.
pub(super) fn old_ckpt_json(c: &crate::refs::Checkpoint) -> Value {
    json!({
        "id": c.id, "short": &c.id.to_hex()[..12], "session": c.session, "root": c.root,
        "parent": c.parent(), "parents": c.parents, "meta": c.meta, "time_ns": c.time_ns.to_string(),
        "time": (c.time_ns / 1_000_000_000) as i64,
        "message": c.message, "trigger": c.trigger, "files_changed": c.files_changed,
    })
}

pub(super) fn change(path: &str, change: Change) -> PathChange {
    PathChange {
        path: path.into(),
        change,
        ignored: false,
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
        store_full: None,
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

pub(super) fn operation() -> crate::oplog::Operation {
    let view = |h: &str| crate::oplog::View {
        head: Some(cid(h)),
        branch: None,
        workspace: crate::id::NodeId([0; 32]),
        branches: Default::default(),
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
fn an_exec_is_summarized_by_its_number_and_quoted_command() {
    let mut o = operation();
    o.kind = "exec".into();
    o.request = json!({"op": "exec", "argv": ["sh", "-c", "echo a b"], "cwd": ""});
    o.meta.insert("exec".into(), json!({"n": 3}));
    let s = crate::ops::oplog_list::summary(&o);
    assert!(s.starts_with("exec 3: sh -c 'echo a b': HEAD "), "{s}");
    // Cut to a line's width.
    o.request["argv"] = json!(["echo", "x".repeat(500)]);
    let s = crate::ops::oplog_list::summary(&o);
    assert!(s.contains("...") && s.len() < 200, "{s}");
    // Other kinds are named by their kind.
    assert!(crate::ops::oplog_list::summary(&operation()).starts_with("checkout: HEAD "));
}

#[test]
fn outcomes_are_said_in_words_and_records_without_their_fields_say_less() {
    let sum = crate::ops::oplog_list::summary;
    // Every kind with an empty meta: no panic, the kind named.
    for kind in [
        "bisect",
        "promote",
        "experiment",
        "merge",
        "revert",
        "rebase",
        "merge-continue",
        "cherry-pick-abort",
        "branch-delete",
        "undo",
    ] {
        let mut o = operation();
        o.kind = kind.into();
        assert!(sum(&o).starts_with(kind), "{kind}: {}", sum(&o));
    }
    let mut o = operation();
    o.kind = "bisect".into();
    let p =
        |id: &str, msg: &str| json!({"id": id.repeat(32), "short": id.repeat(6), "message": msg});
    o.meta.insert("command".into(), json!(["make", "test"]));
    o.meta.insert("good".into(), p("aa", "one"));
    o.meta.insert("bad".into(), p("cc", "three"));
    o.meta.insert("first_bad".into(), p("aa", "one"));
    assert!(sum(&o).contains("the range was wrong"), "{}", sum(&o));
    o.meta.insert("first_bad".into(), Value::Null);
    assert!(sum(&o).contains("no first bad"), "{}", sum(&o));
    o.meta
        .insert("first_bad".into(), p("cc", "t".repeat(5000).as_str()));
    let s = sum(&o);
    assert!(s.contains("first bad cccccccccccc") && s.len() < 500, "{s}");
    // An undo: what it reverted, in words.
    let mut u = operation();
    u.kind = "undo".into();
    u.undoes = Some(5);
    u.before.branch = Some("main".into());
    u.after.branch = Some("main".into());
    u.meta.insert(
        crate::ops::oplog_words::TARGET_KEY.into(),
        json!({"seq": 5, "kind": "revert", "what": "revert: reverted HEAD"}),
    );
    let s = sum(&u);
    assert!(
        s.starts_with("undid #5 revert: reverted HEAD: HEAD main back to bbbb"),
        "{s}"
    );
    assert!(!s.contains("->"), "{s}");
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
        store_full: None,
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
        checkpoint: c.id.to_hex(),
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
        checkpoint: c.id.to_hex(),
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
        tools: None,
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
        undone: false,
        reverted: false,
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
            id: "id".into(),
            seq: 2,
            time_ns: 3_000_000_000_001,
            role: "user".into(),
            content: json!({"text": "hi"}),
            tool_calls,
            tool_call_id: None,
            meta,
            op: None,
            checkpoint: Some(cid("ab")),
            workspace: nid("cd"),
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
            runtime: Some("claude".into()),
            runtime_session: None,
            turns: Some(2),
        }),
    };
    assert_eq!(
        wire(&c),
        json!({"conversation": {"cost": 1.5, "model": "m", "runtime": "claude", "turns": 2}})
    );
    assert_eq!(
        wire(&MetaUpdated { conversation: None }),
        json!({ "conversation": null })
    );
}

/// Every verb's answer is typed: its response schema describes an object (or a
/// choice of objects), never "any value", and every field is described (the MCP
/// server shows these descriptions to models).
#[test]
fn every_answer_has_an_object_schema() {
    assert_eq!(schemas().len(), NAMES.len());
    for s in schemas() {
        let r = s.response.as_value();
        assert_ne!(r["title"], "AnyValue", "{}: untyped answer", s.name);
        assert!(
            r["type"] == "object" || r.get("anyOf").is_some() || r.get("oneOf").is_some(),
            "{}: response schema {r}",
            s.name
        );
        let props = r.get("properties").and_then(Value::as_object);
        for (k, p) in props.into_iter().flatten() {
            let described = p.get("description").is_some() || p.get("$ref").is_some();
            assert!(described, "{}: field {k} has no description", s.name);
        }
    }
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
