//! Sessions that diverge on a remote (issue 23, defect 2): a store that only
//! *looked* at another store's push (a pull that moved its tracking ref, not its
//! session) must not overwrite that push. A push is a fast-forward of what the
//! remote holds, or it is refused (exit 9); `--force` replaces it and says so.

use serde_json::Value;

use super::S3Server;
use super::pull::{add_remote, json_ok, machine, mount_from_remote};
use crate::harness::{Mount, tf, umount_ok, write_synced, ws_ok};

/// `push` on `m`'s store: its exit status and JSON answer.
fn push(m: &Mount, args: &[&str]) -> (Option<i32>, Value) {
    let mut full = vec!["--json", "push"];
    full.extend_from_slice(args);
    let o = tf(&m.store, &full);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code(), v)
}

/// The status of ref `name` in a push or pull answer.
fn status(v: &Value, name: &str) -> String {
    v["refs"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|r| r["name"] == name || r["dst"] == name)
                .and_then(|r| r["status"].as_str())
        })
        .unwrap_or("")
        .to_string()
}

/// Mount `m`'s scratch session beside it, so its store keeps a daemon (pull
/// needs one) while `m`'s own session is unmounted; returns its mountpoint.
fn keep_daemon(m: &Mount) -> std::path::PathBuf {
    let mp = m.tmp.path().join("scratch-mnt");
    std::fs::create_dir_all(&mp).unwrap();
    crate::harness::tf_ok(
        &m.store,
        &["mount", mp.to_str().unwrap(), "--session", "scratch"],
    );
    mp
}

/// The message of the newest checkpoint `spec` names, as `m` resolves it.
fn newest(m: &Mount, spec: &str) -> String {
    let log: Value = serde_json::from_str(&ws_ok(m, &["--json", "log", spec])).unwrap();
    log["checkpoints"][0]["message"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_pull_that_only_looked_never_lets_a_push_overwrite_the_other_store() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    // A: a session pushed as origin/s.
    let a = Mount::new();
    write_synced(&a.p("base.txt"), b"base\n");
    ws_ok(&a, &["checkpoint", "-m", "base"]);
    add_remote(&a.store, &s3, "div");
    json_ok(&a.store, &["push"]);
    // B and C: the same session, from the remote.
    let b = machine("s");
    add_remote(&b.store, &s3, "div");
    mount_from_remote(&b, "origin/s");
    let c = machine("s");
    add_remote(&c.store, &s3, "div");
    mount_from_remote(&c, "origin/s");
    let c_scratch = keep_daemon(&c);
    umount_ok(&c.store, &c.mp);

    // A moves on and pushes (a fast-forward of what it pushed).
    write_synced(&a.p("a.txt"), b"from A\n");
    ws_ok(&a, &["checkpoint", "-m", "from A"]);
    assert_eq!(status(&json_ok(&a.store, &["push"]), "s"), "updated");

    // B diverged: its push is refused.
    write_synced(&b.p("b.txt"), b"from B\n");
    ws_ok(&b, &["checkpoint", "-m", "from B"]);
    let (code, v) = push(&b, &[]);
    assert_eq!(code, Some(9), "{v}");
    assert_eq!(v["error"]["code"], "non_fast_forward", "{v}");
    // B pulls: mounted, so it only looks (tracking-only)...
    let pulled = json_ok(&b.store, &["pull"]);
    assert_eq!(status(&pulled, "s"), "tracking-only", "{pulled}");
    assert_eq!(newest(&b, "origin/s"), "from A");
    // ...and a look takes nothing in: the push is still refused, A's work stays.
    let (code, v) = push(&b, &[]);
    assert_eq!(
        code,
        Some(9),
        "a push after a look overwrote the remote: {v}"
    );
    assert_eq!(newest(&a, "HEAD"), "from A");
    json_ok(&b.store, &["pull"]);
    assert_eq!(newest(&b, "origin/s"), "from A", "the remote lost A's push");
    // Unmounted, B's diverged session still only looks, and still may not push.
    let b_scratch = keep_daemon(&b);
    umount_ok(&b.store, &b.mp);
    let pulled = json_ok(&b.store, &["pull"]);
    assert_eq!(status(&pulled, "s"), "tracking-only", "{pulled}");
    let (code, v) = push(&b, &["origin", "s"]);
    assert_eq!(code, Some(9), "{v}");

    // C did not diverge: its pull takes A's push in (a fast-forward), and a
    // push of its own work on top of it is a fast-forward too.
    let pulled = json_ok(&c.store, &["pull"]);
    assert_eq!(status(&pulled, "s"), "fast-forward", "{pulled}");
    let cm = c.mp.to_str().unwrap();
    crate::harness::tf_ok(&c.store, &["mount", cm, "--session", "s"]);
    assert_eq!(std::fs::read(c.p("a.txt")).unwrap(), b"from A\n");
    write_synced(&c.p("c.txt"), b"from C\n");
    ws_ok(&c, &["checkpoint", "-m", "from C"]);
    let pushed: Value = serde_json::from_str(&ws_ok(&c, &["--json", "push"])).unwrap();
    assert_eq!(status(&pushed, "s"), "updated", "{pushed}");

    // A has not taken C's push in: refused, also after a look.
    write_synced(&a.p("a2.txt"), b"A again\n");
    ws_ok(&a, &["checkpoint", "-m", "A again"]);
    assert_eq!(push(&a, &[]).0, Some(9));
    json_ok(&a.store, &["pull"]);
    assert_eq!(push(&a, &[]).0, Some(9));
    // --force replaces it when asked, and says so.
    let (code, v) = push(&a, &["--force"]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(status(&v, "s"), "forced", "{v}");
    json_ok(&c.store, &["pull"]);
    assert_eq!(newest(&c, "origin/s"), "A again");
    umount_ok(&b.store, &b_scratch);
    umount_ok(&c.store, &c_scratch);
}

/// The way forward from a refused push: pull (which says to merge), merge the
/// remote session into the local one, push (a fast-forward now) — from both
/// stores, and neither side's work is lost.
#[test]
fn diverged_sessions_merge_and_push_from_both_stores_losing_nothing() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let a = Mount::new();
    write_synced(&a.p("base.txt"), b"base\n");
    ws_ok(&a, &["checkpoint", "-m", "base"]);
    add_remote(&a.store, &s3, "merge");
    json_ok(&a.store, &["push"]);
    let b = machine("s");
    add_remote(&b.store, &s3, "merge");
    mount_from_remote(&b, "origin/s");

    // Both work; A pushes first, B is refused.
    write_synced(&a.p("a.txt"), b"from A\n");
    write_synced(&a.p("base.txt"), b"base\nA's line\n");
    ws_ok(&a, &["checkpoint", "-m", "from A"]);
    assert_eq!(status(&json_ok(&a.store, &["push"]), "s"), "updated");
    write_synced(&b.p("b.txt"), b"from B\n");
    ws_ok(&b, &["checkpoint", "-m", "from B"]);
    let (code, v) = push(&b, &[]);
    assert_eq!(code, Some(9), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("treefork merge origin/s"),
        "{v}"
    );
    // B: pull says to merge; merge; push.
    let pulled = json_ok(&b.store, &["pull"]);
    let hint = pulled["refs"][0]["next"].as_str().unwrap_or("").to_string();
    assert!(hint.contains("treefork merge origin/s"), "{pulled}");
    let merged: Value = serde_json::from_str(&ws_ok(&b, &["--json", "merge", "origin/s"])).unwrap();
    assert_eq!(merged["status"], "merged", "{merged}");
    assert_eq!(std::fs::read(b.p("a.txt")).unwrap(), b"from A\n");
    assert_eq!(std::fs::read(b.p("base.txt")).unwrap(), b"base\nA's line\n");
    assert_eq!(std::fs::read(b.p("b.txt")).unwrap(), b"from B\n");
    let (code, v) = push(&b, &[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(status(&v, "s"), "updated", "{v}");

    // A worked on meanwhile: refused; pull, merge, push.
    write_synced(&a.p("a2.txt"), b"A again\n");
    ws_ok(&a, &["checkpoint", "-m", "A again"]);
    assert_eq!(push(&a, &[]).0, Some(9));
    json_ok(&a.store, &["pull"]);
    let merged: Value = serde_json::from_str(&ws_ok(&a, &["--json", "merge", "origin/s"])).unwrap();
    assert_eq!(merged["status"], "merged", "{merged}");
    let (code, v) = push(&a, &[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(status(&v, "s"), "updated", "{v}");

    // B takes it in the same way and sees everything.
    json_ok(&b.store, &["pull"]);
    let merged: Value = serde_json::from_str(&ws_ok(&b, &["--json", "merge", "origin/s"])).unwrap();
    assert_eq!(merged["status"], "merged", "{merged}");
    for (f, want) in [
        ("base.txt", &b"base\nA's line\n"[..]),
        ("a.txt", b"from A\n"),
        ("b.txt", b"from B\n"),
        ("a2.txt", b"A again\n"),
    ] {
        assert_eq!(std::fs::read(b.p(f)).unwrap(), want, "{f}");
    }
    assert_eq!(push(&b, &[]).0, Some(0));
    assert_eq!(newest(&a, "HEAD"), "merge origin/s");
}
