//! Branch names per session (issue 39 item 6) and `log` through every parent
//! (item 9), on real mounts with the real CLI: two sessions each with their own
//! `main`, another session's branch addressed as `SESSION/BRANCH`, the listing and
//! its flags, the clash refusals naming the owner, an agent socket's view, and a
//! merge's other side in `log`.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::harness::{Mount, fork_beside, write_synced, ws, ws_in_ok, ws_ok};

fn j(m: &Mount, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ws_ok(m, &a)).unwrap()
}

fn at_json(m: &Mount, dir: &Path, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ws_in_ok(m, dir, &a)).unwrap()
}

fn messages(log: &Value) -> Vec<String> {
    log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn log_after_merge_lists_the_merged_side_and_first_parent_does_not() {
    let m = Mount::new();
    write_synced(&m.p("a.txt"), b"a\n");
    ws_ok(&m, &["checkpoint", "-m", "base"]);
    let f = fork_beside(&m, "f");
    write_synced(&f.join("b.txt"), b"theirs 1\n");
    ws_in_ok(&m, &f, &["checkpoint", "-m", "theirs 1"]);
    write_synced(&f.join("b.txt"), b"theirs 2\n");
    ws_in_ok(&m, &f, &["checkpoint", "-m", "theirs 2"]);
    write_synced(&m.p("c.txt"), b"ours\n");
    ws_ok(&m, &["checkpoint", "-m", "ours"]);
    let a = j(&m, &["merge", "f", "-m", "merge f"]);
    assert_eq!(a["status"], "merged", "{a}");

    let all = messages(&j(&m, &["log"]));
    assert_eq!(all[0], "merge f", "{all:?}");
    for want in ["theirs 1", "theirs 2", "ours", "base"] {
        assert!(all.contains(&want.to_string()), "{want} in {all:?}");
    }
    assert_eq!(
        all.iter().filter(|m| *m == "base").count(),
        1,
        "each ancestor once: {all:?}"
    );
    // Newest first: theirs 2 before theirs 1, everything before base.
    let pos = |w: &str| all.iter().position(|m| m == w).unwrap();
    assert!(pos("theirs 2") < pos("theirs 1") && pos("theirs 1") < pos("base"));
    assert!(pos("ours") < pos("base"));

    let first = messages(&j(&m, &["log", "--first-parent"]));
    assert!(!first.iter().any(|m| m.starts_with("theirs")), "{first:?}");
    assert!(first.contains(&"ours".to_string()) && first.contains(&"base".to_string()));
    // Bounded as before.
    assert_eq!(messages(&j(&m, &["log", "-n", "2"])).len(), 2);
}

fn names(v: &Value) -> Vec<String> {
    v["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn two_sessions_each_have_their_own_main_and_name_the_other_s_as_session_slash_branch() {
    let m = Mount::with_session("one");
    write_synced(&m.p("a.txt"), b"one\n");
    ws_ok(&m, &["checkout", "-b", "main"]);
    let two = fork_beside(&m, "two");
    // The fork starts detached, with a namespace of its own.
    let st = at_json(&m, &two, &["status"]);
    assert_eq!(st["branch"], Value::Null, "{st}");
    ws_in_ok(&m, &two, &["checkout", "-b", "main"]);
    write_synced(&two.join("b.txt"), b"two\n");
    ws_in_ok(&m, &two, &["checkpoint", "-m", "two's work"]);
    write_synced(&m.p("c.txt"), b"one again\n");
    ws_ok(&m, &["checkpoint", "-m", "one's work"]);

    // Each `main` moved with its own session.
    let one_log = messages(&j(&m, &["log", "main"]));
    assert_eq!(one_log[0], "one's work", "{one_log:?}");
    let two_log = messages(&at_json(&m, &two, &["log", "main"]));
    assert_eq!(two_log[0], "two's work", "{two_log:?}");
    // The other session's, explicitly.
    let other = messages(&j(&m, &["log", "two/main"]));
    assert_eq!(other[0], "two's work", "{other:?}");
    assert_eq!(j(&m, &["status"])["branch"], "main");

    // `branches`: each its own; --all every session's, qualified.
    assert_eq!(names(&j(&m, &["branches"])), vec!["main"]);
    assert_eq!(names(&at_json(&m, &two, &["branches"])), vec!["main"]);
    let all = j(&m, &["branches", "--all"]);
    // Its own as it writes it, the other's qualified; `owner` says whose.
    assert_eq!(names(&all), vec!["main", "two/main"], "{all}");
    assert_eq!(all["branches"][0]["owner"], "one");

    // A real clash names the owner.
    let o = ws(&m, &["branch", "main"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("already exists in session one"), "{err}");
    // A name whose first component is a session is refused, naming it.
    let o = ws(&m, &["branch", "two/x"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("\"two\" is a session"),
        "{err}"
    );

    // Merge of the other session's branch.
    let a = j(&m, &["merge", "two/main", "-m", "merge two"]);
    assert_eq!(a["status"], "merged", "{a}");
    assert_eq!(fs::read_to_string(m.p("b.txt")).unwrap(), "two\n");
    // Checking out another session's branch detaches (it is that session's to move).
    let c = j(&m, &["checkout", "two/main"]);
    assert_eq!(c["detached"], true, "{c}");
    assert!(
        c["notes"][0].as_str().unwrap().contains("session two's"),
        "{c}"
    );
    ws_ok(&m, &["checkout", "main"]);
    assert_eq!(j(&m, &["status"])["branch"], "main");
    ws_in_ok(&m, &two, &["branch", "-d", "main"]);
    assert_eq!(
        names(&j(&m, &["branches"])),
        vec!["main"],
        "one's main stays"
    );
}

#[test]
fn automatic_refs_stay_out_of_the_listing_unless_asked() {
    let m = Mount::new();
    write_synced(&m.p("a.txt"), b"1\n");
    ws_ok(&m, &["checkpoint", "-m", "one"]);
    ws_ok(&m, &["branch", "keep"]);
    write_synced(&m.p("a.txt"), b"pending\n");
    // Checking out with pending changes saves them under an auto/... ref.
    let c = j(&m, &["checkout", "keep"]);
    let saved = c["saved"]["ref"].as_str().unwrap().to_string();
    assert!(saved.starts_with("auto/"), "{c}");
    assert_eq!(names(&j(&m, &["branches"])), vec!["keep"]);
    let with = names(&j(&m, &["branches", "--auto"]));
    assert!(
        with.contains(&saved) && with.contains(&"keep".into()),
        "{with:?}"
    );
    // The saved ref resolves by the name the answer gave.
    let l = messages(&j(&m, &["log", "-n", "1", &saved]));
    assert!(l[0].starts_with("auto: before"), "{l:?}");
}

#[test]
fn an_agent_socket_reads_another_session_s_branch_only_once_shared() {
    let dir = tempfile::Builder::new()
        .prefix("tf-agent-")
        .tempdir()
        .unwrap();
    let sock = dir.path().join("agent.sock");
    let m = Mount::with_options("one", &["--agent-socket", sock.to_str().unwrap()]);
    write_synced(&m.p("a.txt"), b"one\n");
    ws_ok(&m, &["checkpoint", "-m", "one"]);
    // Session two: not of one's lineage (a session of its own, not a fork).
    let two = m.tmp.path().join("two-mp");
    fs::create_dir_all(&two).unwrap();
    crate::harness::tf_ok(
        &m.store,
        &["mount", "--session", "two", two.to_str().unwrap()],
    );
    write_synced(&two.join("secret.txt"), b"two's\n");
    ws_in_ok(&m, &two, &["checkout", "-b", "main"]);
    let agent = |args: &[&str]| crate::security::on_socket(&sock, &m.mp, args);

    let o = agent(&["log", "two/main"]);
    assert!(!o.status.success(), "an agent of one does not see two/main");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown ref"), "{err}");
    let v: Value = serde_json::from_slice(&agent(&["branches", "--all"]).stdout).unwrap();
    assert_eq!(names(&v), Vec::<String>::new(), "{v}");

    // The user shares it (as one writes it: two/main).
    ws_ok(&m, &["branch", "two/main", "--share", "one"]);
    let o = agent(&["log", "two/main"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&agent(&["branches", "--all"]).stdout).unwrap();
    assert_eq!(names(&v), vec!["two/main"], "{v}");
    crate::harness::umount_ok(&m.store, &two);
}
