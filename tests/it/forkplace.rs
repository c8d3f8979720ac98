//! Issue 39: forks look to programs like the workspace they came from, and long
//! runs give a sign of life. A python3 script in the workspace refuses to run
//! when any component of its cwd, its realpath or `__file__` starts with a dot,
//! or when its cwd is not the workspace's path (as Express refuses dot-directory
//! paths): run in the workspace, as an experiment and as a bisect, it must pass
//! alike. `--run-at fork` runs at the fork's (dot-free) mountpoint; `--forks-dir`
//! moves the forks (refused on an agent socket). While runs go on, stderr says
//! which are still running; the score command's output is kept; `--label` and
//! default labels tell runs apart; `--help` names `--timeout`.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::harness::*;

/// The script: exits 3 when a path component starts with '.', 4 when the cwd
/// is not `$WANT_CWD` (if set); prints the cwd and `$PWD`.
const CHECK: &str = r#"import os, sys
paths = [os.getcwd(), os.path.realpath(os.getcwd()), os.path.abspath(__file__)]
for p in paths:
    if any(c.startswith('.') for c in p.split('/') if c):
        print('dot-directory in', p)
        sys.exit(3)
want = os.environ.get('WANT_CWD')
if want and os.getcwd() != want:
    print('cwd', os.getcwd(), 'is not', want)
    sys.exit(4)
print('cwd=' + os.getcwd())
print('pwd=' + os.environ.get('PWD', ''))
"#;

/// `treefork --json VERB ARGS` in `dir`, with `env` set.
fn tf_in(m: &Mount, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin());
    c.arg("--store").arg(&m.store).args(args).current_dir(dir);
    c.env_remove("TREEFORK_STORE").env_remove("TREEFORK_SOCKET");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run treefork")
}

fn ok(o: &Output, what: &str, m: &Mount) -> Value {
    assert!(
        o.status.success(),
        "{what} failed ({:?}): {}\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout),
        daemon_log(&m.store)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn run_of(doc: &Value, n: u64) -> &Value {
    doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run"] == n)
        .unwrap_or_else(|| panic!("{doc:#}"))
}

/// A mount with `sub/check.py`, checkpointed.
fn with_script() -> Mount {
    let m = Mount::new();
    write_synced(&m.p("sub/check.py"), CHECK.as_bytes());
    ws_ok(&m, &["checkpoint", "-m", "script"]);
    m
}

#[test]
fn an_experiment_run_sees_the_workspace_path() {
    let m = with_script();
    let sub = m.p("sub");
    let want = sub.to_str().unwrap().to_string();
    // In the workspace itself the script passes.
    let o = Command::new("python3")
        .arg("check.py")
        .current_dir(&sub)
        .env("WANT_CWD", &want)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    // As an experiment (from sub/), with a score command that runs it too.
    let o = tf_in(
        &m,
        &sub,
        &[
            "--json",
            "experiment",
            "--score",
            "python3 check.py && echo 5",
            "-c",
            "python3 check.py",
        ],
        &[("WANT_CWD", &want)],
    );
    let doc = ok(&o, "experiment", &m);
    let r = run_of(&doc, 1);
    assert_eq!(r["exit"], 0, "{doc:#}");
    let out = r["stdout"].as_str().unwrap();
    assert!(out.contains(&format!("cwd={want}\n")), "{out}");
    assert!(out.contains(&format!("pwd={want}\n")), "{out}");
    assert_eq!(r["score"], 5.0, "{doc:#}");
    // The host's view did not change: the workspace is still the source.
    assert!(m.p("sub/check.py").exists());
    assert!(!m.tmp.path().join("mnt.experiments").exists());
    assert!(!m.tmp.path().join(".mnt.experiments").exists());
}

#[test]
fn run_at_fork_runs_at_a_dot_free_fork_path_and_forks_dir_moves_it() {
    let m = with_script();
    let o = tf_in(
        &m,
        &m.mp,
        &[
            "--json",
            "experiment",
            "--run-at",
            "fork",
            "-c",
            "python3 sub/check.py; pwd",
        ],
        &[],
    );
    let doc = ok(&o, "experiment --run-at fork", &m);
    let r = run_of(&doc, 1);
    let fork = r["fork"].as_str().unwrap();
    let at = m.tmp.path().join("mnt.experiments").join(fork);
    assert_eq!(r["exit"], 0, "{doc:#}");
    let out = r["stdout"].as_str().unwrap();
    assert!(out.contains(&format!("cwd={}\n", at.display())), "{out}");
    // --forks-dir: the forks' directory under another parent, removed after.
    let elsewhere = m.tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let o = tf_in(
        &m,
        &m.mp,
        &[
            "--json",
            "experiment",
            "--run-at",
            "fork",
            "--forks-dir",
            elsewhere.to_str().unwrap(),
            "-c",
            "pwd",
        ],
        &[],
    );
    let doc = ok(&o, "experiment --forks-dir", &m);
    let r = run_of(&doc, 1);
    let fork = r["fork"].as_str().unwrap();
    let at = elsewhere.join("mnt.experiments").join(fork);
    assert_eq!(r["stdout"].as_str().unwrap(), format!("{}\n", at.display()));
    assert!(!elsewhere.join("mnt.experiments").exists());
    assert!(elsewhere.is_dir(), "the given directory stays");
    // The setting: set once, used by bisect too (with --run-at fork).
    ws_ok(
        &m,
        &["config", &format!("forks_dir={}", elsewhere.display())],
    );
    let o = tf_in(
        &m,
        &m.mp,
        &[
            "--json",
            "bisect",
            "run",
            "--run-at",
            "fork",
            "sh",
            "-c",
            "pwd >&2; exit 1",
        ],
        &[],
    );
    // One checkpoint failing at the good end: a wrong range, but it ran there.
    assert_eq!(
        o.status.code(),
        Some(12),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!elsewhere.join("mnt.bisect").exists());
    // A relative or dotted setting is refused.
    let o = ws(&m, &["config", "forks_dir=rel/dir"]);
    assert!(!o.status.success());
}

#[test]
fn an_agent_socket_may_not_choose_the_forks_dir() {
    let dir = tempfile::Builder::new()
        .prefix("tf-agent-")
        .tempdir()
        .unwrap();
    let sock = dir.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    write_synced(&m.p("f"), b"x\n");
    ws_ok(&m, &["checkpoint", "-m", "one"]);
    let elsewhere = m.tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    for args in [
        &[
            "experiment",
            "--forks-dir",
            elsewhere.to_str().unwrap(),
            "-c",
            "true",
        ][..],
        &[
            "bisect",
            "run",
            "--forks-dir",
            elsewhere.to_str().unwrap(),
            "true",
        ][..],
    ] {
        let o = Command::new(bin())
            .args(args)
            .env("TREEFORK_SOCKET", &sock)
            .env_remove("TREEFORK_STORE")
            .current_dir(&m.mp)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(6), "{args:?}: {err}");
        assert!(err.contains("forks_dir"), "{err}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
    // Without it, the agent's experiment works (forks beside the workspace).
    let o = Command::new(bin())
        .args([
            "--json",
            "experiment",
            "-c",
            "python3 -c 'import os; print(os.getcwd())'",
        ])
        .env("TREEFORK_SOCKET", &sock)
        .env_remove("TREEFORK_STORE")
        .current_dir(&m.mp)
        .output()
        .unwrap();
    let doc = ok(&o, "agent experiment", &m);
    assert_eq!(
        run_of(&doc, 1)["stdout"].as_str().unwrap(),
        format!("{}\n", m.mp.display())
    );
}

/// Twelve checkpoints: `f` says `good` before the eighth, `bad` from it on; the
/// script is in every one. Their ids, oldest first.
fn twelve(m: &Mount) -> Vec<String> {
    write_synced(&m.p("sub/check.py"), CHECK.as_bytes());
    (0..12)
        .map(|i| {
            let word = if i < 8 { "good" } else { "bad" };
            write_synced(&m.p("sub/f"), format!("{word} {i}\n").as_bytes());
            let v: Value = serde_json::from_str(&ws_ok(
                m,
                &["--json", "checkpoint", "-m", &format!("cp {i}")],
            ))
            .unwrap();
            v["checkpoint"]["id"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn a_bisect_run_sees_the_workspace_path() {
    let m = Mount::new();
    let ids = twelve(&m);
    let sub = m.p("sub");
    let want = sub.to_str().unwrap().to_string();
    let o = tf_in(
        &m,
        &sub,
        &[
            "--json",
            "bisect",
            "run",
            "-j",
            "3",
            "--good",
            &ids[0],
            "sh",
            "-c",
            "python3 check.py && grep -q good f",
        ],
        &[("WANT_CWD", &want)],
    );
    let doc = ok(&o, "bisect", &m);
    assert_eq!(doc["first_bad"]["id"], ids[8], "{doc:#}");
    assert_eq!(doc["last_good"]["id"], ids[7], "{doc:#}");
    assert!(!m.tmp.path().join("mnt.bisect").exists());
}

#[test]
fn long_runs_say_which_are_still_going() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"x\n");
    let every = [("TREEFORK_PROGRESS_INTERVAL_MS", "400")];
    let o = tf_in(
        &m,
        &m.mp,
        &["--json", "experiment", "-c", "sleep 2.5", "-c", "sleep 0.1"],
        &every,
    );
    ok(&o, "experiment", &m);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("runs still going: run 1 ("), "{err}");
    assert!(!err.contains("run 2 (1s)"), "{err}");
    // Fast runs: no line at all (the default interval is 30 s).
    let o = tf_in(&m, &m.mp, &["--json", "experiment", "-c", "true"], &[]);
    ok(&o, "experiment", &m);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("still going"));
    // A bisect too: the runs in flight by checkpoint.
    let ids = twelve(&m);
    let o = tf_in(
        &m,
        &m.mp,
        &[
            "--json",
            "bisect",
            "run",
            "--good",
            &ids[6],
            "sh",
            "-c",
            "sleep 1; grep -q good sub/f",
        ],
        &every,
    );
    let doc = ok(&o, "bisect", &m);
    assert_eq!(doc["first_bad"]["id"], ids[8], "{doc:#}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bisect: runs still going: "), "{err}");
}

#[test]
fn help_names_the_timeout_and_why() {
    let m = Mount::new();
    for args in [
        &["experiment", "--help"][..],
        &["bisect", "run", "--help"][..],
    ] {
        let o = tf_in(&m, &m.mp, args, &[]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("--timeout"), "{text}");
        assert!(text.contains("forever"), "{text}");
        assert!(
            text.contains("--run-at") && text.contains("--forks-dir"),
            "{text}"
        );
    }
}

#[test]
fn score_output_is_kept_and_labels_tell_runs_apart() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"x\n");
    let o = tf_in(
        &m,
        &m.mp,
        &[
            "--json",
            "experiment",
            "--score",
            "echo scoring $TREEFORK_RUN; echo oops >&2; echo 7",
            "-c",
            "true",
            "-c",
            "true",
            "-c",
            "true",
            "--label",
            "first",
            "--label",
            "second",
        ],
        &[],
    );
    let doc = ok(&o, "experiment", &m);
    let labels: Vec<&str> = (1..=3)
        .map(|n| run_of(&doc, n)["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels[..2], ["first", "second"], "{doc:#}");
    assert!(!labels[..2].contains(&labels[2]), "{labels:?}");
    let r = &run_of(&doc, 1)["result"];
    let r = if r.is_object() { r } else { run_of(&doc, 1) };
    assert_eq!(r["score_stdout"], "scoring 1\n7\n", "{doc:#}");
    assert_eq!(r["score_stderr"], "oops\n", "{doc:#}");
    // `experiment show` prints it again, and the table's labels.
    let id = doc["id"].as_str().unwrap();
    let text = ws_ok(&m, &["experiment", "show", id]);
    assert!(
        text.contains("run 2 score output:\n  scoring 2\n  7\n  oops"),
        "{text}"
    );
    assert!(text.contains("first") && text.contains("second"), "{text}");
    // Default labels of alike commands differ.
    let doc = ok(
        &tf_in(
            &m,
            &m.mp,
            &["--json", "experiment", "-c", "true", "-c", "true"],
            &[],
        ),
        "experiment",
        &m,
    );
    assert_ne!(
        run_of(&doc, 1)["label"],
        run_of(&doc, 2)["label"],
        "{doc:#}"
    );
}
