//! What a new user meets first (issue 25, "rough edges"): `log` and `show` agree
//! on a first checkpoint, `branches` marks the current branch, a `checkout -b`
//! that changes no file claims no change, commands are shown shell-quoted
//! (`history`, `log`, `op log`, `timeline`), and `diff baseline` shows what the
//! session changed against where it started.

use std::fs;

use serde_json::Value;

use crate::harness::{Mount, write_synced, ws, ws_ok};

/// The line of `text` containing `needle` (panics, showing `text`, when none).
fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
}

/// The line of `branches` output listing branch `name` (after its 2-column mark).
fn branch_line<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find(|l| {
            l.get(2..)
                .is_some_and(|r| r.starts_with(&format!("{name} ")))
        })
        .unwrap_or_else(|| panic!("no branch {name:?} in:\n{text}"))
}

#[test]
fn log_and_show_agree_on_a_first_checkpoint() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"1\n");
    ws_ok(&m, &["checkpoint", "-m", "one"]);
    write_synced(&m.p("g"), b"2\n");
    ws_ok(&m, &["checkpoint", "-m", "two"]);
    let log = ws_ok(&m, &["log"]);
    // The first has no parent: `log` says so, as `show` does.
    let first = line_with(&log, "one");
    assert!(
        first.contains("first") && !first.contains("changed"),
        "{log}"
    );
    let shown = ws_ok(&m, &["show", "HEAD~1"]);
    assert!(shown.contains("first checkpoint: no parent"), "{shown}");
    // The second changed one path against its parent, and `show` lists it.
    assert!(line_with(&log, "two").contains("1 changed"), "{log}");
    let shown = ws_ok(&m, &["show", "HEAD"]);
    assert!(shown.contains("A\tg"), "{shown}");
}

#[test]
fn branches_mark_the_current_one_and_an_identical_checkout_claims_no_change() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"1\n");
    ws_ok(&m, &["branch", "other"]);
    ws_ok(&m, &["checkout", "-b", "main"]);
    let human = ws_ok(&m, &["branches"]);
    assert!(branch_line(&human, "main").starts_with("* "), "{human}");
    assert!(branch_line(&human, "other").starts_with("  "), "{human}");
    let v: Value = serde_json::from_str(&ws_ok(&m, &["branches", "--json"])).unwrap();
    let current: Vec<(&str, bool)> = v["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["name"].as_str().unwrap(), b["current"].as_bool().unwrap()))
        .collect();
    assert_eq!(current, [("main", true), ("other", false)], "{v}");
    // `checkout -b` onto a checkpoint with the same files changes no file, and
    // the op log does not say it did, even when the root moved: here a chmod to
    // the same mode (a new ctime) made the live tree's root differ.
    let same_mode = fs::metadata(m.p("f")).unwrap().permissions();
    fs::set_permissions(m.p("f"), same_mode).unwrap();
    ws_ok(&m, &["checkout", "-b", "same", "other"]);
    let ops = ws_ok(&m, &["op", "log", "-n", "1"]);
    assert!(ops.contains("checkout"), "{ops}");
    assert!(!ops.contains("workspace changed"), "{ops}");
    let v: Value = serde_json::from_str(&ws_ok(&m, &["op", "log", "-n", "1", "--json"])).unwrap();
    let op = &v["operations"][0];
    assert_ne!(op["before"]["workspace"], op["after"]["workspace"], "{v}");
    let timeline = ws_ok(&m, &["timeline", "-n", "1"]);
    assert!(!timeline.contains("workspace changed"), "{timeline}");
    let human = ws_ok(&m, &["branches"]);
    assert!(branch_line(&human, "same").starts_with("* "), "{human}");
    assert!(branch_line(&human, "main").starts_with("  "), "{human}");
    // A checkout that does change files says so.
    write_synced(&m.p("f"), b"2\n");
    ws_ok(&m, &["checkpoint", "-m", "two"]);
    ws_ok(&m, &["checkout", "other"]);
    let ops = ws_ok(&m, &["op", "log", "-n", "1"]);
    assert!(ops.contains("workspace changed"), "{ops}");
}

#[test]
fn commands_are_shown_shell_quoted() {
    let m = Mount::new();
    ws_ok(&m, &["exec", "--", "sh", "-c", "echo a b > out.txt"]);
    assert_eq!(fs::read_to_string(m.p("out.txt")).unwrap(), "a b\n");
    let cmd = "sh -c 'echo a b > out.txt'";
    for args in [
        &["history"][..],
        &["history", "show", "1"],
        &["log"],
        &["op", "log"],
        &["timeline"],
    ] {
        let out = ws_ok(&m, args);
        assert!(out.contains(cmd), "{args:?}:\n{out}");
    }
    // `op log` and `timeline` name the exec by its number, not a bare "exec".
    for args in [&["op", "log"][..], &["timeline"]] {
        let out = ws_ok(&m, args);
        assert!(out.contains(&format!("exec 1: {cmd}")), "{args:?}:\n{out}");
    }
    // A long command is cut to a line's width there.
    let long = format!("echo {}", "x".repeat(300));
    ws_ok(&m, &["exec", "--", "sh", "-c", &long]);
    let ops = ws_ok(&m, &["op", "log", "-n", "1"]);
    let line = line_with(&ops, "exec 2:");
    assert!(line.contains("...") && line.len() < 200, "{ops}");
}

#[test]
fn diff_baseline_shows_what_the_session_changed_since_it_started() {
    let src = tempfile::tempdir().unwrap();
    fs::write(src.path().join("a.txt"), "a\n").unwrap();
    fs::write(src.path().join("b.txt"), "b\n").unwrap();
    let m = Mount::with_options("s", &["--from", src.path().to_str().unwrap()]);
    write_synced(&m.p("a.txt"), b"changed\n");
    ws_ok(&m, &["checkpoint", "-m", "edit a"]);
    write_synced(&m.p("c.txt"), b"new\n");
    // Since the last checkpoint: c only; since the start: a and c.
    assert_eq!(ws_ok(&m, &["diff"]), "A\tc.txt\n");
    assert_eq!(ws_ok(&m, &["diff", "baseline"]), "M\ta.txt\nA\tc.txt\n");
    assert_eq!(ws_ok(&m, &["diff", "baseline", "HEAD"]), "M\ta.txt\n");
    // No branch can take the name.
    let o = ws(&m, &["branch", "baseline"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    // A session created empty is based on the empty tree.
    let e = Mount::new();
    write_synced(&e.p("x"), b"x\n");
    assert_eq!(ws_ok(&e, &["diff", "baseline"]), "A\tx\n");
}
