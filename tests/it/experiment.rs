//! `treefork experiment`: N commands in N forks of a real mount, ranked, recorded,
//! adopted; bad inputs (zero or too many runs, a run that cannot start, a timeout,
//! SIGTERM of the CLI, a daemon crash mid-experiment).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

/// `treefork --json experiment ARGS` run with its cwd at `dir` (inside the mount).
fn exp_in(m: &Mount, dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .arg("--json")
        .arg("experiment")
        .args(args)
        .current_dir(dir)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .expect("run treefork")
}

fn exp_ok(m: &Mount, args: &[&str]) -> Value {
    let o = exp_in(m, &m.mp, args);
    assert!(
        o.status.success(),
        "experiment {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn sessions(m: &Mount) -> Vec<String> {
    let v: Value = serde_json::from_str(&tf_ok(&m.store, &["--json", "sessions"])).unwrap();
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

fn run_of(doc: &Value, n: u64) -> &Value {
    doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run"] == n)
        .unwrap()
}

fn forks_dir(m: &Mount) -> PathBuf {
    m.tmp.path().join("mnt.experiments")
}

#[test]
fn three_runs_are_ranked_recorded_and_the_losers_removed() {
    let m = Mount::new();
    write_synced(&m.p("base.txt"), b"base\n");
    let doc = exp_ok(
        &m,
        &[
            "-c",
            "sleep 0.4; echo slow > out.txt",
            "-c",
            "echo fast > out.txt; echo done",
            "-c",
            "echo broken >&2; exit 3",
        ],
    );
    // Exit 0 first, then the shorter duration; the failure last.
    assert_eq!(doc["ranking"], serde_json::json!([2, 1, 3]), "{doc:#}");
    assert_eq!(doc["winner"], 2);
    assert_eq!(run_of(&doc, 3)["exit"], 3);
    assert_eq!(run_of(&doc, 3)["stderr"], "broken\n");
    assert_eq!(run_of(&doc, 2)["stdout"], "done\n");
    assert_eq!(run_of(&doc, 1)["files_changed"], 1);
    assert_eq!(run_of(&doc, 3)["files_changed"], 0);
    assert!(run_of(&doc, 1)["duration_ms"].as_u64().unwrap() >= 400);
    let stats = &doc["stats"];
    assert_eq!(stats["runs"], 3);
    assert!((stats["success_rate"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    // Pairwise: runs 1 and 2 both wrote out.txt, differently (hashes differ).
    let p12 = doc["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["a"] == 1 && p["b"] == 2)
        .unwrap();
    assert_eq!(p12["files"][0]["path"], "out.txt");
    assert_eq!(p12["files"][0]["type"], "modified");
    assert_ne!(p12["files"][0]["a_hash"], p12["files"][0]["b_hash"]);
    assert!(p12["stdout_diff"].as_str().unwrap().contains("+done"));
    let p23 = &doc["pairs"][2];
    assert_eq!(p23["exit_code_diff"], -3);
    // Only the winner's fork is left (unmounted, for adoption); the source is untouched.
    let id = doc["id"].as_str().unwrap();
    let names = sessions(&m);
    assert!(names.contains(&format!("s-x{id}-2")), "{names:?}");
    assert!(!names.contains(&format!("s-x{id}-1")), "{names:?}");
    assert!(!names.contains(&format!("s-x{id}-3")), "{names:?}");
    assert!(!m.p("out.txt").exists());
    assert!(!forks_dir(&m).exists(), "experiment directory left behind");
    // `show` prints the same record again.
    let shown: Value =
        serde_json::from_str(&ws_ok(&m, &["--json", "experiment", "show", id])).unwrap();
    assert_eq!(shown["ranking"], doc["ranking"]);
    assert_eq!(shown["pairs"], doc["pairs"]);
    assert_eq!(shown["op"], doc["op"]);
    let human = ws_ok(&m, &["experiment", "show", id]);
    assert!(human.contains("winner: run 2"), "{human}");
}

#[test]
fn env_form_runs_one_fork_per_value_and_keep_leaves_them_mounted() {
    let m = Mount::new();
    std::fs::create_dir(m.p("sub")).unwrap();
    let doc = exp_in(
        &m,
        &m.p("sub"),
        &[
            "--keep",
            "--command",
            "echo $K > here.txt; pwd",
            "--env",
            "K=A",
            "--env",
            "K=B",
        ],
    );
    assert!(
        doc.status.success(),
        "{}",
        String::from_utf8_lossy(&doc.stderr)
    );
    let doc: Value = serde_json::from_slice(&doc.stdout).unwrap();
    let id = doc["id"].as_str().unwrap();
    for (run, val) in [(1, "A"), (2, "B")] {
        let r = run_of(&doc, run);
        assert_eq!(r["label"], format!("K={val}"));
        let fork = format!("s-x{id}-{run}");
        // The cwd was the same relative place, seen at the workspace's own
        // path (the fork bound over it); what the run wrote is in the fork.
        let dir = forks_dir(&m).join(&fork);
        assert_eq!(
            r["stdout"].as_str().unwrap(),
            format!("{}\n", m.p("sub").display()),
            "{r:#}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("sub/here.txt")).unwrap(),
            format!("{val}\n")
        );
    }
    assert!(!m.p("sub/here.txt").exists());
    assert_eq!(doc["cleanup"]["kept"].as_array().unwrap().len(), 2);
    for run in 1..=2 {
        umount_ok(&m.store, &forks_dir(&m).join(format!("s-x{id}-{run}")));
    }
}

#[test]
fn score_ranks_by_the_number_printed_higher_wins() {
    let m = Mount::new();
    let doc = exp_ok(
        &m,
        &[
            "--score",
            "echo passed: $(cat n)",
            "-c",
            "echo 5 > n",
            "-c",
            "echo 42 > n",
            "-c",
            "echo 7 > n",
        ],
    );
    assert_eq!(doc["rank_by"], "score");
    assert_eq!(doc["ranking"], serde_json::json!([2, 3, 1]));
    assert_eq!(run_of(&doc, 2)["score"], 42.0);
}

#[test]
fn adopt_brings_the_winner_in_and_records_exact_views() {
    let m = Mount::new();
    write_synced(&m.p("a.txt"), b"old\n");
    let doc = exp_ok(
        &m,
        &[
            "-c",
            "echo new > a.txt; echo b > b.txt",
            "-c",
            "echo loser > c.txt; exit 1",
        ],
    );
    assert_eq!(doc["winner"], 1);
    let id = doc["id"].as_str().unwrap().to_string();
    // A pending change made after the experiment is saved before the adopt.
    write_synced(&m.p("pending.txt"), b"p\n");
    let out = ws_ok(&m, &["--json", "experiment", "adopt", "--winner"]);
    let adopted: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(std::fs::read_to_string(m.p("a.txt")).unwrap(), "new\n");
    assert_eq!(std::fs::read_to_string(m.p("b.txt")).unwrap(), "b\n");
    assert!(!m.p("pending.txt").exists());
    let saved = adopted["saved"]["checkpoint"].as_str().unwrap().to_string();
    // The adopted fork is gone.
    assert!(!sessions(&m).contains(&format!("s-x{id}-1")));
    // Undo reverts the adopt (the pending change comes back), redo reapplies it.
    ws_ok(&m, &["undo"]);
    assert_eq!(std::fs::read_to_string(m.p("a.txt")).unwrap(), "old\n");
    assert!(m.p("pending.txt").exists());
    assert!(!m.p("b.txt").exists());
    ws_ok(&m, &["redo"]);
    assert_eq!(std::fs::read_to_string(m.p("a.txt")).unwrap(), "new\n");
    assert!(!m.p("pending.txt").exists());
    // Adopting a removed loser is a clear error.
    let o = ws(&m, &["experiment", "adopt", "2", "--id", &id]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("its fork was removed"), "{err}");
    // ... and it says the truth about what still reads: the diff it names works.
    let loser = run_of(&doc, 2)["checkpoint"].as_str().unwrap().to_string();
    let short = &loser[..12];
    assert!(err.contains(&format!("`treefork diff {short}`")), "{err}");
    let shown = ws_ok(&m, &["show", short]);
    assert!(shown.contains(&loser), "{shown}");
    // The log (read offline) holds the experiment and the adopt with exact views.
    m.umount();
    let store = treefork::store::PackStore::open(&m.store).unwrap();
    let ops = treefork::oplog::list(&store, "s", 100).unwrap();
    let adopt = ops.iter().rev().find(|o| o.kind == "adopt").unwrap();
    let exp = ops.iter().find(|o| o.kind == "experiment").unwrap();
    assert!(exp.seq < adopt.seq);
    assert_eq!(exp.meta["id"], id.as_str());
    // The pending change was saved beside HEAD: the view before holds its tree.
    let saved_c = treefork::refs::load(
        &store,
        &treefork::id::CheckpointId::from_hex(&saved).unwrap(),
    )
    .unwrap();
    assert_eq!(adopt.before.workspace, saved_c.root);
    assert_eq!(saved_c.parents.first(), adopt.before.head.as_ref());
    assert_eq!(
        adopt.after.head.map(|h| h.to_hex()).as_deref(),
        run_of(&doc, 1)["checkpoint"].as_str()
    );
    assert_ne!(adopt.before.workspace, adopt.after.workspace);
    assert!(!adopt.inert, "an adopt must be undoable");
    drop(store);
    m.mount();
}

#[test]
fn zero_runs_and_too_many_runs_are_refused() {
    let m = Mount::new();
    let o = exp_in(&m, &m.mp, &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("at least one run"));
    ws_ok(&m, &["config", "experiment_max_runs=2"]);
    let o = exp_in(&m, &m.mp, &["-c", "true", "-c", "true", "-c", "true"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("at most 2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(sessions(&m), vec!["s".to_string()]);
}

#[test]
fn a_run_that_cannot_start_is_a_result_not_an_abort() {
    let m = Mount::new();
    ws_ok(&m, &["checkpoint", "-m", "before sub"]);
    std::fs::create_dir(m.p("sub")).unwrap();
    // From the checkpoint without `sub`, no fork has the caller's directory.
    let o = exp_in(
        &m,
        &m.p("sub"),
        &["--from", "HEAD", "-c", "true", "-c", "true"],
    );
    // Recorded and printed, but no run exited 0: no winner, exit status 1.
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        run_of(&doc, 1)["error"]
            .as_str()
            .unwrap()
            .contains("cannot run")
    );
    assert_eq!(doc["winner"], Value::Null);
    assert_eq!(doc["stats"]["success_rate"], 0.0);
}

#[test]
fn a_timeout_kills_the_run_and_its_children() {
    let m = Mount::new();
    let t0 = Instant::now();
    let doc = exp_ok(
        &m,
        &[
            "--timeout",
            "0.5",
            "-c",
            "sleep 31.25 & sleep 31.25",
            "-c",
            "true",
        ],
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(run_of(&doc, 1)["timed_out"], true);
    assert_eq!(doc["winner"], 2);
    assert!(!sleepers("31.25"), "a timed-out run left processes behind");
}

/// Whether a `sleep ARG` process is alive.
fn sleepers(arg: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", &format!("sleep {arg}")])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Start `experiment` with long runs and wait until its forks are mounted. The
/// child is returned to the caller, which waits for it.
#[allow(clippy::zombie_processes)]
fn start_long(m: &Mount, arg: &str) -> (std::process::Child, Vec<PathBuf>) {
    let cmd = format!("sleep {arg}");
    let child = Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .args(["experiment", "-c", &cmd, "-c", &cmd])
        .current_dir(&m.mp)
        .env_remove("TREEFORK_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        let forks: Vec<PathBuf> = std::fs::read_dir(forks_dir(m))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        if forks.len() == 2 && forks.iter().all(|f| is_mountpoint(f)) && sleepers(arg) {
            return (child, forks);
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            panic!("forks never mounted\n{}", daemon_log(&m.store));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is_mountpoint(p: &Path) -> bool {
    treefork::daemon::is_mountpoint(p)
}

#[test]
fn sigterm_of_the_cli_stops_every_run_and_removes_every_fork() {
    let m = Mount::new();
    let (child, _) = start_long(&m, "32.5");
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + libc::SIGTERM));
    assert!(String::from_utf8_lossy(&o.stderr).contains("interrupted"));
    assert!(!sleepers("32.5"));
    assert_eq!(sessions(&m), vec!["s".to_string()]);
    assert!(!forks_dir(&m).exists());
}

#[test]
fn forks_left_by_a_daemon_crash_are_listed_and_removable() {
    let m = Mount::new();
    let (mut child, forks) = start_long(&m, "33.75");
    m.kill_daemon();
    // The CLI stops its runs (by their process groups) and fails to end the
    // experiment: its daemon is gone.
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    assert!(!sleepers("33.75"));
    for f in &forks {
        treefork::daemon::detach(f);
    }
    treefork::daemon::detach(&m.mp);
    m.mount();
    let names = sessions(&m);
    let left: Vec<&String> = names.iter().filter(|n| n.starts_with("s-x")).collect();
    assert_eq!(left.len(), 2, "{names:?}");
    for n in left {
        tf_ok(&m.store, &["session", "rm", n]);
    }
    assert_eq!(sessions(&m), vec!["s".to_string()]);
}

/// Issue 23, defect 3: runs that all failed have no winner, the command fails,
/// and `adopt --winner` has nothing to adopt; a tie is decided by the lower run
/// number and the answer says so.
#[test]
fn when_every_run_fails_there_is_no_winner_and_the_command_fails() {
    let m = Mount::new();
    ws_ok(&m, &["checkpoint", "-m", "base"]);
    let o = exp_in(&m, &m.mp, &["-c", "exit 3", "-c", "false"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["winner"], Value::Null, "{doc}");
    assert_eq!(doc["decided_by"], Value::Null, "{doc}");
    assert_eq!(run_of(&doc, 1)["exit"], 3);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no run exited 0"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let a = ws(&m, &["--json", "experiment", "adopt", "--winner"]);
    assert_eq!(
        a.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&a.stdout)
    );
    // The human form says it too.
    let o = Command::new(bin())
        .args([
            "--store",
            m.store.to_str().unwrap(),
            "experiment",
            "-c",
            "false",
        ])
        .current_dir(&m.mp)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no winner: no run exited 0"));

    // A failed fast run never wins by duration; a tie goes to the lower run.
    let doc = exp_ok(
        &m,
        &["--rank-by", "duration", "-c", "false", "-c", "sleep 0.2"],
    );
    assert_eq!(doc["winner"], 2, "{doc}");
    assert!(
        doc["decided_by"]
            .as_str()
            .unwrap()
            .contains("only run that exited 0"),
        "{doc}"
    );
    let doc = exp_ok(&m, &["--rank-by", "exit", "-c", "true", "-c", "true"]);
    assert_eq!(doc["winner"], 1, "{doc}");
    let why = doc["decided_by"].as_str().unwrap();
    assert!(
        why.contains("tie") && why.contains("lower run number"),
        "{why}"
    );
}

/// FILES counts what a run itself changed; what its score command wrote (build
/// output) is reported apart; a kept fork says where it is and how to look at it
/// (issue 27, points 3 and 4).
#[test]
fn files_count_the_run_not_its_score_and_kept_forks_say_how_to_look() {
    let m = Mount::new();
    write_synced(&m.p("src.txt"), b"slow\n");
    ws_ok(&m, &["checkpoint", "-m", "base"]);
    let score = "mkdir -p target && for i in 1 2 3 4 5; do echo x > target/o$i; done; echo 1";
    let d = exp_ok(
        &m,
        &[
            "-c",
            "sed -i s/slow/fast/ src.txt",
            "-c",
            "true",
            "--score",
            score,
        ],
    );
    let one = run_of(&d, 1);
    assert_eq!(one["files_changed"], 1, "{d}");
    // target/ and its five files.
    assert_eq!(one["score_files_changed"], 6, "{d}");
    assert_eq!(run_of(&d, 2)["files_changed"], 0, "{d}");
    // The human form of the same: a line for the score's writes, the kept winner.
    let o = Command::new(bin())
        .args(["--store", m.store.to_str().unwrap(), "experiment", "show"])
        .current_dir(&m.mp)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        shown.contains("the score command changed 6 more path(s)"),
        "{shown}"
    );
    assert!(
        shown.contains("decided by:"),
        "a tie on score says which rule decided: {shown}"
    );
    let o = Command::new(bin())
        .args([
            "--store",
            m.store.to_str().unwrap(),
            "experiment",
            "-c",
            "true",
            "-c",
            "true",
            "--keep",
        ])
        .current_dir(&m.mp)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains("kept, mounted at "), "{out}");
    let o = Command::new(bin())
        .args([
            "--store",
            m.store.to_str().unwrap(),
            "experiment",
            "-c",
            "true",
            "-c",
            "false",
        ])
        .current_dir(&m.mp)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("kept, not mounted: `treefork mount DIR --session "),
        "{out}"
    );
}

/// The fork of a winner never adopted goes with its source session: removed by
/// `session discard` and `session rm` of the source (issue 25 rough edge).
#[test]
fn an_unadopted_winner_goes_with_its_source() {
    let m = Mount::new();
    let fork_of = |doc: &Value| format!("s-x{}-1", doc["id"].as_str().unwrap());
    let doc = exp_ok(&m, &["-c", "echo a > out.txt", "-c", "exit 1"]);
    assert_eq!(doc["winner"], 1, "{doc:#}");
    let fork = fork_of(&doc);
    assert!(sessions(&m).contains(&fork));
    let v: Value =
        serde_json::from_str(&tf_ok(&m.store, &["--json", "session", "discard", "s"])).unwrap();
    assert_eq!(v["forks_removed"], serde_json::json!([fork]), "{v}");
    assert!(!sessions(&m).contains(&fork), "{:?}", sessions(&m));
    // Resumed, another experiment, then `session rm`: its fork goes too.
    m.mount();
    let doc = exp_ok(&m, &["-c", "echo b > out.txt", "-c", "exit 1"]);
    let fork = fork_of(&doc);
    assert!(sessions(&m).contains(&fork));
    m.umount();
    let out = tf_ok(&m.store, &["session", "rm", "s"]);
    assert!(
        out.contains(&format!("removed its experiment fork {fork}")),
        "{out}"
    );
    assert!(sessions(&m).is_empty(), "{:?}", sessions(&m));
}

/// The sweep that expires a source removes its experiment forks with it.
#[test]
fn the_sweep_removes_forks_of_an_expired_source() {
    let m = Mount::with_options("s", &["--ttl-idle", "2s"]);
    // A manual session keeps the daemon up and is never swept.
    let mp2 = m.tmp.path().join("manual");
    std::fs::create_dir(&mp2).unwrap();
    tf_ok(
        &m.store,
        &[
            "mount",
            mp2.to_str().unwrap(),
            "--session",
            "keep",
            "--manual",
        ],
    );
    let doc = exp_ok(&m, &["-c", "echo a > out.txt", "-c", "exit 1"]);
    let fork = format!("s-x{}-1", doc["id"].as_str().unwrap());
    assert!(sessions(&m).contains(&fork));
    std::thread::sleep(Duration::from_secs(4));
    let v: Value = serde_json::from_str(&tf_ok(&m.store, &["--json", "session", "sweep"])).unwrap();
    assert_eq!(v["evicted"][0]["session"], "s", "{v}");
    assert_eq!(v["forks_removed"][0]["session"], fork.as_str(), "{v}");
    assert!(
        v["forks_removed"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{v}"
    );
    let names = sessions(&m);
    assert!(
        !names.contains(&fork) && names.contains(&"s".to_string()),
        "{names:?}"
    );
    tf_ok(&m.store, &["umount", mp2.to_str().unwrap()]);
}
