//! `treefork bisect run`: a real mount with twenty checkpoints where the command
//! starts failing at the fourteenth (`cp 13`); found with one job and with four,
//! no fork session, mountpoint or directory left afterwards; the command failing
//! already at the good end is a wrong range (exit 12); passing at the bad end is an error; a timeout counts
//! as a failure, a program that cannot start is an error; `--keep`; SIGINT of the
//! CLI removes every fork. The verbs: one `bisect` record per bisect, a bisect on
//! an agent socket, `bisect_end` removing only its bisect's forks and checking
//! the result it records (once).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

/// The checkpoint where `grep -q good f` starts failing.
const FIRST_BAD: usize = 13;

/// `treefork [--json] bisect run ARGS` with its cwd at `dir` (inside the mount).
fn bisect_in(m: &Mount, dir: &Path, json: bool, args: &[&str]) -> Output {
    let mut c = Command::new(bin());
    c.arg("--store").arg(&m.store);
    if json {
        c.arg("--json");
    }
    c.args(["bisect", "run"])
        .args(args)
        .current_dir(dir)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .expect("run treefork")
}

fn bisect_ok(m: &Mount, args: &[&str]) -> Value {
    let o = bisect_in(m, &m.mp, true, args);
    assert!(
        o.status.success(),
        "bisect {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Twenty checkpoints `cp 0`..`cp 19`; `f` holds `good N` before `FIRST_BAD`,
/// `bad N` from it on (and `sub/g` the same, for the cwd test). Their ids, oldest
/// first.
fn twenty(m: &Mount) -> Vec<String> {
    (0..20)
        .map(|i| {
            let word = if i < FIRST_BAD { "good" } else { "bad" };
            write_synced(&m.p("f"), format!("{word} {i}\n").as_bytes());
            write_synced(&m.p("sub/g"), format!("{word} {i}\n").as_bytes());
            let v: Value = serde_json::from_str(&ws_ok(
                m,
                &["--json", "checkpoint", "-m", &format!("cp {i}")],
            ))
            .unwrap();
            v["checkpoint"]["id"].as_str().unwrap().to_string()
        })
        .collect()
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

fn forks_dir(m: &Mount) -> PathBuf {
    m.tmp.path().join("mnt.bisect")
}

/// Nothing of any bisect is left: only the source session, no fork directory,
/// no mount but the workspace's.
fn assert_clean(m: &Mount) {
    assert_eq!(sessions(m), vec!["s".to_string()]);
    assert!(!forks_dir(m).exists(), "fork directory left behind");
    assert_eq!(fuse_mounts_under(m.tmp.path()), vec![m.mp.clone()]);
}

/// The smallest `r` with `base^r >= len`.
fn ceil_log(base: usize, len: usize) -> usize {
    let (mut r, mut p) = (0, 1);
    while p < len {
        p *= base;
        r += 1;
    }
    r
}

#[test]
fn finds_the_first_bad_checkpoint_with_one_job_and_with_four() {
    let m = Mount::new();
    let ids = twenty(&m);
    let head_before = ws_ok(&m, &["--json", "status"]);
    for jobs in ["1", "4"] {
        let doc = bisect_ok(
            &m,
            &[
                "--good", &ids[0], "-j", jobs, "--", "grep", "-q", "good", "f",
            ],
        );
        assert_eq!(doc["first_bad"]["id"], ids[FIRST_BAD], "{doc:#}");
        assert_eq!(doc["first_bad"]["message"], "cp 13");
        assert_eq!(doc["last_good"]["id"], ids[FIRST_BAD - 1]);
        assert_eq!(doc["candidates"], 20);
        let n: usize = jobs.parse().unwrap();
        let rounds = doc["rounds"].as_u64().unwrap() as usize;
        assert!(rounds <= ceil_log(n + 1, 20) + 1, "{doc:#}");
        let steps = doc["steps"].as_array().unwrap();
        assert!(steps.iter().all(|s| s["duration_ms"].is_u64()));
        // The bounds first: the good end passed, the bad end failed.
        assert_eq!(steps[0]["checkpoint"], ids[0]);
        assert_eq!(steps[0]["exit"], 0);
        let bad_end = steps.iter().find(|s| s["checkpoint"] == ids[19]).unwrap();
        assert_eq!(bad_end["exit"], 1);
        assert_eq!(bad_end["round"], 1);
        assert_clean(&m);
    }
    // The session did not move.
    let now = ws_ok(&m, &["--json", "status"]);
    let head = |s: &str| serde_json::from_str::<Value>(s).unwrap()["head"].clone();
    assert_eq!(head(&now), head(&head_before));
    // The human form: one row per step, then the answer.
    let o = bisect_in(
        &m,
        &m.mp,
        false,
        &["-j", "2", "--good", &ids[0], "grep", "-q", "good", "f"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains(&format!("first bad: {} cp 13", ids[FIRST_BAD])),
        "{text}"
    );
    assert!(text.contains("last good: "), "{text}");
    assert!(
        text.lines().last().unwrap().contains(" steps in "),
        "{text}"
    );
    assert_clean(&m);
}

#[test]
fn default_bounds_and_the_callers_place() {
    let m = Mount::new();
    let ids = twenty(&m);
    // From sub/, the command looks at sub/g in each fork; good defaults to the
    // oldest checkpoint of HEAD's first parents, bad to HEAD.
    let o = bisect_in(
        &m,
        &m.p("sub"),
        true,
        &["-j", "3", "grep", "-q", "good", "g"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["first_bad"]["id"], ids[FIRST_BAD], "{doc:#}");
    assert_eq!(doc["bad"]["id"], ids[19]);
    assert_clean(&m);
}

#[test]
fn a_good_end_that_fails_is_a_wrong_range() {
    let m = Mount::new();
    let ids = twenty(&m);
    let before = op_kinds(&m);
    for json in [false, true] {
        let o = bisect_in(
            &m,
            &m.mp,
            json,
            &["--good", &ids[15], "-j", "2", "grep", "-q", "good", "f"],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        let out = String::from_utf8_lossy(&o.stdout);
        // A distinct status (not 0, not the 1 of "passes at the bad end").
        assert_eq!(o.status.code(), Some(12), "{err}{out}");
        let text = if json {
            out.to_string()
        } else {
            err.to_string()
        };
        assert!(text.contains("already fails at the good end"), "{text}");
        assert!(text.contains("the range is wrong"), "{text}");
        assert!(
            text.contains("--good") && text.contains("treefork log"),
            "{text}"
        );
        assert!(!out.contains("first bad:"), "{out}");
        if json {
            let v: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["ok"], false, "{v:#}");
            assert_eq!(v["error"]["code"], "good_end_fails", "{v:#}");
        }
        assert_clean(&m);
    }
    // Nothing recorded as a found culprit: no `bisect` operation at all.
    assert_eq!(op_kinds(&m), before);
}

#[test]
fn passing_at_the_bad_end_is_an_error() {
    let m = Mount::new();
    let ids = twenty(&m);
    let o = bisect_in(
        &m,
        &m.mp,
        false,
        &[
            "--good", &ids[2], "--bad", &ids[10], "-j", "4", "grep", "-q", "good", "f",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("passes at the bad end"), "{err}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("nothing to find"), "{text}");
    assert_clean(&m);
    // A good end that is not on the bad end's first parents is refused.
    let o = bisect_in(
        &m,
        &m.mp,
        false,
        &["--good", &ids[12], "--bad", &ids[3], "true"],
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_clean(&m);
}

#[test]
fn keep_leaves_the_forks_mounted() {
    let m = Mount::new();
    let ids = twenty(&m);
    let doc = bisect_ok(
        &m,
        &[
            "--keep", "--good", &ids[10], "--bad", &ids[16], "-j", "2", "grep", "-q", "good", "f",
        ],
    );
    assert_eq!(doc["first_bad"]["id"], ids[FIRST_BAD]);
    let kept: Vec<PathBuf> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| PathBuf::from(s["kept_at"].as_str().unwrap()))
        .collect();
    for (s, mp) in doc["steps"].as_array().unwrap().iter().zip(&kept) {
        let fork = s["fork"].as_str().unwrap();
        assert!(sessions(&m).contains(&fork.to_string()));
        let want = if s["exit"] == 0 { "good" } else { "bad" };
        let f = std::fs::read_to_string(mp.join("f")).unwrap();
        assert!(f.starts_with(want), "{fork}: {f}");
        umount_ok(&m.store, mp);
        tf_ok(&m.store, &["session", "rm", fork]);
        std::fs::remove_dir(mp).unwrap();
    }
    std::fs::remove_dir(forks_dir(&m)).unwrap();
    assert_clean(&m);
}

#[test]
fn a_timeout_is_a_failure_and_a_command_that_cannot_start_an_error() {
    let m = Mount::new();
    let ids = twenty(&m);
    // The bad checkpoints hang instead of failing: the timeout stops them.
    let doc = bisect_ok(
        &m,
        &[
            "--timeout",
            "0.5",
            "-j",
            "4",
            "--good",
            &ids[0],
            "sh",
            "-c",
            "grep -q good f || sleep 38.375",
        ],
    );
    assert_eq!(doc["first_bad"]["id"], ids[FIRST_BAD], "{doc:#}");
    let bad_end = &doc["steps"].as_array().unwrap()[3];
    assert_eq!(bad_end["checkpoint"], ids[19], "{doc:#}");
    assert_eq!(bad_end["timed_out"], true);
    assert!(!sleepers("38.375"));
    assert_clean(&m);
    // No verdict from a program that does not exist: an error, nothing left.
    let o = bisect_in(&m, &m.mp, false, &["-j", "2", "no-such-program-7f3a"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("could not start"), "{err}");
    assert_clean(&m);
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

#[test]
fn sigint_of_the_cli_stops_the_runs_and_removes_every_fork() {
    let m = Mount::new();
    let ids = twenty(&m);
    let child = Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .args(["bisect", "run", "-j", "3", "--good", &ids[0]])
        .args(["sh", "-c", "sleep 37.125; grep -q good f"])
        .current_dir(&m.mp)
        .env_remove("TREEFORK_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !sleepers("37.125") {
        assert!(t0.elapsed() < Duration::from_secs(20), "no run started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + libc::SIGINT));
    assert!(String::from_utf8_lossy(&o.stderr).contains("interrupted"));
    let ps = || {
        let o = Command::new("ps")
            .args(["-eo", "pid,ppid,pgid,stat,args"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains("37.125"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(!sleepers("37.125"), "{}", ps());
    assert_clean(&m);
}

/// The kinds of the session's operations, newest first.
fn op_kinds(m: &Mount) -> Vec<String> {
    let v: Value = serde_json::from_str(&ws_ok(m, &["--json", "op", "log", "-n", "1000"])).unwrap();
    v["operations"]
        .as_array()
        .unwrap_or_else(|| panic!("{v:#}"))
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_op_log_gets_one_bisect_record() {
    let m = Mount::new();
    let ids = twenty(&m);
    let before = op_kinds(&m);
    let doc = bisect_ok(
        &m,
        &["--good", &ids[0], "-j", "3", "grep", "-q", "good", "f"],
    );
    assert_eq!(doc["first_bad"]["id"], ids[FIRST_BAD]);
    let after = op_kinds(&m);
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    assert_eq!(after[0], "bisect");
    assert_eq!(after[1..], before[..]);
    // The record holds the result.
    let v: Value = serde_json::from_str(&ws_ok(&m, &["--json", "op", "log"])).unwrap();
    let rec = &v["operations"][0];
    let meta = if rec["record"].is_object() {
        &rec["record"]["meta"]
    } else {
        &rec["meta"]
    };
    assert_eq!(meta["first_bad"]["id"], ids[FIRST_BAD], "{rec:#}");
    assert_eq!(meta["steps"], doc["steps"]);
    assert_clean(&m);
}

#[test]
fn a_bisect_on_an_agent_socket_works_and_removes_its_forks() {
    let dir = tempfile::Builder::new()
        .prefix("tf-agent-")
        .tempdir()
        .unwrap();
    let sock = dir.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    let ids = twenty(&m);
    let o = Command::new(bin())
        .args(["--json", "bisect", "run", "-j", "2", "--good", &ids[0]])
        .args(["grep", "-q", "good", "f"])
        .env("TREEFORK_SOCKET", &sock)
        .env_remove("TREEFORK_STORE")
        .current_dir(&m.mp)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["first_bad"]["id"], ids[FIRST_BAD], "{doc:#}");
    assert_eq!(op_kinds(&m)[0], "bisect");
    assert_clean(&m);
}

#[test]
fn bisect_end_removes_only_its_own_forks() {
    let m = Mount::new();
    let ids = twenty(&m);
    // Another session, and a fork of this one that is no bisect's.
    let other = m.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    ws_ok(&m, &["fork", "plain", "--mount", other.to_str().unwrap()]);
    let line = serde_json::json!({"v": 1, "op": "bisect_begin", "checkpoints": [ids[3], ids[7]]});
    let b = raw(&m, &line.to_string());
    assert_eq!(b["ok"], true, "{b:#}");
    let id = b["id"].as_str().unwrap().to_string();
    let forks: Vec<String> = b["forks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["session"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(forks.len(), 2);
    assert!(forks[0].starts_with(&format!("s-b{id}-")), "{forks:?}");
    let mp = PathBuf::from(b["forks"][0]["mountpoint"].as_str().unwrap());
    assert_eq!(mp.parent().unwrap(), forks_dir(&m));
    let f = std::fs::read_to_string(mp.join("f")).unwrap();
    assert_eq!(f, "good 3\n");
    // Naming a session that is not one of its forks refuses the whole request.
    for stranger in ["plain", "s"] {
        let end = serde_json::json!({"v": 1, "op": "bisect_end", "id": id,
            "remove": [forks[0], stranger]});
        let r = raw(&m, &end.to_string());
        assert_eq!(r["ok"], false, "{r:#}");
        assert_eq!(r["error"]["code"], "invalid", "{r:#}");
    }
    // Another bisect id names none of them.
    let end = serde_json::json!({"v": 1, "op": "bisect_end", "id": "abc123", "remove": [forks[0]]});
    assert_eq!(raw(&m, &end.to_string())["ok"], false);
    let mut all = sessions(&m);
    all.sort();
    assert!(
        all.contains(&"plain".to_string()) && all.contains(&forks[0]),
        "{all:?}"
    );
    // Its own forks: removed, nothing recorded.
    let kinds = op_kinds(&m);
    let end = serde_json::json!({"v": 1, "op": "bisect_end", "id": id, "remove": "all"});
    let r = raw(&m, &end.to_string());
    assert_eq!(r["ok"], true, "{r:#}");
    assert_eq!(r["removed"].as_array().unwrap().len(), 2, "{r:#}");
    assert!(r["seq"].is_null());
    assert_eq!(op_kinds(&m), kinds);
    assert!(!forks_dir(&m).exists());
    umount_ok(&m.store, &other);
    tf_ok(&m.store, &["session", "rm", "plain"]);
    assert_clean(&m);
}

/// Send one raw request on the session socket; the final response.
fn raw(m: &Mount, line: &str) -> Value {
    use std::io::{BufRead, BufReader, Write};
    let rec = treefork::control::find_mount(&m.mp).expect("mount registered");
    let mut s =
        std::os::unix::net::UnixStream::connect(rec.socket.expect("session socket")).unwrap();
    s.write_all(line.as_bytes()).unwrap();
    s.write_all(b"\n").unwrap();
    let mut r = BufReader::new(s);
    loop {
        let mut l = String::new();
        assert!(r.read_line(&mut l).unwrap() > 0, "connection closed");
        let v: Value = serde_json::from_str(&l).unwrap();
        if v.get("event").is_none() {
            return v;
        }
    }
}

#[test]
fn bisect_end_checks_the_result_and_records_it_once() {
    let m = Mount::new();
    let ids = twenty(&m);
    let b = raw(
        &m,
        &serde_json::json!({"v": 1, "op": "bisect_begin", "checkpoints": [ids[0]]}).to_string(),
    );
    assert_eq!(b["ok"], true, "{b:#}");
    let id = b["id"].as_str().unwrap().to_string();
    let point = |i: usize| serde_json::json!({"id": ids[i], "short": &ids[i][..12], "message": format!("cp {i}"), "time": 0});
    let result = |good: Value| {
        serde_json::json!({"command": ["true"], "first_bad": null, "last_good": null,
            "good": good, "bad": point(19), "candidates": 20, "jobs": 1, "rounds": 1,
            "wall_ms": 1, "steps": []})
    };
    let end = |extra: Value| {
        let mut req = serde_json::json!({"v": 1, "op": "bisect_end", "id": id});
        for (k, v) in extra.as_object().unwrap() {
            req[k] = v.clone();
        }
        raw(&m, &req.to_string())
    };
    let kinds = op_kinds(&m);
    // Not hex, an unknown checkpoint, a result with abort: refused, nothing
    // removed, nothing recorded.
    let mut bad = point(0);
    bad["id"] = "zz".into();
    let unknown = serde_json::json!({"id": "ab".repeat(32), "short": "abababababab", "message": "", "time": 0});
    for (extra, code) in [
        (serde_json::json!({"result": result(bad)}), "invalid"),
        (serde_json::json!({"result": result(unknown)}), "not_found"),
        (
            serde_json::json!({"result": result(point(0)), "abort": true, "remove": "all"}),
            "invalid",
        ),
    ] {
        let r = end(extra);
        assert_eq!(r["ok"], false, "{r:#}");
        assert_eq!(r["error"]["code"], code, "{r:#}");
    }
    assert_eq!(op_kinds(&m), kinds);
    assert_eq!(sessions(&m).len(), 2);
    // The final call: the fork removed, one record; a second one is a conflict.
    let r = end(serde_json::json!({"result": result(point(0)), "remove": "all"}));
    assert_eq!(r["ok"], true, "{r:#}");
    assert!(r["seq"].is_u64(), "{r:#}");
    assert_eq!(op_kinds(&m).len(), kinds.len() + 1);
    let r = end(serde_json::json!({"result": result(point(0))}));
    assert_eq!(r["error"]["code"], "conflict", "{r:#}");
    assert_clean(&m);
}

#[test]
fn bisect_step_checks_the_results_and_the_daemon_records_its_own_result() {
    let m = Mount::new();
    let ids = twenty(&m);
    let kinds = op_kinds(&m);
    let send = |v: Value| raw(&m, &v.to_string());
    let begin = serde_json::json!({"v": 1, "op": "bisect_begin",
        "search": {"good": ids[0], "jobs": 2, "command": ["grep", "-q", "good", "f"]}});
    let b = send(begin);
    assert_eq!(b["ok"], true, "{b:#}");
    let id = b["id"].as_str().unwrap().to_string();
    assert_eq!(b["search"]["candidates"], 20, "{b:#}");
    assert_eq!(b["search"]["next"]["kind"], "test", "{b:#}");
    let ns = |v: &Value| -> Vec<u64> {
        v["forks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["n"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(ns(&b["search"]["next"]), vec![0, 19]);
    assert_eq!(ns(&b), vec![0, 19]);
    let result = |n: u64| {
        let exit = if n as usize >= FIRST_BAD { 1 } else { 0 };
        serde_json::json!({"candidate": n, "outcome": {"exit": exit, "duration_ms": 1}})
    };
    let step = |results: Vec<Value>| {
        send(serde_json::json!({"v": 1, "op": "bisect_step", "id": id, "results": results}))
    };
    // Refused whole, naming the candidate: unknown, twice, not pending, left out.
    for (results, says) in [
        (
            vec![result(0), result(19), result(25)],
            "candidate 25 is unknown",
        ),
        (
            vec![result(0), result(0), result(19)],
            "candidate 0 has two results",
        ),
        (vec![result(0), result(7)], "candidate 7 is not pending"),
        (vec![result(0)], "no result for pending candidate 19"),
    ] {
        let r = step(results);
        assert_eq!(r["ok"], false, "{r:#}");
        assert_eq!(r["error"]["code"], "invalid", "{r:#}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{msg}");
    }
    // The client's word is no result for a search the daemon keeps.
    let point =
        serde_json::json!({"id": ids[0], "short": &ids[0][..12], "message": "cp 0", "time": 0});
    let doc = serde_json::json!({"command": ["true"], "first_bad": null, "last_good": null,
        "good": point, "bad": point, "candidates": 1, "jobs": 1, "rounds": 1,
        "wall_ms": 1, "steps": []});
    let r = send(serde_json::json!({"v": 1, "op": "bisect_end", "id": id, "result": doc}));
    assert_eq!(r["error"]["code"], "invalid", "{r:#}");
    // The truth, round by round, until the daemon's search ends.
    let mut pending = vec![0, 19];
    let mut rounds = 0;
    let found = loop {
        let r = step(pending.iter().map(|&n| result(n)).collect());
        assert_eq!(r["ok"], true, "{r:#}");
        rounds += 1;
        assert!(rounds <= ceil_log(3, 20) + 1, "{r:#}");
        match r["next"]["kind"].as_str().unwrap() {
            "test" => pending = ns(&r["next"]),
            "found" => break r["next"]["result"].clone(),
            k => panic!("{k}: {r:#}"),
        }
    };
    assert_eq!(found["first_bad"]["id"], ids[FIRST_BAD], "{found:#}");
    // Over: no more results taken; bisect_end records the daemon's document.
    let r = step(vec![result(0)]);
    assert_eq!(r["error"]["code"], "invalid", "{r:#}");
    let r = send(serde_json::json!({"v": 1, "op": "bisect_end", "id": id}));
    assert_eq!(r["ok"], true, "{r:#}");
    assert!(r["seq"].is_u64(), "{r:#}");
    assert_eq!(r["result"]["steps"], found["steps"], "{r:#}");
    let after = op_kinds(&m);
    assert_eq!(after.len(), kinds.len() + 1);
    assert_eq!(after[0], "bisect");
    // The state is gone with the record.
    let r = step(vec![result(0)]);
    assert_eq!(r["error"]["code"], "not_found", "{r:#}");
    assert_clean(&m);
}
