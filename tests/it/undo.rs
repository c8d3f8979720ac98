//! The operation log on a real mount: HEAD attached to branches, undo/redo/op
//! restore of each kind of operation, concurrent undos, the agent socket's rights
//! and retention at gc.

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::harness::{Mount, tf_ok, write_synced, ws, ws_ok};

fn j(m: &Mount, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ws_ok(m, &a)).unwrap()
}

fn read(m: &Mount, p: &str) -> String {
    fs::read_to_string(m.p(p)).unwrap()
}

fn head(m: &Mount) -> (String, Value) {
    let s = j(m, &["status"]);
    (
        s["head"].as_str().unwrap_or("").to_string(),
        s["branch"].clone(),
    )
}

fn branch_at(m: &Mount, name: &str) -> Option<String> {
    j(m, &["branches"])["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .map(|b| b["checkpoint"].as_str().unwrap().to_string())
}

fn checkpoint(m: &Mount, msg: &str) -> String {
    j(m, &["checkpoint", "-m", msg])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn err_of(m: &Mount, args: &[&str]) -> String {
    let o = ws(m, args);
    assert!(!o.status.success(), "{args:?} unexpectedly succeeded");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Send one raw request on the session socket of `m`.
fn request(sock: &std::path::Path, req: &Value) -> Value {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    let mut line = serde_json::to_vec(req).unwrap();
    line.push(b'\n');
    s.write_all(&line).unwrap();
    for l in BufReader::new(s).lines() {
        let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
        if v.get("event").is_none() {
            return v;
        }
    }
    panic!("no response");
}

fn session_sock(m: &Mount) -> PathBuf {
    let canon = m.mp.canonicalize().unwrap();
    let rec = treefork::control::find_mount(&canon).expect("mount record");
    rec.socket
        .unwrap_or_else(|| treefork::control::session_socket(&canon).unwrap())
}

#[test]
fn head_attaches_to_a_branch_and_checkpoints_move_it() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"1");
    let c1 = checkpoint(&m, "one");
    // A new session is detached; checkout -b creates and attaches.
    assert_eq!(head(&m).1, Value::Null);
    let out = ws_ok(&m, &["checkout", "-b", "main"]);
    assert!(out.contains("HEAD is on branch main"), "{out}");
    assert_eq!(head(&m), (c1.clone(), json!("main")));
    assert!(ws_ok(&m, &["status"]).starts_with("on branch main\n"));
    write_synced(&m.p("f"), b"2");
    let c2 = checkpoint(&m, "two");
    assert_eq!(branch_at(&m, "main").as_deref(), Some(c2.as_str()));
    // `branch` alone marks the current branch.
    let list = ws_ok(&m, &["branch"]);
    assert!(list.lines().any(|l| l.starts_with("* main")), "{list}");
    // An id detaches (and says so); new checkpoints leave the branch alone.
    let out = ws_ok(&m, &["checkout", &c1[..12]]);
    assert!(out.contains("HEAD is detached"), "{out}");
    assert_eq!(read(&m, "f"), "1");
    write_synced(&m.p("g"), b"x");
    let c3 = checkpoint(&m, "three");
    assert_eq!(branch_at(&m, "main").as_deref(), Some(c2.as_str()));
    assert_eq!(head(&m), (c3, Value::Null));
    // @{-1} is what was checked out before.
    ws_ok(&m, &["checkout", "main"]);
    assert_eq!(head(&m), (c2.clone(), json!("main")));
    let prev = j(&m, &["show", "@{-1}"]);
    assert!(prev.to_string().contains(&c1[..12]), "{prev}");
    // Rename: the attached session follows.
    ws_ok(&m, &["branch", "-m", "main", "trunk"]);
    assert_eq!(head(&m), (c2.clone(), json!("trunk")));
    assert_eq!(branch_at(&m, "main"), None);
    write_synced(&m.p("h"), b"y");
    let c4 = checkpoint(&m, "four");
    assert_eq!(branch_at(&m, "trunk").as_deref(), Some(c4.as_str()));
}

#[test]
fn undo_and_redo_each_kind_of_operation() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"1");
    let c1 = checkpoint(&m, "one");
    ws_ok(&m, &["checkout", "-b", "main"]);
    write_synced(&m.p("f"), b"2");
    let c2 = checkpoint(&m, "two");

    // Undo a checkpoint: the branch and HEAD go back, the files stay (pending).
    let out = ws_ok(&m, &["undo"]);
    assert!(
        out.contains("undid #") && out.contains("checkpoint \"two\""),
        "{out}"
    );
    assert_eq!(head(&m), (c1.clone(), json!("main")));
    assert_eq!(branch_at(&m, "main").as_deref(), Some(c1.as_str()));
    assert_eq!(read(&m, "f"), "2");
    assert_eq!(j(&m, &["status"])["changes"][0]["path"], "f");
    // Redo it.
    ws_ok(&m, &["redo"]);
    assert_eq!(head(&m), (c2.clone(), json!("main")));
    assert_eq!(branch_at(&m, "main").as_deref(), Some(c2.as_str()));

    // Undo a checkout: HEAD back on the branch and the files back.
    ws_ok(&m, &["checkout", &c1]);
    assert_eq!(read(&m, "f"), "1");
    ws_ok(&m, &["undo"]);
    assert_eq!(head(&m), (c2.clone(), json!("main")));
    assert_eq!(read(&m, "f"), "2");

    // Undo a restore, with pending changes before it: they come back.
    write_synced(&m.p("f"), b"3");
    ws_ok(&m, &["restore", "HEAD"]);
    assert_eq!(read(&m, "f"), "2");
    ws_ok(&m, &["undo"]);
    assert_eq!(read(&m, "f"), "3");
    // ... and the undo itself is undone by redo (back to the restored state).
    ws_ok(&m, &["redo"]);
    assert_eq!(read(&m, "f"), "2");

    // Undo a branch creation and a deletion.
    ws_ok(&m, &["branch", "side"]);
    assert!(branch_at(&m, "side").is_some());
    ws_ok(&m, &["undo"]);
    assert_eq!(branch_at(&m, "side"), None);
    ws_ok(&m, &["branch", "gone"]);
    let at = branch_at(&m, "gone").unwrap();
    ws_ok(&m, &["branch", "-d", "gone"]);
    ws_ok(&m, &["undo"]);
    assert_eq!(branch_at(&m, "gone").as_deref(), Some(at.as_str()));

    // Repeated undos walk back; --what limits them.
    write_synced(&m.p("f"), b"4");
    checkpoint(&m, "four");
    ws_ok(&m, &["checkout", &c1]);
    ws_ok(&m, &["undo", "--what", "refs"]);
    assert_eq!(read(&m, "f"), "1", "--what refs left the files");
    assert_eq!(head(&m).1, json!("main"));

    // The log shows who and why.
    ws_ok(&m, &["--explanation", "trying a thing", "branch", "why"]);
    let log = j(&m, &["op", "log", "-n", "50"]);
    let ops = log["operations"].as_array().unwrap();
    assert_eq!(ops[0]["kind"], "branch");
    assert_eq!(ops[0]["explanation"], "trying a thing");
    assert_eq!(ops[0]["actor"]["role"], "user");
    assert!(ops[0]["actor"]["pid"].as_u64().is_some());
    assert!(ops.iter().any(|o| o["kind"] == "undo"));
    // op restore returns to the state after an operation; an unknown one is named.
    let first_checkout = ops
        .iter()
        .rev()
        .find(|o| o["kind"] == "checkout" && o["after"]["branch"].is_null())
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    ws_ok(&m, &["op", "restore", &first_checkout.to_string()]);
    assert_eq!(read(&m, "f"), "1");
    assert_eq!(head(&m).0, c1);
    let e = err_of(&m, &["op", "restore", "99999"]);
    assert!(e.contains("no operation 99999"), "{e}");
}

#[test]
fn nothing_to_undo_is_a_clear_error() {
    let m = Mount::new();
    let e = err_of(&m, &["undo"]);
    assert!(e.contains("nothing to undo"), "{e}");
    let e = err_of(&m, &["redo"]);
    assert!(e.contains("nothing to redo"), "{e}");
}

#[test]
fn of_two_concurrent_undos_exactly_one_wins() {
    let m = Mount::new();
    for i in 0..3 {
        write_synced(&m.p("f"), format!("{i}").as_bytes());
        checkpoint(&m, &format!("c{i}"));
    }
    let last = j(&m, &["op", "log", "-n", "1"])["operations"][0]["seq"]
        .as_u64()
        .unwrap();
    let sock = session_sock(&m);
    let req = json!({"v": 1, "op": "undo", "if_last": last});
    let rs: Vec<Value> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..2).map(|_| sc.spawn(|| request(&sock, &req))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let oks = rs.iter().filter(|r| r["ok"] == true).count();
    assert_eq!(oks, 1, "{rs:?}");
    let lost = rs.iter().find(|r| r["ok"] == false).unwrap();
    assert_eq!(lost["error"]["code"], "conflict", "{lost}");
    assert!(
        lost["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another client"),
        "{lost}"
    );
    // Exactly one checkpoint was undone.
    assert_eq!(read(&m, "f"), "2");
    let log = j(&m, &["log"]);
    assert_eq!(log["checkpoints"][0]["message"], "c1");
}

#[test]
fn the_agent_socket_may_undo_but_not_rename_branches() {
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    write_synced(&m.p("f"), b"1");
    let run = |args: &[&str]| {
        std::process::Command::new(crate::harness::bin())
            .arg("--json")
            .arg("--socket")
            .arg(&sock)
            .args(args)
            .current_dir(&m.mp)
            .env_remove("TREEFORK_STORE")
            .output()
            .unwrap()
    };
    assert!(run(&["checkpoint", "-m", "a"]).status.success());
    assert!(run(&["branch", "b"]).status.success());
    let o = run(&["undo"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(branch_at(&m, "b"), None);
    assert!(run(&["redo"]).status.success());
    let o = run(&["branch", "-m", "b", "c"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("branch_rename"));
    let log = j(&m, &["op", "log"]);
    assert_eq!(log["operations"][0]["actor"]["role"], "agent");
}

#[test]
fn gc_prunes_operations_past_retention_and_keeps_what_they_name() {
    let m = Mount::new();
    let mp = m.mp.to_str().unwrap();
    write_synced(&m.p("f"), b"1");
    let c1 = checkpoint(&m, "one");
    // A fork's checkpoint, checked out here, then the fork removed: the operation
    // log of this session still names it, so gc keeps it.
    let fmp = m.tmp.path().join("fork");
    fs::create_dir(&fmp).unwrap();
    let fmp = fmp.to_str().unwrap();
    tf_ok(&m.store, &["-C", mp, "fork", "other", "--mount", fmp]);
    fs::write(format!("{fmp}/only-in-fork"), b"z").unwrap();
    let fc = serde_json::from_str::<Value>(&tf_ok(
        &m.store,
        &["--json", "-C", fmp, "checkpoint", "-m", "in fork"],
    ))
    .unwrap()["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ws_ok(&m, &["checkout", &fc]);
    ws_ok(&m, &["checkout", &c1]);
    assert!(!m.p("only-in-fork").exists());
    let log = j(&m, &["op", "log"]);
    assert_eq!(log["operations"][1]["kind"], "checkout");
    assert_eq!(log["operations"][1]["seq"], 3);
    crate::harness::umount_ok(&m.store, std::path::Path::new(fmp));
    tf_ok(&m.store, &["session", "rm", "other"]);
    tf_ok(&m.store, &["gc"]);
    ws_ok(&m, &["op", "restore", "3"]);
    assert_eq!(read(&m, "only-in-fork"), "z");
    // Retention 0/0 drops every record at the next gc.
    ws_ok(
        &m,
        &["config", "op_retention_days=0", "op_retention_count=0"],
    );
    let n = j(&m, &["op", "log", "-n", "1000"])["operations"]
        .as_array()
        .unwrap()
        .len();
    assert!(n > 5);
    let g: Value = serde_json::from_str(&tf_ok(&m.store, &["--json", "gc"])).unwrap();
    assert!(g["operations_pruned"].as_u64().unwrap() >= n as u64, "{g}");
    let e = err_of(&m, &["undo"]);
    assert!(e.contains("nothing to undo"), "{e}");
}

#[test]
fn timeline_lists_operations_with_their_files_and_notes_in_place() {
    let m = Mount::new();
    write_synced(&m.p("a.txt"), b"1");
    checkpoint(&m, "one");
    ws_ok(&m, &["note", "--type", "decision", "use the fast path"]);
    write_synced(&m.p("b.txt"), b"2");
    ws_ok(&m, &["restore", "HEAD"]);
    let t = j(&m, &["timeline"]);
    let es = t["entries"].as_array().unwrap();
    let kinds: Vec<&str> = es.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["checkpoint", "note", "restore"], "{t}");
    assert_eq!(es[1]["meta"]["note"]["type"], "decision");
    // The restore removed b.txt: the entry names it.
    assert_eq!(es[2]["files"]["paths"][0]["path"], "b.txt", "{t}");
    assert_eq!(es[2]["files"]["count"], 1);
    let human = ws_ok(&m, &["timeline"]);
    assert!(human.contains("[decision] use the fast path"), "{human}");
    // Filters; a note does not count for undo.
    assert_eq!(
        j(&m, &["timeline", "--actor", "agent"])["entries"],
        json!([])
    );
    assert_eq!(
        j(&m, &["timeline", "--since", "1h"])["entries"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let e = err_of(&m, &["note", "--type", "rant", "x"]);
    assert!(e.contains("rant"), "{e}");
    ws_ok(&m, &["note", "before undo"]);
    ws_ok(&m, &["undo"]);
    assert!(
        m.p("b.txt").exists(),
        "undo skipped the note and undid the restore"
    );
}

#[test]
fn adopt_moves_the_attached_branch_and_undo_moves_it_back() {
    let m = Mount::new();
    write_synced(&m.p("a"), b"0");
    let c0 = checkpoint(&m, "zero");
    ws_ok(&m, &["checkout", "-b", "main"]);
    let doc = j(&m, &["experiment", "-c", "echo 1 > a"]);
    assert_eq!(doc["winner"], 1, "{doc}");
    let run = doc["runs"][0]["checkpoint"].as_str().unwrap().to_string();
    ws_ok(&m, &["experiment", "adopt", "--winner"]);
    assert_eq!(read(&m, "a"), "1\n");
    assert_eq!(head(&m), (run.clone(), json!("main")));
    assert_eq!(branch_at(&m, "main").as_deref(), Some(run.as_str()));
    ws_ok(&m, &["undo"]);
    assert_eq!(read(&m, "a"), "0");
    assert_eq!(branch_at(&m, "main").as_deref(), Some(c0.as_str()));
    assert_eq!(head(&m), (c0, json!("main")));
}

#[test]
fn undo_right_after_exec_rewinds_exactly_that_command_and_exec_refs_resolve() {
    let m = Mount::new();
    write_synced(&m.p("keep"), b"k");
    checkpoint(&m, "base");
    ws_ok(&m, &["checkout", "-b", "main"]);
    // A pending change before the exec is not the command's: undo keeps it.
    write_synced(&m.p("pending"), b"p");
    let o = ws(
        &m,
        &[
            "--explanation",
            "make a file",
            "exec",
            "--",
            "sh",
            "-c",
            "echo x > made; rm keep",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(m.p("made").exists() && !m.p("keep").exists());
    let d = ws_ok(&m, &["diff", "exec@1~", "exec@1"]);
    assert!(d.contains("made") && d.contains("keep"), "{d}");
    assert!(!d.contains("pending"), "{d}");
    let log = j(&m, &["op", "log", "-n", "1"]);
    assert_eq!(log["operations"][0]["kind"], "exec");
    assert_eq!(log["operations"][0]["explanation"], "make a file");
    ws_ok(&m, &["undo"]);
    assert!(!m.p("made").exists());
    assert_eq!(read(&m, "keep"), "k");
    assert_eq!(read(&m, "pending"), "p");
    assert_eq!(head(&m).1, json!("main"));
    // exec@1 still names the state after the command.
    let s = j(&m, &["show", "exec@1"]);
    assert!(s.to_string().contains("exec"), "{s}");
}

/// Two sessions attached to one branch checkpoint at once: the branch's guard
/// lets exactly one of them move it at a time; the other, finding it moved, is
/// detached (never left "attached" to a branch that names another state, and the
/// branch never goes back to an older checkpoint).
#[test]
fn two_sessions_on_one_branch_never_leave_it_inconsistent() {
    let m = Mount::new();
    let mp = m.mp.to_str().unwrap().to_string();
    write_synced(&m.p("f"), b"0");
    checkpoint(&m, "zero");
    ws_ok(&m, &["checkout", "-b", "main"]);
    let fmp = m.tmp.path().join("fork");
    fs::create_dir(&fmp).unwrap();
    let fmp = fmp.to_str().unwrap().to_string();
    tf_ok(&m.store, &["-C", &mp, "fork", "other", "--mount", &fmp]);
    // Branch names are per session: the fork names s's main `s/main`, and its
    // checkout of it detaches (main is s's to move), so only s's checkpoints may
    // move it, however they interleave with the fork's.
    let co: Value = serde_json::from_str(&tf_ok(
        &m.store,
        &["--json", "-C", &fmp, "checkout", "s/main"],
    ))
    .unwrap();
    assert_eq!(co["detached"], true, "{co}");
    let store = m.store.clone();
    let made: Vec<Vec<String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = [mp.clone(), fmp.clone()]
            .into_iter()
            .map(|dir| {
                let store = store.clone();
                sc.spawn(move || {
                    let mut ids = Vec::new();
                    for i in 0..12 {
                        write_synced(
                            &PathBuf::from(&dir).join("f"),
                            format!("{dir}{i}").as_bytes(),
                        );
                        let v: Value = serde_json::from_str(&tf_ok(
                            &store,
                            &["--json", "-C", &dir, "checkpoint", "-m", &format!("{i}")],
                        ))
                        .unwrap();
                        ids.push(v["checkpoint"]["id"].as_str().unwrap().to_string());
                    }
                    ids
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let main = branch_at(&m, "main").unwrap();
    let mut attached = 0;
    for dir in [&mp, &fmp] {
        let s: Value =
            serde_json::from_str(&tf_ok(&m.store, &["--json", "-C", dir, "status"])).unwrap();
        if s["branch"] == "main" {
            attached += 1;
            assert_eq!(
                s["head"],
                main.as_str(),
                "{dir} attached to main but main moved"
            );
        }
    }
    assert_eq!(attached, 1, "s stays attached to main, the fork never was");
    // The branch names the newest checkpoint of the session that owns it.
    assert_eq!(
        made[0].last(),
        Some(&main),
        "main ({main}) is not the last checkpoint of session s"
    );
    crate::harness::umount_ok(&m.store, std::path::Path::new(&fmp));
}

/// The save taken before a restore or checkout is a safety net beside HEAD: the
/// attached branch never takes in the changes being thrown away.
#[test]
fn restore_of_the_attached_branch_discards_pending_changes_and_leaves_the_branch() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"1");
    let c1 = checkpoint(&m, "one");
    ws_ok(&m, &["checkout", "-b", "main"]);
    write_synced(&m.p("f"), b"scratch");
    let v = j(&m, &["restore", "main"]);
    assert_eq!(read(&m, "f"), "1");
    assert_eq!(branch_at(&m, "main").as_deref(), Some(c1.as_str()));
    assert_eq!(head(&m), (c1.clone(), json!("main")));
    assert_eq!(j(&m, &["status"])["changes"], json!([]));
    // The thrown-away state is kept (ref and undo).
    let saved = v["saved"]["ref"].as_str().unwrap().to_string();
    assert!(
        j(&m, &["show", &format!("{saved}:f")])
            .to_string()
            .contains("scratch")
    );
    ws_ok(&m, &["undo"]);
    assert_eq!(read(&m, "f"), "scratch");
    assert_eq!(branch_at(&m, "main").as_deref(), Some(c1.as_str()));
}

/// `checkout -b NAME [REF]` is one operation (kind `checkout`) that names the new
/// branch, so one undo reverts all of it: HEAD back and the branch gone. Before,
/// it was a `branch` and a `checkout` record, and an undo left the branch.
#[test]
fn checkout_b_is_one_operation_and_one_undo_reverts_it() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"1");
    let c1 = checkpoint(&m, "one");
    let ops = |m: &Mount| {
        j(m, &["op", "log", "-n", "50"])["operations"]
            .as_array()
            .unwrap()
            .len()
    };
    let n = ops(&m);
    // Without REF, pending changes become the new branch's checkpoint.
    write_synced(&m.p("f"), b"2");
    ws_ok(&m, &["checkout", "-b", "main"]);
    assert_eq!(ops(&m), n + 1);
    let last = j(&m, &["op", "log", "-n", "1"])["operations"][0].clone();
    assert_eq!(last["kind"], "checkout", "{last}");
    assert_eq!(last["before"]["branches"]["main"], Value::Null, "{last}");
    let c2 = branch_at(&m, "main").unwrap();
    assert_ne!(c2, c1);
    assert_eq!(head(&m), (c2.clone(), json!("main")));
    assert_eq!(read(&m, "f"), "2");
    ws_ok(&m, &["undo"]);
    assert_eq!(branch_at(&m, "main"), None);
    assert_eq!(head(&m), (c1.clone(), Value::Null));
    assert_eq!(read(&m, "f"), "2");
    // With REF: the branch at REF, checked out, pending changes saved first.
    ws_ok(&m, &["checkout", "-b", "old", &c1]);
    assert_eq!(ops(&m), n + 3);
    assert_eq!(head(&m), (c1.clone(), json!("old")));
    assert_eq!(read(&m, "f"), "1");
    ws_ok(&m, &["undo"]);
    assert_eq!(branch_at(&m, "old"), None);
    assert_eq!(read(&m, "f"), "2");
    // A name that exists is refused and nothing changes.
    ws_ok(&m, &["branch", "taken"]);
    let e = err_of(&m, &["checkout", "-b", "taken", &c1]);
    assert!(e.contains("already exists"), "{e}");
    assert_eq!(read(&m, "f"), "2");
}
