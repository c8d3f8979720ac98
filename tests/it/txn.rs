//! One transaction per operation: the state change of an op and its operation
//! record are one metadata batch. The daemon is killed (SIGKILL, by the debug
//! failpoint `txn-kill-KIND:N`, see `src/failpoint.rs`) at each step of checkout,
//! restore (whole and of a path), branch create, rename and delete, undo, redo,
//! op restore and experiment adopt; after a restart the op log and the
//! state agree: the op is in the log AND HEAD, the branches and the workspace
//! files are its after-state, or neither (the before-state, the log without it).
//! Steps 1 (begun) and 2 (tree swapped, batch built) must leave the before-state,
//! step 3 (committed) the after-state. A second test counts the metadata commits
//! each op makes (the daemon's `ops::txn` debug line): exactly one.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Mount, daemon_log, wait_daemon_gone, write_synced, ws, ws_ok};

fn j(m: &Mount, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ws_ok(m, &a)).unwrap()
}

fn checkpoint(m: &Mount, msg: &str) -> String {
    j(m, &["checkpoint", "-m", msg])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// What an op may change, as the CLI sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    head: String,
    branch: Value,
    /// Branches (auto refs included) to checkpoint.
    branches: BTreeMap<String, String>,
    /// Top-level files of the workspace and their contents.
    files: BTreeMap<String, String>,
    /// The op log, oldest first: (seq, kind).
    ops: Vec<(u64, String)>,
}

fn state(m: &Mount) -> State {
    let s = j(m, &["status"]);
    // With the automatic `auto/...` refs (the saved pending changes).
    let branches = j(m, &["branches", "--auto"])["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["name"].as_str().unwrap().to_string(),
                b["checkpoint"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(&m.mp).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            files.insert(
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            );
        }
    }
    let mut ops: Vec<(u64, String)> = j(m, &["op", "log", "-n", "100"])["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["seq"].as_u64().unwrap(),
                o["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    ops.reverse();
    State {
        head: s["head"].as_str().unwrap_or("").to_string(),
        branch: s["branch"].clone(),
        branches,
        files,
        ops,
    }
}

/// One op under test: its kind (the failpoint's), its setup, its arguments, and
/// a check that a state is its after-state given the before-state.
struct Case {
    kind: &'static str,
    setup: fn(&Mount) -> Vec<String>,
    args: fn(&[String]) -> Vec<String>,
    after: fn(&State, &State, &[String]),
}

/// `a` at c1 ("1") and c2 ("2", HEAD), then a pending (unsaved, synced) `b`.
fn two_checkpoints(m: &Mount) -> Vec<String> {
    write_synced(&m.p("a"), b"1");
    let c1 = checkpoint(m, "one");
    write_synced(&m.p("a"), b"2");
    let c2 = checkpoint(m, "two");
    write_synced(&m.p("b"), b"pending");
    vec![c1, c2]
}

/// The branches an op added to `before`'s: (name, checkpoint).
fn added(before: &State, after: &State) -> Vec<(String, String)> {
    after
        .branches
        .iter()
        .filter(|(k, _)| !before.branches.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The pending `b` was saved under an `auto/before-KIND-...` ref.
fn saved_pending(before: &State, after: &State, kind: &str) {
    let new = added(before, after);
    assert_eq!(new.len(), 1, "one saved ref: {new:?}");
    assert!(
        new[0].0.starts_with(&format!("auto/before-{kind}-")),
        "{new:?}"
    );
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            kind: "checkout",
            setup: two_checkpoints,
            args: |c| vec!["checkout".into(), c[0].clone()],
            after: |b, a, c| {
                assert_eq!(a.head, c[0]);
                assert_eq!(a.files, BTreeMap::from([("a".into(), "1".into())]));
                saved_pending(b, a, "checkout");
            },
        },
        Case {
            kind: "restore",
            setup: two_checkpoints,
            args: |c| vec!["restore".into(), c[0].clone()],
            after: |b, a, c| {
                assert_eq!(a.head, c[1]);
                assert_eq!(a.files, BTreeMap::from([("a".into(), "1".into())]));
                saved_pending(b, a, "restore");
            },
        },
        Case {
            kind: "restore",
            setup: |m| {
                let mut c = two_checkpoints(m);
                c.push(m.p("a").to_str().unwrap().to_string());
                c
            },
            args: |c| vec!["restore".into(), c[0].clone(), c[2].clone()],
            after: |b, a, c| {
                assert_eq!(a.head, c[1]);
                assert_eq!(
                    a.files,
                    BTreeMap::from([("a".into(), "1".into()), ("b".into(), "pending".into())])
                );
                saved_pending(b, a, "restore");
            },
        },
        Case {
            kind: "branch-rename",
            setup: |m| {
                let c = two_checkpoints(m);
                std::fs::remove_file(m.p("b")).unwrap();
                ws_ok(m, &["checkout", "-b", "feat"]);
                c
            },
            args: |_| vec!["branch".into(), "-m".into(), "feat".into(), "feat2".into()],
            after: |b, a, _| {
                assert_eq!(a.head, b.head);
                assert_eq!(b.branch, "feat");
                assert_eq!(a.branch, "feat2");
                assert_eq!(a.branches.get("feat"), None);
                assert_eq!(a.branches.get("feat2"), b.branches.get("feat"));
            },
        },
        Case {
            kind: "redo",
            setup: |m| {
                let c = two_checkpoints(m);
                ws_ok(m, &["checkout", &c[0]]);
                ws_ok(m, &["undo"]);
                c
            },
            args: |_| vec!["redo".into()],
            after: |_, a, c| {
                assert_eq!(a.head, c[0]);
                assert_eq!(a.files, BTreeMap::from([("a".into(), "1".into())]));
            },
        },
        Case {
            kind: "op-restore",
            setup: |m| {
                let mut c = two_checkpoints(m);
                let last = j(m, &["op", "log", "-n", "1"])["operations"][0]["seq"]
                    .as_u64()
                    .unwrap();
                ws_ok(m, &["checkout", &c[0]]);
                c.push(last.to_string());
                c
            },
            args: |c| vec!["op".into(), "restore".into(), c[2].clone()],
            after: |_, a, c| {
                assert_eq!(a.head, c[1]);
                assert_eq!(a.files, BTreeMap::from([("a".into(), "2".into())]));
            },
        },
        Case {
            kind: "branch-delete",
            setup: |m| {
                let c = two_checkpoints(m);
                ws_ok(m, &["branch", "gone"]);
                c
            },
            args: |_| vec!["branch".into(), "-d".into(), "gone".into()],
            after: |b, a, _| {
                assert!(b.branches.contains_key("gone"));
                assert!(!a.branches.contains_key("gone"));
                assert_eq!(a.head, b.head);
                assert_eq!(a.files, b.files);
            },
        },
        Case {
            kind: "branch",
            setup: |m| {
                let mut c = two_checkpoints(m);
                std::fs::remove_file(m.p("b")).unwrap();
                ws_ok(m, &["checkpoint", "-m", "three"]);
                c.push(j(m, &["status"])["head"].as_str().unwrap().to_string());
                c
            },
            args: |_| vec!["branch".into(), "feat".into()],
            after: |b, a, c| {
                assert_eq!(a.head, b.head);
                assert_eq!(a.files, b.files);
                assert_eq!(added(b, a), vec![("feat".into(), c[2].clone())]);
            },
        },
        Case {
            kind: "undo",
            setup: |m| {
                let c = two_checkpoints(m);
                ws_ok(m, &["checkout", &c[0]]);
                c
            },
            args: |_| vec!["undo".into()],
            after: |b, a, c| {
                assert_eq!(a.head, c[1]);
                assert_eq!(
                    a.files,
                    BTreeMap::from([("a".into(), "2".into()), ("b".into(), "pending".into())])
                );
                assert_eq!(a.branches, b.branches);
            },
        },
        Case {
            kind: "adopt",
            setup: |m| {
                let c = two_checkpoints(m);
                std::fs::remove_file(m.p("b")).unwrap();
                ws_ok(m, &["checkout", "-b", "main"]);
                let doc = j(m, &["experiment", "-c", "echo run > a"]);
                assert_eq!(doc["winner"], 1, "{doc}");
                let mut c = c;
                c.push(doc["runs"][0]["checkpoint"].as_str().unwrap().to_string());
                c
            },
            args: |_| vec!["experiment".into(), "adopt".into(), "--winner".into()],
            after: |b, a, c| {
                assert_eq!(a.head, c[2]);
                assert_eq!(a.branch, "main");
                assert_eq!(a.branches.get("main"), Some(&c[2]));
                assert_eq!(a.files.get("a").map(String::as_str), Some("run\n"));
                assert_eq!(b.branch, "main");
            },
        },
    ]
}

/// Kill the daemon at `step` of `case`'s op, restart, and compare.
fn kill_at(case: &Case, step: usize) {
    let m = Mount::with_failpoint(&format!("txn-kill-{}:{step}", case.kind));
    let c = (case.setup)(&m);
    let before = state(&m);
    let args = (case.args)(&c);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = ws(&m, &args);
    assert!(
        !o.status.success(),
        "{} at step {step}: the daemon should have died: {}",
        case.kind,
        String::from_utf8_lossy(&o.stdout)
    );
    wait_daemon_gone(&m.store);
    treefork::daemon::detach(&m.mp);
    std::thread::sleep(Duration::from_millis(50));
    m.mount();
    let after = state(&m);
    let what = format!(
        "{} killed at step {step}\nbefore: {before:#?}\nafter: {after:#?}\nlog: {}",
        case.kind,
        daemon_log(&m.store)
    );
    let recorded = after.ops.len() == before.ops.len() + 1;
    if recorded {
        assert_eq!(after.ops[..before.ops.len()], before.ops[..], "{what}");
        assert_eq!(after.ops.last().unwrap().1, case.kind, "{what}");
        let check = std::panic::catch_unwind(|| (case.after)(&before, &after, &c));
        assert!(check.is_ok(), "recorded, but not the after-state: {what}");
    } else {
        assert_eq!(
            after, before,
            "not recorded, but not the before-state: {what}"
        );
    }
    // Before the commit nothing is durable; after it, everything is.
    assert_eq!(recorded, step == 3, "{what}");
}

#[test]
fn a_kill_at_each_step_leaves_the_op_log_and_the_state_in_agreement() {
    for case in cases() {
        for step in 1..=3 {
            kill_at(&case, step);
        }
    }
}

#[test]
fn each_op_makes_one_metadata_commit() {
    for case in cases() {
        let m = Mount::with_env(&[("RUST_LOG", "info,treefork::ops::txn=debug")]);
        let c = (case.setup)(&m);
        let args = (case.args)(&c);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ws_ok(&m, &args);
        let log = daemon_log(&m.store);
        let prefix = format!("txn {}: op ", case.kind);
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(&prefix)).collect();
        assert_eq!(lines.len(), 1, "{}: {lines:?}\n{log}", case.kind);
        assert!(
            lines[0].ends_with("; 1 metadata commit(s) since the op began"),
            "{}: {}",
            case.kind,
            lines[0]
        );
    }
}
