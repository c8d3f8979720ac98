//! The typed answers of config, note, timeline, rewind, the experiment verbs and
//! promote pinned against the JSON they answered before they were typed. Shared
//! helpers are in `answers_tests`.

use std::collections::BTreeSet;

use serde_json::json;

use super::answers_tests::*;
use crate::diff::Change;
use crate::ops::views::{CheckpointView, Saved};

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
        not_removed: None,
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
        score_files_changed: None,
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
        interrupted_by: None,
        ranking: compare::rank(&results, compare::RankBy::Default),
        winner: Some(1),
        decided_by: Some("run 1 is the only run that exited 0".into()),
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
            "id",
            "source",
            "base",
            "cwd",
            "rank_by",
            "keep",
            "aborted",
            "runs",
            "ranking",
            "winner",
            "decided_by",
            "stats",
            "pairs"
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
        kept_at: vec![],
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
            drifted: None,
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
        lifecycle: None,
        drifted: vec![],
        next: None,
        workspace_git: None,
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
    // Written before `decided_by` was kept: none.
    assert_eq!(
        read,
        Recorded {
            decided_by: None,
            ..doc.clone()
        }
    );
    // What this version stores is the same document, whole.
    let mut whole = wire(&doc);
    let read: Recorded = serde_json::from_value(whole.clone()).unwrap();
    assert_eq!(serde_json::to_value(&read).unwrap(), whole);
    whole["runs"][0]["stdout"] = json!("changed");
    assert_ne!(serde_json::from_value::<Recorded>(whole).unwrap(), doc);
}
