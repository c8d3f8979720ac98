//! Issue 39 item 8 and part of 9: the timeline and `history` say what an
//! operation came to — what bisect found (or that the range was wrong), the
//! commit a promote made, what a merge merged and its conflicts, what an undo or
//! redo reverted, that an experiment was interrupted and by which signal, the
//! `--explanation` of a command — and show recorded commands as typed (quoted
//! only where a shell needs it).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

/// A checkpoint with message `msg`; its id.
fn checkpoint(m: &Mount, msg: &str) -> String {
    let v: Value = serde_json::from_str(&ws_ok(m, &["--json", "checkpoint", "-m", msg])).unwrap();
    v["checkpoint"]["id"]
        .as_str()
        .expect("a checkpoint id")
        .to_string()
}

fn timeline(m: &Mount) -> String {
    ws_ok(m, &["timeline"])
}

/// The timeline's text for the newest operation of `kind` (its summary line,
/// found by the record's number in `--json timeline`).
fn row(m: &Mount, kind: &str) -> String {
    let v: Value = serde_json::from_str(&ws_ok(m, &["--json", "timeline"])).unwrap();
    let seq = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["kind"] == kind)
        .and_then(|e| e["seq"].as_u64())
        .unwrap_or_else(|| panic!("no {kind} record in {v:#}"));
    let tl = timeline(m);
    let mark = format!("#{seq} ");
    tl.lines()
        .find(|l| l.split_whitespace().nth(2) == Some(mark.trim_end()))
        .unwrap_or_else(|| panic!("no row #{seq} in\n{tl}"))
        .to_string()
}

#[test]
fn bisect_rows_say_what_bisect_found() {
    let m = Mount::new();
    let ids: Vec<String> = (0..6)
        .map(|i| {
            let word = if i < 3 { "good" } else { "bad" };
            write_synced(&m.p("f"), format!("{word} {i}\n").as_bytes());
            checkpoint(&m, &format!("cp {i}"))
        })
        .collect();
    ws_ok(
        &m,
        &[
            "bisect", "run", "--good", &ids[0], "grep", "-q", "good", "f",
        ],
    );
    let r = row(&m, "bisect");
    assert!(
        r.contains(&format!("first bad {} \"cp 3\"", &ids[3][..12])),
        "{r}"
    );
    assert!(r.contains(&format!("last good {}", &ids[2][..12])), "{r}");
    assert!(r.contains("grep -q good f"), "{r}");

    // The command already fails at the good end: the range is wrong, the bisect
    // is refused (exit 12) and records nothing, so the newest row is still the
    // one above. (Rows of such bisects recorded before still read "the range
    // was wrong": unit-tested in ops::oplog_words.)
    let o = ws(
        &m,
        &[
            "bisect", "run", "--good", &ids[4], "grep", "-q", "good", "f",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(12),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(row(&m, "bisect"), r);

    // It passes at the bad end: no first bad.
    let _ = ws(
        &m,
        &[
            "bisect", "run", "--good", &ids[0], "--bad", &ids[2], "grep", "-q", "good", "f",
        ],
    );
    let r = row(&m, "bisect");
    assert!(r.contains("no first bad"), "{r}");
}

#[test]
fn promote_rows_say_the_commit_made() {
    let dir = tempfile::tempdir().unwrap();
    let repo = crate::lifecycle::git_repo(dir.path());
    let m = Mount::with_options("s", &["--from", repo.to_str().unwrap()]);
    write_synced(&m.p("src/new.rs"), b"pub fn new() {}\n");
    let o = ws(&m, &["promote", m.p("src/new.rs").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sha = git(&repo, &["rev-parse", "HEAD"]);
    let r = row(&m, "promote");
    assert!(
        r.contains(&format!(
            "commit {} on main in {}",
            &sha[..12],
            repo.display()
        )),
        "{r}"
    );
}

#[test]
fn merge_rows_say_what_was_merged_and_the_conflicts() {
    let m = Mount::new();
    write_synced(&m.p("a"), b"base\n");
    checkpoint(&m, "base");
    ws_ok(&m, &["checkout", "-b", "main"]);
    ws_ok(&m, &["branch", "side"]);
    write_synced(&m.p("b"), b"ours\n");
    checkpoint(&m, "ours");
    ws_ok(&m, &["checkout", "side"]);
    write_synced(&m.p("c"), b"theirs\n");
    write_synced(&m.p("a"), b"theirs\n");
    let theirs = checkpoint(&m, "theirs");
    ws_ok(&m, &["checkout", "main"]);
    ws_ok(&m, &["merge", "side"]);
    let r = row(&m, "merge");
    assert!(
        r.contains(&format!("merged side ({})", &theirs[..12])) && r.contains("clean"),
        "{r}"
    );
    // A conflicting cherry-pick says so.
    ws_ok(&m, &["undo"]);
    write_synced(&m.p("a"), b"ours again\n");
    checkpoint(&m, "ours again");
    let _ = ws(&m, &["cherry-pick", &theirs]);
    let r = row(&m, "cherry-pick");
    assert!(r.contains(&theirs[..12]) && r.contains("1 conflict"), "{r}");
    ws_ok(&m, &["cherry-pick", "--abort"]);
    let r = row(&m, "cherry-pick-abort");
    assert!(r.contains("abandoned") && r.contains(&theirs[..12]), "{r}");
}

#[test]
fn undo_and_redo_rows_say_in_words_what_they_reverted() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"1");
    let c1 = checkpoint(&m, "one");
    ws_ok(&m, &["checkout", "-b", "main"]);
    write_synced(&m.p("f"), b"2");
    checkpoint(&m, "two");
    let seq = |m: &Mount| -> u64 {
        let v: Value =
            serde_json::from_str(&ws_ok(m, &["--json", "op", "log", "-n", "1"])).unwrap();
        v["operations"][0]["seq"].as_u64().unwrap()
    };
    let done = seq(&m);
    ws_ok(&m, &["undo"]);
    let undo = seq(&m);
    let r = row(&m, "undo");
    assert!(
        r.contains(&format!(
            "undid #{done} checkpoint \"two\": HEAD main back to {}",
            &c1[..12]
        )),
        "{r}"
    );
    ws_ok(&m, &["redo"]);
    let r = row(&m, "redo");
    assert!(
        r.contains(&format!(
            "redid #{done} checkpoint \"two\" (undone by #{undo})"
        )),
        "{r}"
    );
    assert!(!r.contains("->"), "{r}");
}

/// Whether `sleep ARG` processes are running (`pgrep -c -f`): how many.
fn sleepers(arg: &str) -> usize {
    let o = Command::new("pgrep")
        .args(["-c", "-f", &format!("^sleep {arg}$")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn an_interrupted_experiment_says_interrupted_and_by_which_signal() {
    let m = Mount::new();
    checkpoint(&m, "base");
    let arg = "41.25";
    let cmd = format!("sleep {arg}");
    let child = Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .args(["experiment", "-c", &cmd, "-c", &cmd])
        .current_dir(&m.mp)
        .env_remove("TREEFORK_SOCKET")
        .env_remove("TREEFORK_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while sleepers(arg) < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the runs never started\n{}",
            daemon_log(&m.store)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + libc::SIGINT));
    let shown = ws_ok(&m, &["experiment", "show"]);
    assert!(shown.contains("interrupted by SIGINT"), "{shown}");
    assert!(!shown.contains("no winner"), "{shown}");
    let r = row(&m, "experiment");
    assert!(r.contains("interrupted by SIGINT"), "{r}");
    assert!(!r.contains("winner"), "{r}");
}

#[test]
fn history_shows_commands_as_typed_and_their_explanation() {
    let m = Mount::new();
    ws_ok(
        &m,
        &[
            "--explanation",
            "print the settings",
            "exec",
            "--",
            "sh",
            "-c",
            r#"printf "%s\n" a=b >out"#,
        ],
    );
    ws_ok(
        &m,
        &[
            "exec",
            "--",
            "env",
            "A=1",
            "B=x,y",
            "true",
            "./run.sh",
            "--flag=v:w@h+1",
        ],
    );
    let h = ws_ok(&m, &["history"]);
    assert!(h.contains(r#"sh -c 'printf "%s\n" a=b >out'"#), "{h}");
    assert!(
        h.contains("env A=1 B=x,y true ./run.sh --flag=v:w@h+1"),
        "{h}"
    );
    assert!(h.contains("why: print the settings"), "{h}");
    let tl = timeline(&m);
    assert!(
        tl.contains(r#"exec 1: sh -c 'printf "%s\n" a=b >out'"#),
        "{tl}"
    );
    assert!(
        tl.contains("exec 2: env A=1 B=x,y true ./run.sh --flag=v:w@h+1"),
        "{tl}"
    );
    // A control character is escaped, never shown raw.
    let _ = ws(&m, &["exec", "--", "printf", "a\tb\n"]);
    let h = ws_ok(&m, &["history", "show", "3"]);
    assert!(h.contains(r"command:  printf $'a\tb\n'"), "{h}");
}
