//! `treefork exec` and `treefork history` on real mounts through the real socket and
//! CLI: output passthrough and capture, exit status and signals, truncation, a
//! missing program, changed paths and the exec checkpoint, writers outside the
//! command, background writers, timeouts, abandoned execs, and the command-count
//! and git-commit triggers.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use treefork::ops::exec::b64_decode;

use crate::harness::{Mount, bin, daemon_log, pattern, ws, ws_ok};

/// `treefork -C MP exec ARGS...` run with its cwd at `cwd`.
fn exec_in(m: &Mount, cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .arg("-C")
        .arg(&m.mp)
        .arg("exec")
        .args(args)
        .current_dir(cwd)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .expect("run treefork exec")
}

fn exec(m: &Mount, args: &[&str]) -> Output {
    exec_in(m, m.tmp.path(), args)
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// `history show N --json`.
fn show(m: &Mount, n: u64) -> Value {
    json(&ws_ok(m, &["--json", "history", "show", &n.to_string()]))
}

fn meta(v: &Value) -> &Value {
    &v["record"]["meta"]["exec"]
}

fn output_of(v: &Value, stream: &str) -> Vec<u8> {
    b64_decode(v[stream].as_str().unwrap()).unwrap()
}

fn checkpoints(m: &Mount) -> Vec<Value> {
    json(&ws_ok(m, &["--json", "log", "--limit", "100"]))["checkpoints"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn output_passes_through_and_is_captured_byte_for_byte() {
    let m = Mount::new();
    let data = pattern(200_000, 7);
    std::fs::write(m.p("blob"), &data).unwrap();
    let o = exec(&m, &["sh", "-c", "cat blob; printf 'e\\000rr' >&2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, data, "stdout passes through unchanged");
    assert_eq!(o.stderr, b"e\0rr");
    let v = show(&m, 1);
    assert_eq!(
        output_of(&v, "stdout"),
        data,
        "the record holds the same bytes"
    );
    assert_eq!(output_of(&v, "stderr"), b"e\0rr");
    assert_eq!(meta(&v)["stdout_truncated"], false);
    assert_eq!(meta(&v)["exit"], 0);
    assert_eq!(meta(&v)["cwd"], "", "run from outside the mount: the root");
    // From a directory inside the workspace, that directory is the cwd.
    std::fs::create_dir(m.p("sub")).unwrap();
    let o = exec_in(&m, &m.p("sub"), &["pwd"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        m.p("sub").to_str().unwrap()
    );
    assert_eq!(meta(&show(&m, 2))["cwd"], "sub");
}

#[test]
fn exit_status_signal_truncation_and_missing_program() {
    let m = Mount::new();
    let o = exec(&m, &["sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(meta(&show(&m, 1))["exit"], 7);

    let o = exec(&m, &["sh", "-c", "kill -KILL $$"]);
    assert_eq!(o.status.code(), Some(128 + 9));
    let v = show(&m, 2);
    assert_eq!(meta(&v)["signal"], 9);
    assert_eq!(meta(&v)["exit"], Value::Null);

    let o = exec(
        &m,
        &["--capture-limit", "1000", "head", "-c", "5000", "/dev/zero"],
    );
    assert!(o.status.success());
    assert_eq!(o.stdout.len(), 5000, "passthrough is not cut");
    let v = show(&m, 3);
    assert_eq!(output_of(&v, "stdout").len(), 1000);
    assert_eq!(meta(&v)["stdout_truncated"], true);
    assert_eq!(meta(&v)["stderr_truncated"], false);

    let o = exec(&m, &["no-such-program-xyz", "arg"]);
    assert_eq!(o.status.code(), Some(127));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot run no-such-program-xyz"),
        "clear error: {err}"
    );
    let v = show(&m, 4);
    assert!(
        meta(&v)["error"]
            .as_str()
            .unwrap()
            .contains("no-such-program-xyz")
    );
    assert_eq!(
        meta(&v)["argv"],
        serde_json::json!(["no-such-program-xyz", "arg"])
    );
    // Arguments that look like options belong to the command.
    let o = exec(&m, &["echo", "-n", "--json", "x"]);
    assert_eq!(o.stdout, b"--json x");
}

#[test]
fn changed_paths_and_the_exec_checkpoint() {
    let m = Mount::new();
    std::fs::write(m.p("keep"), b"k").unwrap();
    std::fs::write(m.p("old"), b"o").unwrap();
    std::fs::write(m.p("mod"), b"1").unwrap();
    // Pending changes are saved first: the before state is a checkpoint.
    let o = exec(
        &m,
        &[
            "--explanation",
            "rework files",
            "sh",
            "-c",
            "rm old; echo 2 > mod; mkdir d; echo n > d/new",
        ],
    );
    assert!(o.status.success());
    let v = show(&m, 1);
    let e = meta(&v);
    let changed: Vec<(String, String)> = e["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["change"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        ("d", "added"),
        ("d/new", "added"),
        ("mod", "modified"),
        ("old", "deleted"),
    ];
    assert_eq!(
        changed,
        want.map(|(p, c)| (p.to_string(), c.to_string())).to_vec()
    );
    assert_eq!(e["changed_count"], 4);
    assert_eq!(e["may_include_others"], false, "{e}");
    assert_eq!(v["record"]["explanation"], "rework files");
    assert_eq!(v["record"]["kind"], "exec");
    // The after checkpoint: trigger exec, parent the before checkpoint, and the
    // record's views name exactly those states.
    let log = checkpoints(&m);
    assert_eq!(log[0]["id"], e["after"]);
    assert_eq!(log[0]["trigger"], "exec");
    assert_eq!(log[0]["parents"], serde_json::json!([e["before"]]));
    assert_eq!(log[1]["id"], e["before"]);
    assert_eq!(log[1]["trigger"], "before-exec");
    assert_eq!(v["record"]["before"]["head"], e["before"]);
    assert_eq!(v["record"]["after"]["head"], e["after"]);
    assert_eq!(v["record"]["after"]["workspace"], log[0]["root"]);
    assert_eq!(v["record"]["before"]["workspace"], log[1]["root"]);
    // `history diff N` shows what the command changed.
    let d = ws_ok(&m, &["history", "diff", "1"]);
    assert_eq!(d, "A\td\nA\td/new\nM\tmod\nD\told\n");

    // A command that changes nothing makes no checkpoint (and, with nothing
    // pending, no before checkpoint either).
    let before = checkpoints(&m).len();
    assert!(exec(&m, &["ls"]).status.success());
    assert_eq!(checkpoints(&m).len(), before, "no checkpoint for no change");
    let e2 = show(&m, 2);
    assert_eq!(meta(&e2)["after"], Value::Null);
    assert_eq!(meta(&e2)["changed_count"], 0);
    assert_eq!(meta(&e2)["before"], e["after"]);

    // history: newest first, -n bounds it.
    let h = json(&ws_ok(&m, &["--json", "history"]));
    let ns: Vec<u64> = h["execs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["n"].as_u64().unwrap())
        .collect();
    assert_eq!(ns, [2, 1]);
    let h = json(&ws_ok(&m, &["--json", "history", "-n", "1"]));
    assert_eq!(h["execs"].as_array().unwrap().len(), 1);
    let people = ws_ok(&m, &["history"]);
    assert!(
        people.contains("ls") && people.contains("sh -c 'rm old; echo 2 > mod;"),
        "{people}"
    );
    let people = ws_ok(&m, &["history", "show", "1"]);
    assert!(
        people.contains("D old") && people.contains("rework files"),
        "{people}"
    );
    // An unknown exec number is a clear error.
    let o = ws(&m, &["history", "show", "99"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no exec 99"));
}

#[test]
fn background_writes_after_the_command_belong_to_the_next_operation() {
    let m = Mount::new();
    let o = exec(
        &m,
        &["sh", "-c", "echo now > fg; (sleep 0.5; echo late > bg) &"],
    );
    assert!(o.status.success());
    let e = meta(&show(&m, 1)).clone();
    assert_eq!(e["changed_count"], 1, "only the foreground write: {e}");
    assert_eq!(e["changed"][0]["path"], "fg");
    // The late write lands after the record: it is pending, then saved as the
    // next exec's before state.
    let t0 = Instant::now();
    while !m.p("bg").exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "bg never written");
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = ws_ok(&m, &["status"]);
    assert!(st.contains("bg"), "pending: {st}");
    assert!(exec(&m, &["true"]).status.success());
    let e2 = meta(&show(&m, 2)).clone();
    assert_eq!(e2["changed_count"], 0);
    assert_ne!(e2["before"], e["after"], "the late write was saved first");
}

#[test]
fn outside_writers_are_flagged() {
    let m = Mount::new();
    // The command's own children (a pipeline, a subshell) are not others, nor are
    // the kernel's writeback of their data to existing files.
    std::fs::write(m.p("existing"), pattern(300_000, 1)).unwrap();
    let o = exec(
        &m,
        &[
            "sh",
            "-c",
            "(echo a > a; cat a | tee b > /dev/null); echo more >> existing; \
             dd if=/dev/zero of=existing bs=4096 count=8 conv=notrunc status=none",
        ],
    );
    assert!(o.status.success());
    let e = meta(&show(&m, 1)).clone();
    assert_eq!(e["may_include_others"], false, "{e}");
    assert_eq!(e["changed_count"], 3);

    // A process outside the command writes while it runs.
    let mut cmd = Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .args(["-C", m.mp.to_str().unwrap(), "exec", "sh", "-c"])
        .arg("echo mine > mine; sleep 1.5")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !m.p("mine").exists() {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    let outsider = Command::new("sh")
        .arg("-c")
        .arg(format!("echo theirs > {}/theirs", m.mp.display()))
        .status()
        .unwrap();
    assert!(outsider.success());
    assert!(cmd.wait().unwrap().success());
    let e = meta(&show(&m, 2)).clone();
    assert_eq!(
        e["may_include_others"],
        true,
        "{e}\n{}",
        daemon_log(&m.store)
    );
    let comms: Vec<&str> = e["others"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["comm"].as_str().unwrap())
        .collect();
    assert!(comms.contains(&"sh"), "{comms:?}");
    assert_eq!(e["changed_count"], 2, "both writes are in the change set");
}

#[test]
fn timeout_stops_the_whole_process_group() {
    let m = Mount::new();
    let t0 = Instant::now();
    let o = exec(
        &m,
        &[
            "--timeout",
            "0.5",
            "sh",
            "-c",
            "sleep 30 & echo $! > bgpid; sleep 30",
        ],
    );
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(o.status.code(), Some(128 + libc::SIGTERM));
    let e = meta(&show(&m, 1)).clone();
    assert_eq!(e["timed_out"], true);
    assert_eq!(e["signal"], libc::SIGTERM);
    let bg: i32 = std::fs::read_to_string(m.p("bgpid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let state = std::fs::read_to_string(format!("/proc/{bg}/stat")).unwrap_or_default();
    assert!(
        state.is_empty() || state.contains(") Z"),
        "background sleep {bg} survived: {state}"
    );
}

#[test]
fn an_exec_whose_client_died_is_finalized_as_abandoned() {
    let m = Mount::new();
    let mut cli = Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .args(["-C", m.mp.to_str().unwrap(), "exec", "sh", "-c"])
        .arg("echo x > during; sleep 0.3")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !m.p("during").exists() {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    cli.kill().unwrap();
    cli.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // The next exec finalizes exec 1 before it begins.
    assert!(exec(&m, &["true"]).status.success());
    let e = meta(&show(&m, 1)).clone();
    assert_eq!(e["abandoned"], true, "{e}");
    assert_eq!(e["changed_count"], 1);
    assert_eq!(meta(&show(&m, 2))["n"], 2);
    // A running exec with a live client is not taken over.
    let mut long = Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .args(["-C", m.mp.to_str().unwrap(), "exec", "sh", "-c"])
        .arg("echo x > started; sleep 2")
        .spawn()
        .unwrap();
    // The command runs only once its exec has begun.
    let t0 = Instant::now();
    while !m.p("started").exists() {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    // A second command meanwhile runs, unrecorded on its own (the running
    // exec's record holds its changes), and says so.
    let o = exec(&m, &["sh", "-c", "echo y > second"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("not recorded on its own") && err.contains("still running"),
        "{err}"
    );
    assert!(m.p("second").exists());
    assert!(long.wait().unwrap().success());
    let h = json(&ws_ok(&m, &["--json", "history"]));
    assert_eq!(h["execs"].as_array().unwrap().len(), 3, "{h}");
    let third = meta(&show(&m, 3)).clone();
    let changed: Vec<&str> = third["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert!(changed.contains(&"second"), "{third}");
}

#[test]
fn command_count_trigger_checkpoints_what_changed_outside_commands() {
    let m = Mount::new();
    ws_ok(
        &m,
        &[
            "config",
            "auto_checkpoint_commands=2",
            "auto_checkpoint_min_interval_secs=0",
        ],
    );
    let autos = |m: &Mount| {
        checkpoints(m)
            .iter()
            .filter(|c| c["trigger"] == "auto")
            .count()
    };
    // One command, then a write outside any command: below the count, nothing.
    assert!(exec(&m, &["true"]).status.success());
    std::fs::write(m.p("outside1"), b"1").unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(autos(&m), 0);
    // The second command (its before save takes outside1); a background write
    // it leaves lands after it: the count is reached, an automatic checkpoint.
    let o = exec(
        &m,
        &["sh", "-c", "(sleep 0.3; echo l > late) > /dev/null 2>&1 &"],
    );
    assert!(o.status.success());
    let t0 = Instant::now();
    while autos(&m) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no automatic checkpoint\n{}",
            daemon_log(&m.store)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let newest = &checkpoints(&m)[0];
    assert_eq!(newest["trigger"], "auto");
    assert!(ws_ok(&m, &["status"]).trim().is_empty());
}

#[test]
fn git_commit_in_the_workspace_makes_a_checkpoint() {
    let m = Mount::new();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(&m.mp)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
    };
    let commits = |m: &Mount| {
        checkpoints(m)
            .iter()
            .filter(|c| c["trigger"] == "git-commit")
            .count()
    };
    // The daemon takes its baseline look within 50 ms of the mount; a commit
    // before that would be the baseline itself.
    std::thread::sleep(Duration::from_millis(300));
    git(&["init", "-q"]);
    std::fs::write(m.p("a"), b"1").unwrap();
    git(&["add", "a"]);
    git(&["commit", "-qm", "one"]);
    let wait_for = |n: usize| {
        let t0 = Instant::now();
        while commits(&m) < n {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "no git-commit checkpoint\n{}",
                daemon_log(&m.store)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for(1);
    std::fs::write(m.p("a"), b"2").unwrap();
    git(&["commit", "-qam", "two"]);
    wait_for(2);
    // Writes without a commit do not trigger it.
    std::fs::write(m.p("b"), b"x").unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(commits(&m), 2);
    let c = &checkpoints(&m)[0];
    assert!(c["message"].as_str().unwrap().starts_with("git commit "));
}

#[test]
fn agent_socket_may_exec_and_unmount_finalizes_a_running_exec() {
    let dir = tempfile::Builder::new()
        .prefix("tf-agent-")
        .tempdir()
        .unwrap();
    let sock = dir.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    std::fs::create_dir(m.p("w")).unwrap();
    // Through the agent socket (what an agent runtime sets), from inside the mount.
    let o = Command::new(bin())
        .args([
            "exec",
            "--explanation",
            "agent step",
            "sh",
            "-c",
            "echo a > made",
        ])
        .env("TREEFORK_SOCKET", &sock)
        .env_remove("TREEFORK_STORE")
        .current_dir(m.p("w"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = show(&m, 1);
    assert_eq!(v["record"]["actor"]["role"], "agent");
    assert_eq!(meta(&v)["cwd"], "w");
    assert_eq!(meta(&v)["changed"][0]["path"], "w/made");

    // A command still running when the workspace is unmounted (it left the mount,
    // so the unmount succeeds) is recorded as abandoned; its own end is refused
    // with a warning and treefork exec still exits with the command's status.
    let long = Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .args(["-C", m.mp.to_str().unwrap(), "exec", "sh", "-c"])
        .arg("echo x > late; cd /; sleep 1.5; exit 4")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !m.p("late").exists() {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    crate::harness::umount_ok(&m.store, &m.mp);
    let out = long.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("was not recorded"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    m.mount();
    let e = meta(&show(&m, 2)).clone();
    assert_eq!(e["abandoned"], true, "{e}");
    assert_eq!(e["changed"][0]["path"], "late");
    // Numbering continues after the remount.
    assert!(exec(&m, &["true"]).status.success());
    assert_eq!(meta(&show(&m, 3))["n"], 3);
}

/// The value of `NAME = EXPR` in Python source, where EXPR is an integer or
/// `A << B` (how the client writes its limits).
fn python_int(src: &str, name: &str) -> Option<usize> {
    let line = src
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix('='))?;
    let int = |s: &str| s.trim().replace('_', "").parse::<usize>().ok();
    match line.split_once("<<") {
        Some((a, b)) => Some(int(a)? << int(b)?),
        None => int(line),
    }
}

#[test]
fn python_client_capture_cap_is_the_daemons() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python/src/treefork/execution.py");
    let src = std::fs::read_to_string(&path).expect("read the Python client");
    assert_eq!(
        python_int(&src, "MAX_CAPTURE_LIMIT"),
        Some(treefork::ops::exec::MAX_CAPTURE),
        "{}: MAX_CAPTURE_LIMIT must equal treefork::ops::exec::MAX_CAPTURE",
        path.display()
    );
}

#[test]
fn cli_capture_limit_is_bounded_by_the_daemons_cap() {
    let over = (treefork::ops::exec::MAX_CAPTURE + 1).to_string();
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(bin())
        .args(["exec", "--capture-limit", &over, "true"])
        .current_dir(tmp.path())
        .env_remove("TREEFORK_SOCKET")
        .output()
        .expect("run treefork exec");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let want = format!(
        "expected at most {} bytes",
        treefork::ops::exec::MAX_CAPTURE
    );
    assert!(err.contains(&want), "{err}");
}

/// Issue 27, point 5: `history show` says where the command ran in plain words,
/// and past 50 changed paths counts them per top directory (the JSON keeps all).
#[test]
fn history_show_says_the_directory_and_summarises_many_paths() {
    let m = Mount::new();
    std::fs::create_dir(m.p("sub")).unwrap();
    let script = "mkdir -p ../build && for i in $(seq 60); do echo $i > ../build/o$i; done; echo x > edit.txt";
    let o = exec_in(&m, &m.p("sub"), &["--", "sh", "-c", script]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let human = ws_ok(&m, &["history", "show", "1"]);
    assert!(
        human.contains("cwd:      sub/ (in the workspace)"),
        "{human}"
    );
    // 60 files and their new directory, and the edit.
    assert!(human.contains("changed:  62"), "{human}");
    assert!(human.contains("  build/  61 path(s)"), "{human}");
    assert!(human.contains("  sub/  1 path(s)"), "{human}");
    assert!(!human.contains("build/o17"), "{human}");
    let v = show(&m, 1);
    assert_eq!(meta(&v)["changed"].as_array().unwrap().len(), 62, "{v}");
    // Few paths, run at the root: listed one by one.
    let o = exec(&m, &["--", "sh", "-c", "echo y > one.txt"]);
    assert!(o.status.success());
    let human = ws_ok(&m, &["history", "show", "2"]);
    assert!(human.contains("cwd:      the workspace root"), "{human}");
    assert!(human.contains("one.txt"), "{human}");
}
