//! The scripted model server and the agent CLIs' install location.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where scripts/test.sh installs the pinned CLIs (`TREEFORK_TEST_AGENTS`, else
/// target/agents).
pub fn agents_dir() -> PathBuf {
    match std::env::var_os("TREEFORK_TEST_AGENTS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/agents"),
    }
}

/// The installed CLI `name` (`claude`, `codex`).
pub fn cli(name: &str) -> PathBuf {
    let p = agents_dir().join("node_modules/.bin").join(name);
    assert!(
        p.exists(),
        "{} is missing: scripts/test.sh installs the agent CLIs (npm ci in target/agents)",
        p.display()
    );
    p
}

/// A running model server; killed on drop.
pub struct ModelServer {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl ModelServer {
    /// Serve `script` (see model_server.py), files in `dir`.
    pub fn start(dir: &Path, script: &Value) -> ModelServer {
        let sp = dir.join("script.json");
        std::fs::write(&sp, serde_json::to_vec(script).unwrap()).unwrap();
        let port_file = dir.join("port");
        let log = dir.join("model.log");
        let child = Command::new("/usr/bin/python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/model_server.py"))
            .arg(&sp)
            .arg(&port_file)
            .arg(&log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start the model server");
        let t = Instant::now();
        let port = loop {
            if let Ok(s) = std::fs::read_to_string(&port_file) {
                break s.trim().parse().unwrap();
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "model server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        ModelServer { child, port, log }
    }

    /// What it was asked, a line per request, and what the hooks did.
    pub fn requests(&self) -> String {
        let hooks = self.log.with_file_name("hook.log");
        format!(
            "{}\nhooks:\n{}",
            std::fs::read_to_string(&self.log).unwrap_or_default(),
            std::fs::read_to_string(hooks).unwrap_or_default()
        )
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `cmd` (with a 120 s limit: the CLIs retry forever when something is
/// wrong) and insist it succeeded.
pub fn run_ok(mut cmd: Command, what: &str, server: &ModelServer) -> Output {
    let o = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        o.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}\nmodel requests:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        server.requests()
    );
    o
}

/// `timeout 120 PROG`: the CLIs never give up on their own.
pub fn timed(prog: &Path) -> Command {
    let mut c = Command::new("timeout");
    c.arg("120").arg(prog);
    c
}

use crate::harness::{Mount, ws_ok};

/// `treefork --json ARGS` in the workspace, parsed.
pub fn ws_json(m: &Mount, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let s = ws_ok(m, &a);
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// The workspace the runtimes work in: `a.txt` to edit, `gone.txt` to remove,
/// checkpointed.
pub fn seed(m: &Mount) {
    std::fs::write(m.p("a.txt"), "one\n").unwrap();
    std::fs::write(m.p("gone.txt"), "keep me\n").unwrap();
    ws_ok(m, &["checkpoint", "-m", "seed"]);
}

/// The recorded tool calls: `(tool, summary, ok, changed paths as "change path")`.
pub fn tool_records(m: &Mount) -> Vec<(String, String, Option<bool>, Vec<String>)> {
    let h = ws_json(m, &["history"]);
    let mut out = Vec::new();
    for e in h["execs"].as_array().unwrap() {
        let n = e["n"].as_u64().unwrap();
        let show = ws_json(m, &["history", "show", &n.to_string()]);
        let ex = &show["record"]["meta"]["exec"];
        let Some(calls) = ex["tools"].as_array() else {
            continue;
        };
        let mut changed: Vec<String> = ex["changed"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|c| {
                        format!(
                            "{} {}",
                            c["change"].as_str().unwrap(),
                            c["path"].as_str().unwrap()
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        changed.sort();
        for c in calls {
            out.push((
                c["tool"].as_str().unwrap().to_string(),
                c["summary"].as_str().unwrap().to_string(),
                c["ok"].as_bool(),
                changed.clone(),
            ));
        }
    }
    out
}

/// The visible conversation: `(role, text)`.
pub fn conversation(m: &Mount) -> Vec<(String, String)> {
    let v = ws_json(m, &["messages"]);
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["role"].as_str().unwrap().to_string(),
                x["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// After a turn that edited a.txt and removed gone.txt through the shell (the
/// prompt `prompt`, the final message `last`): both calls are recorded with their
/// files, undo brings the removed file back, and `rewind --prompt 1` brings
/// files and conversation to before the prompt.
pub fn check_turn(m: &Mount, edit: (&str, &str), rm: (&str, &str), prompt: &str, last: &str) {
    let recs = tool_records(m);
    let find = |tool: &str, summary: &str| {
        recs.iter()
            .find(|r| r.0 == tool && r.1.contains(summary))
            .unwrap_or_else(|| panic!("no {tool} call {summary:?} recorded: {recs:?}"))
            .clone()
    };
    let e = find(edit.0, edit.1);
    assert_eq!(e.2, Some(true), "{e:?}");
    assert_eq!(e.3, vec!["modified a.txt".to_string()], "{e:?}");
    let r = find(rm.0, rm.1);
    assert_eq!(r.3, vec!["deleted gone.txt".to_string()], "{r:?}");
    assert_eq!(std::fs::read_to_string(m.p("a.txt")).unwrap(), "two\n");
    assert!(!m.p("gone.txt").exists());

    let conv = conversation(m);
    assert_eq!(conv.first().map(|c| c.0.as_str()), Some("user"), "{conv:?}");
    assert!(conv[0].1.contains(prompt), "{conv:?}");
    assert!(
        conv.iter()
            .any(|(role, t)| role == "assistant" && t.contains(last)),
        "{conv:?}"
    );
    let log = ws_json(m, &["log"]);
    let msgs: Vec<&str> = log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert!(msgs.contains(&"before prompt 1"), "{msgs:?}");
    // SessionStart tied the runtime's session to this one.
    let show = ws_json(m, &["session", "show", &m.session]).to_string();
    assert!(show.contains("\"runtime_session\""), "{show}");

    // Undo of the last tool call: the removed file is back, the edit stays.
    ws_ok(m, &["undo"]);
    assert_eq!(
        std::fs::read_to_string(m.p("gone.txt")).unwrap(),
        "keep me\n"
    );
    assert_eq!(std::fs::read_to_string(m.p("a.txt")).unwrap(), "two\n");

    // Before prompt 1: files and conversation.
    ws_ok(m, &["rewind", "--prompt", "1"]);
    assert_eq!(std::fs::read_to_string(m.p("a.txt")).unwrap(), "one\n");
    assert_eq!(
        std::fs::read_to_string(m.p("gone.txt")).unwrap(),
        "keep me\n"
    );
    assert_eq!(conversation(m), Vec::<(String, String)>::new());
}
