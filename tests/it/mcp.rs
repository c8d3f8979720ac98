//! `treefork mcp` end to end: the official MCP Python SDK's stdio client
//! (tests/mcp/client.py) drives the server on real mounts, through the user's
//! session socket and through an agent socket — each scenario twice, with the
//! pinned SDK (`mcp==1.22.0`, `$TREEFORK_TEST_PYTHON`) and with the latest
//! (tests/mcp/requirements-latest.txt, `$TREEFORK_TEST_PYTHON_MCP_LATEST`; 2.x
//! renamed result fields). scripts/test.sh makes both venvs; without them these
//! tests fail, they never skip.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::harness::{Mount, bin, daemon_log};
use crate::lifecycle::git_repo;

/// The Pythons with an `mcp` SDK: (the variable naming it, the interpreter),
/// pinned first.
fn pythons() -> Vec<(&'static str, String)> {
    [
        (
            "TREEFORK_TEST_PYTHON",
            "mcp==1.22.0 (clients/python/requirements-test.txt)",
        ),
        (
            "TREEFORK_TEST_PYTHON_MCP_LATEST",
            "tests/mcp/requirements-latest.txt",
        ),
    ]
    .into_iter()
    .map(|(var, what)| {
        let py = std::env::var(var).unwrap_or_else(|_| {
            panic!(
                "{var} is not set: it must name a Python interpreter with {what} \
                 installed (scripts/test.sh creates one)"
            )
        });
        (var, py)
    })
    .collect()
}

/// Run `py` with `args` (`path`: the PATH to give it, if any) outside any
/// workspace's environment; its stdout, after asserting it succeeded (`what`
/// names it in the failure, with its output and the daemon's log).
fn run_python(py: &str, args: &[&str], path: Option<&str>, m: &Mount, what: &str) -> String {
    let mut cmd = Command::new(py);
    cmd.args(args)
        .env_remove("TREEFORK_SOCKET")
        .env_remove("TREEFORK_STORE");
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let o = cmd.output().expect("run Python");
    assert!(
        o.status.success(),
        "{what} ({py}) failed:\n{}\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Run scenario `name` of tests/mcp/client.py with interpreter `py`; the facts it
/// prints.
fn client(py: &str, m: &Mount, name: &str, extra: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let mut args = vec![script.to_str().unwrap(), name, "--bin", bin()];
    args.extend(["--workspace", m.mp.to_str().unwrap()]);
    args.extend(extra);
    let what = format!("MCP client scenario {name}");
    let out = run_python(py, &args, None, m, &what);
    let last = out.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("client output {out:?}: {e}"))
}

/// The kinds of the session's operations, newest first (`op log` with `extra`).
fn op_kinds(m: &Mount, extra: &[&str]) -> Vec<String> {
    let args: Vec<&str> = ["--json", "op", "log"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let ops: Value = serde_json::from_str(&crate::harness::ws_ok(m, &args)).unwrap();
    ops["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["kind"].as_str().map(str::to_owned))
        .collect()
}

fn git(repo: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .expect("git");
    assert!(o.status.success(), "git {args:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The user's socket (found from the workspace): every tool listed, with valid
/// schemas and hints; checkpoint, diff with a byte limit, exec with progress,
/// show_file, undo, experiment with progress and adopt, bisect with progress
/// (one `bisect` record, no fork left), restore's default dry
/// run, error results with their codes, promote's default dry run on a real git
/// repository and its BASELINE_CONFLICT with paths. Checked here against the
/// mount, the store and git.
#[test]
fn mcp_user_socket_end_to_end() {
    for (_, py) in pythons() {
        user_socket(&py);
    }
}

fn user_socket(py: &str) {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let m = Mount::with_options("s", &["--from", repo.to_str().unwrap()]);
    let facts = client(py, &m, "user", &["--repo", repo.to_str().unwrap()]);
    let tools = facts["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t == "promote"), "{facts}");
    assert_eq!(tools.len(), 24, "{facts}");
    // The exec was recorded by the daemon, then undone: the log says so.
    let kinds = op_kinds(&m, &[]);
    for k in [
        "exec",
        "undo",
        "experiment",
        "adopt",
        "bisect",
        "checkpoint",
        "cherry-pick",
    ] {
        assert!(
            kinds.iter().any(|x| x == k),
            "no {k} operation in {kinds:?}"
        );
    }
    // The dry runs wrote nothing to the durable repository.
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert!(m.p("r.txt").exists(), "the adopted run's file");
}

/// An agent socket: promote is not listed (nor callable), additive tools work
/// and their operations are recorded as the agent's.
#[test]
fn mcp_agent_socket_hides_promote() {
    for (_, py) in pythons() {
        agent_socket(&py);
    }
}

fn agent_socket(py: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    let facts = client(py, &m, "agent", &["--socket", sock.to_str().unwrap()]);
    let tools = facts["tools"].as_array().unwrap();
    assert!(!tools.iter().any(|t| t == "promote"), "{facts}");
    assert_eq!(tools.len(), 23, "{facts}");
    let ops = crate::harness::ws_ok(&m, &["--json", "op", "log", "-n", "1"]);
    let ops: Value = serde_json::from_str(&ops).unwrap();
    assert_eq!(ops["operations"][0]["actor"]["role"], "agent", "{ops}");
}

/// The message protocol through MCP: append, list, rewind files and conversation.
#[test]
fn mcp_messages_and_rewind() {
    for (_, py) in pythons() {
        messages_and_rewind(&py);
    }
}

fn messages_and_rewind(py: &str) {
    let m = Mount::new();
    let facts = client(py, &m, "messages", &[]);
    assert!(facts["rewound_to"].is_string(), "{facts}");
    // The fork made from the message: a session of its own with that message only.
    let fork = std::path::PathBuf::from(facts["fork"].as_str().unwrap());
    let msgs: serde_json::Value = serde_json::from_str(&crate::harness::tf_ok(
        &m.store,
        &["--json", "-C", fork.to_str().unwrap(), "messages"],
    ))
    .unwrap();
    assert_eq!(msgs["messages"].as_array().unwrap().len(), 1, "{msgs}");
    crate::harness::umount_ok(&m.store, &fork);
}

/// The README's Python example, as printed there, against a real mount with the
/// latest SDK (`treefork` found on PATH as the example expects): a failing
/// `make test` is undone.
#[test]
fn mcp_readme_example_runs() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let after = readme
        .split("From Python, with the official SDK")
        .nth(1)
        .expect("the README's MCP example");
    let code = after
        .split("```python\n")
        .nth(1)
        .and_then(|c| c.split("```").next())
        .expect("a python block");
    let m = Mount::new();
    std::fs::write(m.p("Makefile"), "test:\n\ttouch made.txt; false\n").unwrap();
    let code = code.replace("/home/me/ws", m.mp.to_str().unwrap());
    assert!(code.contains(m.mp.to_str().unwrap()), "{code}");
    let dir = Path::new(bin()).parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (_, py) = pythons().pop().unwrap();
    run_python(&py, &["-c", &code], Some(&path), &m, "README example");
    assert!(
        !m.p("made.txt").exists(),
        "the failed command's file was not undone"
    );
    let kinds = op_kinds(&m, &["-n", "3"]);
    assert_eq!(kinds, ["undo", "exec", "checkpoint"]);
}
