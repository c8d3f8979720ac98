//! The conversation log (issue 15 §1) on real mounts: append/list/flush, one
//! writer for many appenders, the bounded queue, durability, rewind and its undo,
//! fork from a message, continue, export/import, the user_message trigger, the
//! metadata merge, and bad input.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::*;

fn j(m: &Mount, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ws_ok(m, &a)).unwrap()
}

fn append(m: &Mount, role: &str, content: &str) -> String {
    let v = j(
        m,
        &["messages", "append", "--role", role, "--content", content],
    );
    v["id"].as_str().unwrap().to_string()
}

fn list(m: &Mount, extra: &[&str]) -> Vec<Value> {
    let mut a = vec!["messages"];
    a.extend_from_slice(extra);
    j(m, &a)["messages"].as_array().unwrap().clone()
}

fn contents(msgs: &[Value]) -> Vec<Value> {
    msgs.iter().map(|m| m["content"].clone()).collect()
}

fn flush(m: &Mount) -> u64 {
    j(m, &["messages", "flush"])["durable"].as_u64().unwrap()
}

fn session_sock(m: &Mount) -> PathBuf {
    let canon = m.mp.canonicalize().unwrap();
    let rec = treefork::control::find_mount(&canon).expect("mount record");
    rec.socket
        .unwrap_or_else(|| treefork::control::session_socket(&canon).unwrap())
}

/// One request on an open connection; the response line.
fn call(c: &mut BufReader<UnixStream>, req: &Value) -> Value {
    let mut line = serde_json::to_vec(req).unwrap();
    line.push(b'\n');
    c.get_mut().write_all(&line).unwrap();
    loop {
        let mut l = String::new();
        assert!(c.read_line(&mut l).unwrap() > 0, "connection closed");
        let v: Value = serde_json::from_str(&l).unwrap();
        if v.get("event").is_none() {
            return v;
        }
    }
}

fn connect(sock: &Path) -> BufReader<UnixStream> {
    BufReader::new(UnixStream::connect(sock).unwrap())
}

fn read(m: &Mount, p: &str) -> String {
    std::fs::read_to_string(m.p(p)).unwrap_or_else(|_| "<missing>".into())
}

#[test]
fn append_list_and_flush() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"one");
    let a = append(&m, "user", "\"hello\"");
    let b = j(
        &m,
        &[
            "messages",
            "append",
            "--role",
            "assistant",
            "--content",
            r#"{"text":"calling"}"#,
            "--tool-calls",
            r#"[{"id":"call_1","name":"ls"}]"#,
        ],
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let c = j(
        &m,
        &[
            "messages",
            "append",
            "--role",
            "tool",
            "--content",
            "plain words",
            "--tool-call-id",
            "call_1",
            "--meta",
            r#"{"k":1}"#,
        ],
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(flush(&m), 3);
    let all = list(&m, &[]);
    let ids: Vec<&str> = all.iter().map(|x| x["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [a.as_str(), b.as_str(), c.as_str()]);
    let seqs: Vec<u64> = all.iter().map(|x| x["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(all[0]["content"], json!("hello"));
    assert_eq!(all[1]["tool_calls"][0]["id"], json!("call_1"));
    assert_eq!(all[2]["content"], json!("plain words"));
    assert_eq!(all[2]["tool_call_id"], json!("call_1"));
    assert_eq!(all[2]["meta"]["k"], json!(1));
    for x in &all {
        assert_eq!(x["workspace"].as_str().unwrap().len(), 64, "{x}");
        assert!(x["time_ns"].as_str().unwrap().parse::<i128>().unwrap() > 0);
        assert!(x["time"].as_i64().unwrap() > 1_600_000_000);
        assert!(x.get("op").is_some() && x.get("checkpoint").is_some());
    }
    // Filters: the newest N, up to an id, after an id.
    assert_eq!(contents(&list(&m, &["-n", "1"])), [json!("plain words")]);
    assert_eq!(list(&m, &["--upto", &b]).len(), 2);
    assert_eq!(list(&m, &["--after", &a]).len(), 2);
    // A repeated id is idempotent.
    let again = j(
        &m,
        &[
            "messages",
            "append",
            "--role",
            "user",
            "--content",
            "1",
            "--id",
            &a,
        ],
    );
    assert_eq!(again["duplicate"], json!(true));
    assert_eq!(flush(&m), 3);
    // The transcript is a stream of its own.
    j(
        &m,
        &[
            "messages",
            "append",
            "--role",
            "assistant",
            "--content",
            "{}",
            "--stream",
            "transcript",
            "--flush",
        ],
    );
    assert_eq!(list(&m, &[]).len(), 3);
    assert_eq!(list(&m, &["--stream", "transcript"]).len(), 1);
    // The human listing shows role and content.
    let human = ws_ok(&m, &["messages"]);
    assert!(
        human.contains("assistant") && human.contains("plain words"),
        "{human}"
    );
    // A message records the checkpoint and operation current when written.
    ws_ok(&m, &["checkpoint", "-m", "c1"]);
    let head = j(&m, &["status"])["head"].as_str().map(str::to_string);
    let d = append(&m, "user", "\"after checkpoint\"");
    flush(&m);
    let last = list(&m, &["-n", "1"]);
    assert_eq!(last[0]["id"], json!(d));
    assert!(last[0]["op"].as_u64().is_some());
    if let Some(h) = head {
        assert_eq!(last[0]["checkpoint"], json!(h));
    }
}

#[test]
fn four_processes_append_concurrently_with_unique_ordered_seqs() {
    let m = Mount::new();
    let per = 12;
    std::thread::scope(|sc| {
        for w in 0..4 {
            let m = &m;
            sc.spawn(move || {
                for n in 0..per {
                    let content = json!({"w": w, "n": n}).to_string();
                    ws_ok(
                        m,
                        &[
                            "messages",
                            "append",
                            "--role",
                            "user",
                            "--content",
                            &content,
                        ],
                    );
                }
            });
        }
    });
    assert_eq!(flush(&m), 4 * per);
    let all = list(&m, &[]);
    assert_eq!(all.len(), 4 * per as usize);
    let seqs: Vec<u64> = all.iter().map(|x| x["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=4 * per).collect::<Vec<_>>());
    // Each appender's messages appear in the order it appended them.
    for w in 0..4 {
        let ns: Vec<u64> = all
            .iter()
            .filter(|x| x["content"]["w"] == json!(w))
            .map(|x| x["content"]["n"].as_u64().unwrap())
            .collect();
        assert_eq!(ns, (0..per).collect::<Vec<_>>(), "writer {w}");
    }
}

#[test]
fn a_full_queue_makes_appends_wait_and_drops_nothing() {
    // The writer sleeps 300 ms before each batch (of at most 64): 400 appends
    // overrun the 256-entry queue.
    let m = Mount::with_failpoint("message-writer-delay-ms:300");
    let sock = session_sock(&m);
    let slowest = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|w| {
                let sock = sock.clone();
                sc.spawn(move || {
                    let mut c = connect(&sock);
                    let mut slowest = Duration::ZERO;
                    for n in 0..100 {
                        let t = Instant::now();
                        let r = call(
                            &mut c,
                            &json!({"v":1,"op":"message_append","role":"user","content":{"w":w,"n":n}}),
                        );
                        slowest = slowest.max(t.elapsed());
                        assert_eq!(r["ok"], json!(true), "{r}");
                        assert_eq!(r["queued"], json!(true), "{r}");
                    }
                    slowest
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    });
    assert!(
        slowest >= Duration::from_millis(200),
        "no append waited for room ({slowest:?}): the queue never filled"
    );
    let mut c = connect(&sock);
    let r = call(&mut c, &json!({"v":1,"op":"message_flush"}));
    assert_eq!(r["durable"], json!(400), "{r}");
    let all = list(&m, &[]);
    assert_eq!(all.len(), 400);
    let mut seen: Vec<(u64, u64)> = all
        .iter()
        .map(|x| {
            (
                x["content"]["w"].as_u64().unwrap(),
                x["content"]["n"].as_u64().unwrap(),
            )
        })
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 400);
}

#[test]
fn messages_survive_remount_and_kill_after_flush() {
    let m = Mount::new();
    let a = append(&m, "user", "\"before remount\"");
    flush(&m);
    m.remount();
    assert_eq!(list(&m, &[])[0]["id"], json!(a));
    let b = append(&m, "assistant", "\"before kill\"");
    assert_eq!(flush(&m), 2);
    m.kill_daemon();
    m.mount();
    let all = list(&m, &[]);
    assert_eq!(
        all.iter().map(|x| x["id"].clone()).collect::<Vec<_>>(),
        [json!(a), json!(b)]
    );
    // Appends go on after the recorded ones.
    append(&m, "user", "\"after\"");
    assert_eq!(flush(&m), 3);
    assert_eq!(list(&m, &["-n", "1"])[0]["seq"], json!(3));
}

#[test]
fn rewind_both_files_and_conversation_and_undo() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"v1");
    let m1 = append(&m, "user", "\"first\"");
    flush(&m);
    // Changes by any program after the message, then more messages.
    sh(&m.mp, "echo v2 > f; echo new > g");
    let m2 = append(&m, "assistant", "\"second\"");
    let _m3 = append(&m, "user", "\"third\"");
    flush(&m);
    // Dry run: reports, changes nothing.
    let d = j(&m, &["rewind", "--to", &m1, "--dry-run"]);
    assert_eq!(d["conversation"]["dropped"], json!(2), "{d}");
    assert_eq!(d["files"]["changes"].as_array().unwrap().len(), 2, "{d}");
    assert_eq!(read(&m, "f"), "v2\n");
    assert_eq!(list(&m, &[]).len(), 3);
    // Both (the default).
    let r = j(&m, &["rewind", "--to", &m1]);
    assert!(r["op"].as_u64().is_some(), "{r}");
    assert_eq!(read(&m, "f"), "v1");
    assert!(!m.p("g").exists());
    assert_eq!(contents(&list(&m, &[])), [json!("first")]);
    // The conversation goes on from there.
    append(&m, "assistant", "\"redo\"");
    flush(&m);
    assert_eq!(contents(&list(&m, &[])), [json!("first"), json!("redo")]);
    // Undo brings the files and the hidden messages back.
    ws_ok(&m, &["undo"]);
    assert_eq!(read(&m, "f"), "v2\n");
    assert_eq!(read(&m, "g"), "new\n");
    assert_eq!(
        contents(&list(&m, &[])),
        [
            json!("first"),
            json!("second"),
            json!("third"),
            json!("redo")
        ]
    );
    // Redo hides them again.
    ws_ok(&m, &["redo"]);
    assert_eq!(contents(&list(&m, &[])), [json!("first"), json!("redo")]);
    ws_ok(&m, &["undo"]);
    // Files only: the conversation stays.
    j(&m, &["rewind", "--to", &m2, "--what", "files"]);
    assert_eq!(read(&m, "f"), "v2\n");
    assert_eq!(list(&m, &[]).len(), 4);
    sh(&m.mp, "echo v3 > f");
    j(&m, &["rewind", "--to", &m1, "--what", "files"]);
    assert_eq!(read(&m, "f"), "v1");
    assert_eq!(list(&m, &[]).len(), 4);
    // Conversation only: the files stay.
    j(&m, &["rewind", "--to", &m2, "--what", "conversation"]);
    assert_eq!(read(&m, "f"), "v1");
    assert_eq!(contents(&list(&m, &[])), [json!("first"), json!("second")]);
    // The pending v3 was saved before the files rewind: undo of both rewinds
    // brings it and the conversation back.
    ws_ok(&m, &["undo"]);
    assert_eq!(list(&m, &[]).len(), 4);
    ws_ok(&m, &["undo"]);
    assert_eq!(read(&m, "f"), "v3\n");
    let log = ws_ok(&m, &["op", "log"]);
    assert!(log.contains("rewind"), "{log}");
}

#[test]
fn fork_from_a_message_gets_its_files_and_messages() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"at-one");
    let one = append(&m, "user", "\"one\"");
    flush(&m);
    sh(&m.mp, "echo later > f");
    append(&m, "assistant", "\"two\"");
    flush(&m);
    let dir = m.tmp.path().join("fork");
    let v = j(
        &m,
        &[
            "fork",
            "f1",
            "--from-message",
            &one,
            "--mount",
            dir.to_str().unwrap(),
        ],
    );
    assert!(v.get("checkpoint").is_some(), "{v}");
    assert_eq!(std::fs::read_to_string(dir.join("f")).unwrap(), "at-one");
    // The parent is untouched; its workspace is not reused.
    assert_eq!(read(&m, "f"), "later\n");
    let fm = Mount::at(
        tempfile::tempdir().unwrap(),
        m.store.clone(),
        dir.clone(),
        "f1",
    );
    assert_eq!(contents(&list(&fm, &[])), [json!("one")]);
    // The fork's log goes on by itself.
    append(&fm, "user", "\"in fork\"");
    flush(&fm);
    assert_eq!(list(&fm, &[]).len(), 2);
    assert_eq!(list(&m, &[]).len(), 2);
    // A plain fork copies the whole conversation.
    let dir2 = m.tmp.path().join("fork2");
    ws_ok(&m, &["fork", "f2", "--mount", dir2.to_str().unwrap()]);
    let fm2 = Mount::at(tempfile::tempdir().unwrap(), m.store.clone(), dir2, "f2");
    assert_eq!(contents(&list(&fm2, &[])), [json!("one"), json!("two")]);
    // An unknown message is not_found.
    let o = ws(
        &m,
        &[
            "--json",
            "fork",
            "f3",
            "--from-message",
            "00000000-0000-4000-8000-000000000000",
            "--mount",
            m.tmp.path().join("f3").to_str().unwrap(),
        ],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("has no message"), "{e}");
}

#[test]
fn continue_forks_the_latest_session_of_a_project_with_its_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("a"), "base").unwrap();
    let m = Mount::with_options("p", &["--from", repo.to_str().unwrap()]);
    sh(&m.mp, "echo edited > a");
    append(&m, "user", "\"plan\"");
    append(&m, "assistant", "\"done\"");
    let dir = m.tmp.path().join("cont");
    let v: Value = serde_json::from_str(&tf_ok(
        &m.store,
        &[
            "--json",
            "continue",
            "--project",
            repo.to_str().unwrap(),
            "--name",
            "p2",
            "--mount",
            dir.to_str().unwrap(),
        ],
    ))
    .unwrap();
    assert_eq!(v["from"], json!("p"), "{v}");
    assert_eq!(v["messages"], json!(2), "{v}");
    assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "edited\n");
    let c = Mount::at(tempfile::tempdir().unwrap(), m.store.clone(), dir, "p2");
    assert_eq!(contents(&list(&c, &[])), [json!("plan"), json!("done")]);
    // The continued session is now the latest of the project.
    append(&c, "user", "\"more\"");
    flush(&c);
    let dir3 = m.tmp.path().join("cont3");
    let v: Value = serde_json::from_str(&tf_ok(
        &m.store,
        &[
            "--json",
            "continue",
            "--project",
            repo.to_str().unwrap(),
            "--name",
            "p3",
            "--mount",
            dir3.to_str().unwrap(),
        ],
    ))
    .unwrap();
    assert_eq!(v["from"], json!("p2"), "{v}");
    assert_eq!(v["messages"], json!(3), "{v}");
    crate::harness::umount_ok(&m.store, &dir3);
    // A project no session came from.
    let o = tf(
        &m.store,
        &[
            "--json",
            "continue",
            "--project",
            tmp.path().to_str().unwrap(),
            "--name",
            "p4",
            "--mount",
            m.tmp.path().join("c4").to_str().unwrap(),
        ],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("no session was imported"),
        "{e}"
    );
}

#[test]
fn export_import_round_trip() {
    let m = Mount::new();
    append(&m, "system", "\"be brief\"");
    append(&m, "user", r#"{"parts":[1,2]}"#);
    j(
        &m,
        &[
            "messages",
            "append",
            "--role",
            "tool",
            "--content",
            "\"out\"",
            "--tool-call-id",
            "c9",
        ],
    );
    let file = m.tmp.path().join("conv.jsonl");
    j(&m, &["messages", "export", "-o", file.to_str().unwrap()]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 3);
    // Without -o the JSONL goes to stdout.
    assert_eq!(ws_ok(&m, &["messages", "export"]), text);
    let n = Mount::at(
        tempfile::tempdir().unwrap(),
        m.store.clone(),
        m.tmp.path().join("other"),
        "other",
    );
    n.mount();
    let r = j(&n, &["messages", "import", file.to_str().unwrap()]);
    assert_eq!(r["imported"], json!(3), "{r}");
    let (a, b) = (list(&m, &[]), list(&n, &[]));
    for (x, y) in a.iter().zip(&b) {
        for k in ["id", "role", "content", "tool_call_id", "seq"] {
            assert_eq!(x[k], y[k], "{k}");
        }
    }
    assert_eq!(b.len(), 3);
    // Importing again adds nothing (ids are idempotent).
    let r = j(&n, &["messages", "import", file.to_str().unwrap()]);
    assert_eq!(r["duplicates"], json!(3), "{r}");
    assert_eq!(list(&n, &[]).len(), 3);
}

#[test]
fn user_message_trigger_checkpoints_at_each_user_message() {
    let m = Mount::new();
    ws_ok(&m, &["config", "auto_checkpoint_on=user_message"]);
    write_synced(&m.p("f"), b"1");
    append(&m, "user", "\"first prompt\"");
    append(&m, "assistant", "\"answer\"");
    flush(&m);
    write_synced(&m.p("f"), b"2");
    append(&m, "user", "\"second prompt\"");
    flush(&m);
    let log = j(&m, &["log"]);
    let cps: Vec<&Value> = log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["trigger"] == json!("message"))
        .collect();
    assert_eq!(cps.len(), 2, "{log}");
    // Each user message names the checkpoint taken for it.
    let all = list(&m, &[]);
    assert_eq!(all[2]["checkpoint"], cps[0]["id"]);
    assert_eq!(all[0]["checkpoint"], cps[1]["id"]);
    // An unknown value is refused.
    let o = ws(&m, &["config", "auto_checkpoint_on=sometimes"]);
    assert!(!o.status.success());
}

#[test]
fn session_metadata_merges() {
    let m = Mount::new();
    j(
        &m,
        &[
            "messages",
            "meta",
            "--model",
            "m1",
            "--add-turns",
            "2",
            "--add-cost",
            "0.5",
        ],
    );
    let v = j(
        &m,
        &[
            "messages",
            "meta",
            "--add-turns",
            "3",
            "--add-cost",
            "0.25",
            "--exit-reason",
            "end_turn",
        ],
    );
    let c = &v["conversation"];
    assert_eq!(c["model"], json!("m1"), "{v}");
    assert_eq!(c["turns"], json!(5));
    assert_eq!(c["cost"], json!(0.75));
    assert_eq!(c["exit_reason"], json!("end_turn"));
    // Stored in the session's info record.
    let show = j(&m, &["session", "show"]);
    let text = show.to_string();
    assert!(
        text.contains("end_turn") && text.contains("\"turns\":5"),
        "{show}"
    );
}

#[test]
fn bad_input_is_refused() {
    let m = Mount::new();
    let sock = session_sock(&m);
    let mut c = connect(&sock);
    let code = |v: &Value| {
        v.pointer("/error/code")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let r = call(
        &mut c,
        &json!({"v":1,"op":"message_append","role":"robot","content":"x"}),
    );
    assert_eq!(code(&r).as_deref(), Some("invalid"), "{r}");
    let r = call(
        &mut c,
        &json!({"v":1,"op":"message_append","role":"user","content":"x","id":"../../etc"}),
    );
    assert_eq!(code(&r).as_deref(), Some("invalid"), "{r}");
    let r = call(
        &mut c,
        &json!({"v":1,"op":"message_append","role":"user","content":"x","stream":"other"}),
    );
    assert_eq!(code(&r).as_deref(), Some("invalid"), "{r}");
    // Oversized content: refused whole (by the request limit or the content limit).
    let big = "x".repeat((1 << 20) + 10);
    let r = call(
        &mut c,
        &json!({"v":1,"op":"message_append","role":"user","content":big}),
    );
    assert_eq!(r["ok"], json!(false), "oversized content accepted");
    let mut c = connect(&sock);
    let unknown = "00000000-0000-4000-8000-000000000000";
    let r = call(&mut c, &json!({"v":1,"op":"rewind","to":unknown}));
    assert_eq!(code(&r).as_deref(), Some("not_found"), "{r}");
    let r = call(&mut c, &json!({"v":1,"op":"messages","upto":unknown}));
    assert_eq!(code(&r).as_deref(), Some("not_found"), "{r}");
    let r = call(&mut c, &json!({"v":1,"op":"rewind","to":"nope"}));
    assert_eq!(code(&r).as_deref(), Some("invalid"), "{r}");
    let r = call(
        &mut c,
        &json!({"v":1,"op":"session_meta_update","add_cost":-1.0}),
    );
    assert_eq!(code(&r).as_deref(), Some("invalid"), "{r}");
    // Nothing was recorded.
    assert!(list(&m, &[]).is_empty());
    // The CLI refuses a bad role before sending.
    let o = ws(
        &m,
        &["messages", "append", "--role", "robot", "--content", "1"],
    );
    assert!(!o.status.success());
}

#[test]
fn gc_keeps_the_workspace_a_message_names() {
    let m = Mount::new();
    write_synced(&m.p("f"), &pattern(100_000, 1));
    let one = append(&m, "user", "\"one\"");
    flush(&m);
    // Nothing but the message names that state once f is rewritten.
    write_synced(&m.p("f"), &pattern(100_000, 2));
    ws_ok(&m, &["checkpoint", "-m", "later"]);
    tf_ok(&m.store, &["gc"]);
    j(&m, &["rewind", "--to", &one, "--what", "files"]);
    assert_eq!(std::fs::read(m.p("f")).unwrap(), pattern(100_000, 1));
    let fsck = tf(&m.store, &["fsck"]);
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stdout)
    );
}

#[test]
fn a_clean_unmount_writes_every_queued_message() {
    // A slow writer: the appends are answered `queued` long before they are written.
    let m = Mount::with_failpoint("message-writer-delay-ms:300");
    let sock = session_sock(&m);
    let mut c = connect(&sock);
    for n in 0..100 {
        let r = call(
            &mut c,
            &json!({"v":1,"op":"message_append","role":"assistant","content":{"n":n}}),
        );
        assert_eq!(r["queued"], json!(true), "{r}");
    }
    drop(c);
    // No message_flush: the unmount itself must drain the queue.
    m.umount();
    m.mount();
    assert_eq!(list(&m, &[]).len(), 100);
}
