//! `pull` and `mount --from-remote` against a real S3 server (SeaweedFS), with
//! two store directories standing in for two machines: a session pushed from A
//! is mounted on B from the remote (same files, same history), worked on,
//! pushed back, and pulled into A.

use std::path::Path;

use serde_json::Value;

use super::S3Server;
use crate::harness::{Mount, daemon_log, pattern, tf, write_synced, ws_ok};

pub(super) fn json_ok(store: &Path, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let o = tf(store, &full);
    assert!(
        o.status.success(),
        "treefork {args:?} failed ({:?}): {}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        daemon_log(store)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

pub(super) fn add_remote(store: &Path, s3: &S3Server, prefix: &str) {
    let url = s3.url(prefix);
    json_ok(
        store,
        &["remote", "add", "origin", &url, "--endpoint", &s3.endpoint],
    );
}

/// A second "machine": a store and a mountpoint, nothing mounted yet.
pub(super) fn machine(session: &str) -> Mount {
    let tmp = tempfile::Builder::new()
        .prefix("tf-test-b-")
        .tempdir()
        .unwrap();
    let store = tmp.path().join("store");
    let mp = tmp.path().join("mnt");
    // Only `mount` creates a store: create it with a scratch session.
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let sp = scratch.to_str().unwrap();
    crate::harness::tf_ok(&store, &["mount", sp, "--session", "scratch"]);
    crate::harness::umount_ok(&store, &scratch);
    Mount::at(tmp, store, mp, session)
}

/// Mount `m`'s session from remote ref `spec` (creating its store).
pub(super) fn mount_from_remote(m: &Mount, spec: &str) -> Value {
    let mp = m.mp.to_str().unwrap();
    let o = tf(
        &m.store,
        &[
            "--json",
            "mount",
            mp,
            "--session",
            &m.session,
            "--from-remote",
            spec,
        ],
    );
    assert!(
        o.status.success(),
        "mount --from-remote failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store)
    );
    serde_json::from_slice(&o.stdout).unwrap_or(Value::Null)
}

pub(super) fn files() -> Vec<(String, Vec<u8>)> {
    let mut v = vec![
        ("README".to_string(), b"hello from A\n".to_vec()),
        ("src/big.bin".to_string(), pattern(700_000, 1)),
    ];
    for i in 0..12 {
        v.push((
            format!("src/d{}/f{i}.txt", i % 3),
            pattern(3000 + i * 7, i as u64 + 10),
        ));
    }
    v
}

#[test]
fn a_session_travels_to_another_store_and_back() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    // Machine A: a session with files, a checkpoint and a message, pushed.
    let a = Mount::new();
    for (p, d) in files() {
        write_synced(&a.p(&p), &d);
    }
    ws_ok(&a, &["checkpoint", "-m", "from A"]);
    ws_ok(
        &a,
        &[
            "messages",
            "append",
            "--role",
            "user",
            "--content",
            "hi from A",
            "--flush",
        ],
    );
    write_synced(&a.p("pending.txt"), b"not checkpointed\n");
    add_remote(&a.store, &s3, "e2e");
    json_ok(&a.store, &["push"]);

    // Machine B: mounted from the remote at once; same files, same history.
    let b = machine("s2");
    add_remote(&b.store, &s3, "e2e");
    let t = std::time::Instant::now();
    mount_from_remote(&b, "origin/s");
    let mut names: Vec<String> = std::fs::read_dir(&b.mp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "mount + first ls took {:?}",
        t.elapsed()
    );
    names.sort();
    assert_eq!(names, ["README", "pending.txt", "src"]);
    for (p, d) in files() {
        assert_eq!(std::fs::read(b.p(&p)).unwrap(), d, "{p}");
    }
    assert_eq!(
        std::fs::read(b.p("pending.txt")).unwrap(),
        b"not checkpointed\n"
    );
    let log: Value = serde_json::from_str(&ws_ok(&b, &["--json", "log"])).unwrap();
    assert_eq!(log["checkpoints"][0]["message"], "from A", "{log}");
    let msgs = ws_ok(&b, &["--json", "messages"]);
    assert!(msgs.contains("hi from A"), "{msgs}");
    // The op log came too: A's checkpoint is in it, and undo/redo work on it.
    let ops = ws_ok(&b, &["--json", "op", "log"]);
    assert!(ops.contains("\"checkpoint\""), "{ops}");
    ws_ok(&b, &["undo"]);
    ws_ok(&b, &["redo"]);
    assert_eq!(std::fs::read(b.p("README")).unwrap(), b"hello from A\n");

    // B works and pushes back (its upstream is origin/s: a fast-forward).
    write_synced(&b.p("from_b.txt"), b"B was here\n");
    ws_ok(&b, &["checkpoint", "-m", "from B"]);
    let pushed = json_ok(&b.store, &["push"]);
    assert_eq!(pushed["refs"][0]["dst"], "s", "{pushed}");
    assert_eq!(pushed["refs"][0]["status"], "updated", "{pushed}");

    // A pulls: its session is mounted, so only the tracking ref moves; B's
    // checkpoint is reachable as origin/s.
    let pulled = json_ok(&a.store, &["pull"]);
    let r = pulled["refs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "s")
        .unwrap()
        .clone();
    assert_eq!(r["status"], "tracking-only", "{pulled}");
    let log: Value = serde_json::from_str(&ws_ok(&a, &["--json", "log", "origin/s"])).unwrap();
    assert_eq!(log["checkpoints"][0]["message"], "from B", "{log}");
    // A second pull fetches nothing.
    let again = json_ok(&a.store, &["pull"]);
    assert_eq!(again["checkpoints"], 0, "{again}");
    assert_eq!(again["nodes"], 0, "{again}");
    // A checks B's state out: B's file appears (lazily fetched).
    ws_ok(&a, &["checkout", "origin/s"]);
    assert_eq!(std::fs::read(a.p("from_b.txt")).unwrap(), b"B was here\n");
    // A local session of that name exists: mounting it from the remote again is
    // a conflict.
    let mp2 = b.tmp.path().join("mnt2");
    std::fs::create_dir_all(&mp2).unwrap();
    let o = tf(
        &b.store,
        &[
            "--json",
            "mount",
            mp2.to_str().unwrap(),
            "--session",
            "s2",
            "--from-remote",
            "origin/s",
        ],
    );
    assert!(!o.status.success());
    let e: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(e["error"]["code"], "conflict", "{e}");
}

/// The journal warning of a store that had one and lost it.
const ANCHORED: &str = "a new one is anchored";

#[test]
fn a_new_store_for_from_remote_does_not_warn() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let a = Mount::new();
    write_synced(&a.p("f.txt"), b"from A\n");
    ws_ok(&a, &["checkpoint", "-m", "from A"]);
    add_remote(&a.store, &s3, "fresh");
    json_ok(&a.store, &["push"]);
    // Machine B as the README sets it up: `remote add` creates the store (in the
    // CLI's own process, whose log goes to the terminal), then mount from it.
    let tmp = tempfile::Builder::new()
        .prefix("tf-test-b-")
        .tempdir()
        .unwrap();
    let (store, mp) = (tmp.path().join("store"), tmp.path().join("mnt"));
    let b = Mount::at(tmp, store, mp, "s");
    let url = s3.url("fresh");
    let o = tf(
        &b.store,
        &["remote", "add", "origin", &url, "--endpoint", &s3.endpoint],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains(ANCHORED) && !err.contains("WARN"), "{err}");
    mount_from_remote(&b, "origin/s");
    assert_eq!(std::fs::read(b.p("f.txt")).unwrap(), b"from A\n");
    let log = daemon_log(&b.store);
    assert!(!log.contains(ANCHORED), "{log}");
}

#[test]
fn a_store_that_lost_its_journal_still_warns() {
    let m = Mount::new();
    write_synced(&m.p("f.txt"), b"x\n");
    ws_ok(&m, &["checkpoint", "-m", "one"]);
    crate::harness::umount_ok(&m.store, &m.mp);
    crate::harness::wait_daemon_gone(&m.store);
    std::fs::remove_dir_all(m.store.join("journal")).unwrap();
    // Opened in this process (no daemon): its log goes to stderr.
    let o = tf(&m.store, &["sessions"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("its journal is missing; a new one is anchored"),
        "{err}"
    );
}
