//! `treefork remote gc` against a real S3 server (SeaweedFS): a deleted branch's
//! unique packs go only in the second run (grace 0) and what the kept branch
//! needs stays (mounted from the remote on another store, byte for byte); a gc
//! running (from another store) while a push runs leaves the pushed session's
//! whole closure on the remote (mounted and hydrated elsewhere, then fsck clean).

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::S3Server;
use super::pull::{add_remote, json_ok, machine, mount_from_remote};
use crate::harness::{Mount, TEST_AWS_ENV, bin, pattern, write_synced, ws_ok};

fn gc(store: &std::path::Path, grace: &str) -> Value {
    json_ok(store, &["remote", "gc", "--grace", grace])
}

fn pack_keys(s3: &S3Server, prefix: &str) -> HashSet<String> {
    s3.client(prefix)
        .list("packs")
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .collect()
}

#[test]
fn remote_gc_drops_a_deleted_branchs_packs_after_the_grace_only() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let a = Mount::new();
    let keep: Vec<(String, Vec<u8>)> = (0..8)
        .map(|i| (format!("keep/f{i}.bin"), pattern(30_000, 500 + i)))
        .collect();
    for (p, d) in &keep {
        write_synced(&a.p(p), d);
    }
    ws_ok(&a, &["checkpoint", "-m", "keep"]);
    add_remote(&a.store, &s3, "g");
    json_ok(&a.store, &["push", "origin", "HEAD:keep"]);
    let keep_packs = pack_keys(&s3, "g");
    for i in 0..8 {
        write_synced(&a.p(&format!("drop/f{i}.bin")), &pattern(40_000, 900 + i));
    }
    ws_ok(&a, &["checkpoint", "-m", "drop"]);
    json_ok(&a.store, &["push", "origin", "HEAD:drop"]);
    let drop_packs: HashSet<String> = pack_keys(&s3, "g")
        .difference(&keep_packs)
        .cloned()
        .collect();
    assert!(!drop_packs.is_empty());
    s3.client("g")
        .delete(&treefork::remote::layout::branch_ref_key("drop"))
        .unwrap();

    let dry = json_ok(&a.store, &["remote", "gc", "--dry-run", "--grace", "0"]);
    assert_eq!(dry["phase"], "condemn", "{dry}");
    assert!(
        s3.client("g")
            .get("gc/condemned", treefork::remote::client::Body::Gc)
            .unwrap()
            .is_none()
    );
    let one = gc(&a.store, "0");
    assert_eq!(one["phase"], "condemn", "{one}");
    assert_eq!(one["condemned"], drop_packs.len() / 2, "{one}");
    assert_eq!(one["condemned_checkpoints"], 1, "{one}");
    assert_eq!(one["packs_deleted"], 0, "{one}");
    assert!(pack_keys(&s3, "g").is_superset(&drop_packs));
    let wait = gc(&a.store, "1h");
    assert_eq!(wait["phase"], "wait", "{wait}");
    assert!(pack_keys(&s3, "g").is_superset(&drop_packs));
    let two = gc(&a.store, "0");
    assert_eq!(two["phase"], "delete", "{two}");
    assert_eq!(two["packs_deleted"], drop_packs.len() / 2, "{two}");
    assert!(
        two["bytes_deleted"].as_u64().unwrap() > 8 * 40_000 / 4,
        "{two}"
    );
    assert_eq!(pack_keys(&s3, "g"), keep_packs);
    assert!(
        s3.client("g")
            .get("gc/lock", treefork::remote::client::Body::Gc)
            .unwrap()
            .is_none()
    );

    // Another store mounts what stayed: every file, byte for byte.
    let b = machine("k");
    add_remote(&b.store, &s3, "g");
    mount_from_remote(&b, "origin/keep");
    for (p, d) in &keep {
        assert_eq!(&std::fs::read(b.p(p)).unwrap(), d, "{p}");
    }
    assert!(!b.p("drop").exists());
}

#[test]
fn remote_gc_during_a_push_leaves_the_pushed_closure_whole() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    // Packs of 16 KiB and a pause after each: the push takes seconds.
    let a = Mount::with_failpoint("push-slow-packs:16");
    let files: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| (format!("d{}/f{i:02}.bin", i % 4), pattern(20_000, 3000 + i)))
        .collect();
    for (p, d) in &files {
        write_synced(&a.p(p), d);
    }
    ws_ok(&a, &["checkpoint", "-m", "raced"]);
    add_remote(&a.store, &s3, "r");
    // The gc runs from another store (another machine).
    let g = machine("gc");
    add_remote(&g.store, &s3, "r");
    let child = Command::new(bin())
        .args([
            "--store",
            a.store.to_str().unwrap(),
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
    while pack_keys(&s3, "r").len() < 4 {
        assert!(t.elapsed() < Duration::from_secs(60), "no pack uploaded");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Gc rounds while the push runs (grace 1h: the push is well within it).
    let mut condemned_during = 0;
    let mut rounds = 0;
    let child = std::sync::Mutex::new(child);
    while child.lock().unwrap().try_wait().unwrap().is_none() {
        let r = gc(&g.store, "1h");
        condemned_during = condemned_during.max(r["condemned"].as_u64().unwrap());
        rounds += 1;
    }
    let o = child.into_inner().unwrap().wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(rounds >= 1);
    // The push's packs were on the remote before its ref: the first gc
    // condemned them (the race was real).
    assert!(condemned_during > 0, "rounds {rounds}");
    // The grace is over (grace 0 now): the re-mark finds them reached and keeps
    // them.
    let after = gc(&g.store, "0");
    assert_eq!(after["phase"], "delete", "{after}");
    assert_eq!(after["packs_deleted"], 0, "{after}");
    assert!(after["resurrected"].as_u64().unwrap() > 0, "{after}");
    assert_eq!(gc(&g.store, "0")["phase"], "clean");

    // A fresh store gets the whole closure: mounted, hydrated, fsck clean.
    let c = machine("s2");
    add_remote(&c.store, &s3, "r");
    mount_from_remote(&c, "origin/s");
    json_ok(&c.store, &["hydrate", "--session", "s2"]);
    for (p, d) in &files {
        assert_eq!(&std::fs::read(c.p(p)).unwrap(), d, "{p}");
    }
    let f = json_ok(&c.store, &["fsck"]);
    assert_eq!(f["clean"], true, "{f}");
}

#[test]
fn an_agent_socket_cannot_run_remote_gc() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::Builder::new()
        .prefix("tf-agent-")
        .tempdir()
        .unwrap();
    let sock = dir.path().join("agent.sock");
    let _m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    let s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let mut r = BufReader::new(s);
    let req = serde_json::json!({"v": 1, "op": "remote_gc", "dry_run": true});
    let mut line = serde_json::to_vec(&req).unwrap();
    line.push(b'\n');
    r.get_mut().write_all(&line).unwrap();
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    let v: Value = serde_json::from_str(&l).unwrap();
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["error"]["code"], "forbidden", "{v}");
}
