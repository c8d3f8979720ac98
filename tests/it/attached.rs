//! Undo and redo of every verb that moves HEAD while it is attached to a branch
//! (issue 39 item 3): each verb runs on branch `main`, then `undo` twice and
//! `redo` twice; HEAD must stay attached to the same branch at the right
//! checkpoint, the branch must name it, the files must be right, and no step may
//! be refused ("someone else moved it") or detach HEAD ("no longer names").

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::harness::{Mount, git, sh, write_synced, ws, ws_ok};
use crate::lifecycle::git_repo;

fn j(m: &Mount, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ws_ok(m, &a)).unwrap()
}

/// HEAD, the branch it is attached to, and where that branch points.
#[derive(Debug, Clone, PartialEq)]
struct Head {
    head: String,
    branch: Option<String>,
    branch_at: Option<String>,
}

fn head(m: &Mount) -> Head {
    let s = j(m, &["status"]);
    let branch = s["branch"].as_str().map(str::to_string);
    let branch_at = branch.as_ref().and_then(|b| {
        j(m, &["branches"])["branches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == b.as_str())
            .map(|x| x["checkpoint"].as_str().unwrap().to_string())
    });
    Head {
        head: s["head"].as_str().unwrap_or("").to_string(),
        branch,
        branch_at,
    }
}

/// The workspace's regular files (not `.git`) and their contents.
fn files(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if rel == ".git" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.insert(rel, fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// Runs one step and checks it was neither refused nor detached HEAD; its
/// `--json` answer (`null` without `--json`).
fn step(m: &Mount, args: &[&str], what: &str) -> Value {
    let o = ws(m, args);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{what}: {args:?} failed: {err}");
    for bad in ["someone else moved", "no longer names", "detached"] {
        assert!(
            !out.contains(bad) && !err.contains(bad),
            "{what}: {args:?} said {bad:?}:\n{out}\n{err}"
        );
    }
    serde_json::from_str(&out).unwrap_or(Value::Null)
}

/// A verb's case: `prepare` brings the session (attached to `main`) to where the
/// verb applies (its own operations allowed); `verb` runs it.
struct Case {
    name: &'static str,
    /// Mount from a git repository (for rebase).
    git: bool,
    prepare: fn(&Mount),
    verb: fn(&Mount),
}

fn write(m: &Mount, p: &str, s: &str) {
    write_synced(&m.p(p), s.as_bytes());
}

/// A branch `side` off main's first checkpoint with its own change, main with
/// one more of its own, HEAD back on main.
fn side_branch(m: &Mount) {
    ws_ok(m, &["checkout", "-b", "side", "HEAD~1"]);
    write(m, "s", "side\n");
    ws_ok(m, &["checkpoint", "-m", "side"]);
    ws_ok(m, &["checkout", "main"]);
}

fn run_case(c: &Case) {
    let (_dir, m);
    if c.git {
        let d = tempfile::tempdir().unwrap();
        let repo = git_repo(d.path());
        m = Mount::with_options("s", &["--from", repo.to_str().unwrap()]);
        fs::write(m.tmp.path().join("repo-path"), repo.to_str().unwrap()).unwrap();
        _dir = Some(d);
    } else {
        m = Mount::new();
        _dir = None;
    }
    let m = &m;
    write(m, "f", "1\n");
    ws_ok(m, &["checkpoint", "-m", "one"]);
    ws_ok(m, &["checkout", "-b", "main"]);
    write(m, "f", "2\n");
    ws_ok(m, &["checkpoint", "-m", "two"]);
    (c.prepare)(m);
    let before = (head(m), files(&m.mp));
    assert!(before.0.branch.is_some(), "{}: attached", c.name);
    (c.verb)(m);
    let after = (head(m), files(&m.mp));
    assert!(
        after.0.branch.is_some(),
        "{}: the verb left HEAD attached",
        c.name
    );
    assert_eq!(
        after.0.branch_at.as_ref(),
        Some(&after.0.head),
        "{}",
        c.name
    );
    let what = format!("{}: undo", c.name);
    step(m, &["undo"], &what);
    assert_eq!(head(m), before.0, "{what}: HEAD and main as before");
    assert_eq!(files(&m.mp), before.1, "{what}: files as before");
    // The second undo reverts the operation before the verb.
    let what = format!("{}: second undo", c.name);
    let of = step(m, &["--json", "undo"], &what)["of"].as_u64().unwrap();
    let ops = j(m, &["op", "log", "-n", "100"])["operations"].clone();
    let undone = ops
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["seq"] == of)
        .unwrap()
        .clone();
    let prev = (
        undone["before"]["head"].as_str().unwrap_or("").to_string(),
        undone["before"]["branch"].as_str().map(str::to_string),
    );
    let h = head(m);
    assert_eq!((h.head.clone(), h.branch.clone()), prev, "{what}");
    if h.branch.is_some() {
        assert_eq!(h.branch_at.as_ref(), Some(&h.head), "{what}");
    }
    let what = format!("{}: redo", c.name);
    step(m, &["redo"], &what);
    assert_eq!(head(m), before.0, "{what}");
    let what = format!("{}: second redo", c.name);
    step(m, &["redo"], &what);
    assert_eq!(
        head(m),
        after.0,
        "{what}: HEAD and main as the verb left them"
    );
    assert_eq!(files(&m.mp), after.1, "{what}: files as the verb left them");
}

fn nothing(_: &Mount) {}

const CASES: &[Case] = &[
    Case {
        name: "checkpoint",
        git: false,
        prepare: |m| write(m, "f", "3\n"),
        verb: |m| {
            ws_ok(m, &["checkpoint", "-m", "three"]);
        },
    },
    Case {
        name: "exec",
        git: false,
        prepare: nothing,
        verb: |m| {
            ws_ok(m, &["exec", "--", "sh", "-c", "echo 3 > f"]);
        },
    },
    Case {
        name: "restore",
        git: false,
        prepare: nothing,
        verb: |m| {
            ws_ok(m, &["restore", "HEAD~1"]);
        },
    },
    Case {
        name: "checkout",
        git: false,
        prepare: |m| {
            ws_ok(m, &["branch", "other", "HEAD~1"]);
        },
        verb: |m| {
            ws_ok(m, &["checkout", "other"]);
        },
    },
    Case {
        name: "revert",
        git: false,
        prepare: nothing,
        verb: |m| {
            ws_ok(m, &["revert", "HEAD"]);
        },
    },
    Case {
        name: "merge",
        git: false,
        prepare: side_branch,
        verb: |m| {
            ws_ok(m, &["merge", "side"]);
        },
    },
    Case {
        name: "cherry-pick",
        git: false,
        prepare: side_branch,
        verb: |m| {
            ws_ok(m, &["cherry-pick", "side"]);
        },
    },
    Case {
        name: "merge --continue",
        git: false,
        prepare: |m| {
            ws_ok(m, &["checkout", "-b", "side", "HEAD~1"]);
            write(m, "f", "side\n");
            ws_ok(m, &["checkpoint", "-m", "side"]);
            ws_ok(m, &["checkout", "main"]);
            let o = ws(m, &["merge", "side"]);
            assert_eq!(o.status.code(), Some(11), "a conflict");
            write(m, "f", "both\n");
        },
        verb: |m| {
            ws_ok(m, &["merge", "--continue"]);
        },
    },
    Case {
        name: "rebase",
        git: true,
        prepare: |m| {
            let repo = fs::read_to_string(m.tmp.path().join("repo-path")).unwrap();
            let repo = Path::new(&repo);
            fs::write(repo.join("README"), "upstream\n").unwrap();
            git(repo, &["commit", "-q", "-am", "upstream"]);
        },
        verb: |m| {
            ws_ok(m, &["rebase"]);
        },
    },
    Case {
        name: "adopt",
        git: false,
        prepare: |m| {
            ws_ok(m, &["experiment", "-c", "echo won > f", "-c", "exit 1"]);
        },
        verb: |m| {
            ws_ok(m, &["experiment", "adopt", "--winner"]);
        },
    },
    Case {
        name: "rewind",
        git: false,
        prepare: |m| {
            let v = j(
                m,
                &[
                    "messages",
                    "append",
                    "--role",
                    "user",
                    "--content",
                    "\"hi\"",
                ],
            );
            ws_ok(m, &["messages", "flush"]);
            sh(&m.mp, "echo later > f");
            fs::write(m.tmp.path().join("msg"), v["id"].as_str().unwrap()).unwrap();
        },
        verb: |m| {
            let id = fs::read_to_string(m.tmp.path().join("msg")).unwrap();
            ws_ok(m, &["rewind", "--to", &id]);
        },
    },
    Case {
        name: "message checkpoint",
        git: false,
        prepare: |m| {
            ws_ok(m, &["config", "auto_checkpoint_on=user_message"]);
            write(m, "f", "3\n");
        },
        verb: |m| {
            ws_ok(
                m,
                &[
                    "messages",
                    "append",
                    "--role",
                    "user",
                    "--content",
                    "\"go\"",
                ],
            );
            ws_ok(m, &["messages", "flush"]);
        },
    },
];

#[test]
fn undo_and_redo_of_each_verb_keep_head_on_its_branch() {
    let mut failed = Vec::new();
    for c in CASES {
        let r = std::panic::catch_unwind(|| run_case(c));
        if let Err(e) = r {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{}: {msg}", c.name));
        }
    }
    assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n\n"));
}
