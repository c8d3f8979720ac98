//! `treefork push` against a real S3 server (SeaweedFS): a session pushed, pushed
//! again (nothing sent), after one changed file (its path only); a push killed
//! midway by the server dying, then rerun (only what is missing); two stores
//! pushing one branch at once (exactly one wins, the other exits 9).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::S3Server;
use crate::harness::{Mount, TEST_AWS_ENV, bin, daemon_log, pattern, tf, write_synced};

fn json_of(o: &Output, what: &str, store: &Path) -> Value {
    assert!(
        o.status.success(),
        "{what} failed ({:?}): {}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        daemon_log(store)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn add_remote(m: &Mount, s3: &S3Server, name: &str, prefix: &str) {
    let url = s3.url(prefix);
    let o = tf(
        &m.store,
        &[
            "--json",
            "remote",
            "add",
            name,
            &url,
            "--endpoint",
            &s3.endpoint,
        ],
    );
    json_of(&o, "remote add", &m.store);
}

fn push(m: &Mount, args: &[&str]) -> Output {
    let mut full = vec!["--json", "push"];
    full.extend_from_slice(args);
    tf(&m.store, &full)
}

fn push_ok(m: &Mount, args: &[&str]) -> Value {
    json_of(&push(m, args), "push", &m.store)
}

fn idx_count(s3: &S3Server, prefix: &str) -> usize {
    s3.client(prefix)
        .list("packs")
        .map(|l| l.iter().filter(|m| m.key.ends_with(".idx")).count())
        .unwrap_or(0)
}

#[test]
fn push_sends_what_the_remote_lacks_and_nothing_twice() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let m = Mount::new();
    for i in 0..30 {
        write_synced(&m.p(&format!("src/f{i:02}.bin")), &pattern(20_000, i));
    }
    add_remote(&m, &s3, "origin", "p1");
    let first = push_ok(&m, &[]);
    assert_eq!(first["refs"][0]["kind"], "session");
    assert_eq!(first["refs"][0]["dst"], "s");
    assert_eq!(first["refs"][0]["status"], "created");
    let sent = first["objects"].as_u64().unwrap();
    // 30 chunks and 30 file nodes at least, plus directories and the root.
    assert!(sent >= 62, "{first}");
    let again = push_ok(&m, &["origin", "s"]);
    assert_eq!(again["objects"], 0, "{again}");
    assert_eq!(again["refs"][0]["status"], "up-to-date", "{again}");
    write_synced(&m.p("src/f07.bin"), &pattern(20_000, 99));
    let small = push_ok(&m, &[]);
    // The new chunk, its file node, `src`, the root directory's node, the root.
    let n = small["objects"].as_u64().unwrap();
    assert!((1..=5).contains(&n), "{small}");
    assert_eq!(small["refs"][0]["status"], "updated", "{small}");
    // The remote holds the session ref and the packs with their indexes.
    let c = s3.client("p1");
    assert!(
        c.get("refs/sessions/s", treefork::remote::client::Body::Ref)
            .unwrap()
            .is_some()
    );
    let packs = c.list("packs").unwrap();
    let tfp = packs.iter().filter(|m| m.key.ends_with(".tfp")).count();
    assert_eq!(tfp, idx_count(&s3, "p1"));
    // Without a daemon the session is pushed from its record: nothing changed
    // since the last push, and another remote gets all of it.
    add_remote(&m, &s3, "second", "p2");
    m.umount();
    crate::harness::wait_daemon_gone(&m.store);
    let offline = push_ok(&m, &["origin", "s"]);
    assert_eq!(offline["refs"][0]["status"], "up-to-date", "{offline}");
    let other = push_ok(&m, &["second", "s"]);
    assert_eq!(other["refs"][0]["status"], "created", "{other}");
    assert!(other["objects"].as_u64().unwrap() >= 62, "{other}");
}

#[test]
fn a_push_killed_midway_uploads_only_what_is_missing_when_rerun() {
    let Some(mut s3) = S3Server::start_or_skip() else {
        return;
    };
    // Packs of 16 KiB and a pause after each: the push takes seconds.
    let m = Mount::with_failpoint("push-slow-packs:16");
    for i in 0..40 {
        write_synced(&m.p(&format!("f{i:02}.bin")), &pattern(20_000, 1000 + i));
    }
    add_remote(&m, &s3, "origin", "k");
    add_remote(&m, &s3, "full", "full");
    let child = Command::new(bin())
        .args([
            "--store",
            m.store.to_str().unwrap(),
            "--json",
            "push",
            "origin",
            "s",
        ])
        .envs(TEST_AWS_ENV.iter().copied())
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while idx_count(&s3, "k") < 5 {
        assert!(t.elapsed() < Duration::from_secs(60), "no pack uploaded");
        std::thread::sleep(Duration::from_millis(20));
    }
    s3.kill();
    assert!(!s3.running());
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(8),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    s3.restart();
    assert!(s3.running());
    let done_before = idx_count(&s3, "k");
    assert!(done_before >= 5);
    let rerun = push_ok(&m, &["origin", "s"]);
    assert_eq!(rerun["refs"][0]["status"], "created", "{rerun}");
    // The whole closure, pushed to an empty prefix, is larger: the rerun skipped
    // the objects of the packs completed before the kill.
    let full = push_ok(&m, &["full", "s"]);
    let (part, all) = (
        rerun["objects"].as_u64().unwrap(),
        full["objects"].as_u64().unwrap(),
    );
    assert!(
        part > 0 && part + done_before as u64 <= all,
        "rerun {part}, all {all}"
    );
    assert!(push_ok(&m, &["origin", "s"])["objects"] == 0);
}

#[test]
fn two_stores_pushing_one_branch_at_once_exactly_one_wins() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let a = Mount::new();
    let b = Mount::new();
    for (m, seed) in [(&a, 1), (&b, 2)] {
        for i in 0..20 {
            write_synced(&m.p(&format!("f{i}.bin")), &pattern(30_000, seed * 100 + i));
        }
        crate::harness::ws_ok(m, &["checkpoint", "-m", "mine"]);
        add_remote(m, &s3, "origin", "race");
    }
    let spawn = |m: &Mount| {
        Command::new(bin())
            .args([
                "--store",
                m.store.to_str().unwrap(),
                "--json",
                "push",
                "origin",
                "HEAD:main",
                "--session",
                "s",
            ])
            .envs(TEST_AWS_ENV.iter().copied())
            .env_remove("TREEFORK_STORE")
            .env_remove("TREEFORK_SOCKET")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (pa, pb) = (spawn(&a), spawn(&b));
    let (oa, ob) = (
        pa.wait_with_output().unwrap(),
        pb.wait_with_output().unwrap(),
    );
    let codes = [oa.status.code(), ob.status.code()];
    assert!(
        codes == [Some(0), Some(9)] || codes == [Some(9), Some(0)],
        "{codes:?}: {} / {}",
        String::from_utf8_lossy(&oa.stdout),
        String::from_utf8_lossy(&ob.stdout)
    );
    let lost = if codes[0] == Some(9) { &oa } else { &ob };
    let v: Value = serde_json::from_slice(&lost.stdout).unwrap();
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(v["error"]["code"], "non_fast_forward", "{v}");
    assert!(
        msg.contains("rejected") && msg.contains("origin/main"),
        "{msg}"
    );
}
