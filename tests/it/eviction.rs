//! Session lifecycle II: eviction sweeps (idle and absolute TTLs, until-promote,
//! manual), busy mounts, and resuming an evicted session with every byte back.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Mount, tf_ok, ws_ok};

fn sweep(m: &Mount) -> Value {
    serde_json::from_str(&tf_ok(&m.store, &["session", "sweep", "--json"])).unwrap()
}

fn info(m: &Mount, name: &str) -> Value {
    let out = tf_ok(&m.store, &["session", "show", name, "--json"]);
    serde_json::from_str::<Value>(&out).unwrap()["info"].clone()
}

fn names(v: &Value, k: &str) -> Vec<String> {
    v[k].as_array()
        .unwrap()
        .iter()
        .map(|e| e["session"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn idle_session_is_evicted_and_mount_brings_every_byte_back() {
    let m = Mount::with_options("s", &["--ttl-idle", "3s"]);
    // A second, manual session keeps the daemon alive and is never evicted.
    let mp2 = m.tmp.path().join("manual");
    std::fs::create_dir(&mp2).unwrap();
    tf_ok(
        &m.store,
        &[
            "mount",
            mp2.to_str().unwrap(),
            "--session",
            "keep",
            "--ttl-idle",
            "1s",
            "--manual",
        ],
    );
    let big = crate::harness::pattern(3 << 20, 7);
    crate::harness::write_synced(&m.p("synced.bin"), &big);
    // Written just before eviction, never fsynced.
    std::fs::write(m.p("unsynced.txt"), "still here").unwrap();
    assert!(names(&sweep(&m), "evicted").is_empty(), "not idle yet");
    std::thread::sleep(Duration::from_secs(5));
    let v = sweep(&m);
    assert_eq!(names(&v, "evicted"), ["s"], "{v}");
    assert!(!treefork::daemon::is_mountpoint(&m.mp));
    assert!(
        treefork::daemon::is_mountpoint(&mp2),
        "manual is never evicted"
    );
    assert_eq!(info(&m, "s")["state"], "expired");
    let human = tf_ok(&m.store, &["sessions"]);
    assert!(human.contains("expired"), "{human}");
    // The eviction is an operation of kind `evict` with its checkpoint.
    m.mount();
    assert_eq!(info(&m, "s")["state"], "active");
    assert_eq!(std::fs::read(m.p("synced.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read_to_string(m.p("unsynced.txt")).unwrap(),
        "still here"
    );
    let log = ws_ok(&m, &["op", "log", "--json"]);
    assert!(log.contains("\"evict\""), "{log}");
    // The eviction checkpoint itself holds the unsynced write (syncfs first).
    let ckpt = v["evicted"][0]["checkpoint"].as_str().unwrap();
    let at = ws_ok(&m, &["show", &format!("{ckpt}:unsynced.txt")]);
    assert_eq!(at, "still here");
    tf_ok(&m.store, &["umount", mp2.to_str().unwrap()]);
}

#[test]
fn busy_mount_is_not_evicted_and_is_reported_until_free() {
    let m = Mount::with_options("s", &["--ttl-idle", "1s"]);
    std::fs::write(m.p("f"), "data").unwrap();
    let mut sleeper = Command::new("sleep")
        .arg("60")
        .current_dir(&m.mp)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let v = sweep(&m);
    assert_eq!(names(&v, "busy"), ["s"], "{v}");
    assert!(treefork::daemon::is_mountpoint(&m.mp), "not torn away");
    assert!(info(&m, "s")["evict_blocked"].is_string());
    let human = tf_ok(&m.store, &["sessions"]);
    assert!(human.contains("eviction blocked"), "{human}");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    std::thread::sleep(Duration::from_secs(2));
    let v = sweep(&m);
    assert_eq!(names(&v, "evicted"), ["s"], "{v}");
    assert!(info(&m, "s")["evict_blocked"].is_null());
    m.mount();
    assert_eq!(std::fs::read_to_string(m.p("f")).unwrap(), "data");
}

#[test]
fn absolute_ttl_and_until_promote() {
    let m = Mount::with_options("s", &["--ttl-idle", "never", "--ttl-absolute", "2s"]);
    let mp2 = m.tmp.path().join("p");
    std::fs::create_dir(&mp2).unwrap();
    tf_ok(
        &m.store,
        &[
            "mount",
            mp2.to_str().unwrap(),
            "--session",
            "p",
            "--ttl-idle",
            "never",
        ],
    );
    // Accessed all along, the absolute TTL still ends it.
    for _ in 0..4 {
        std::fs::write(m.p("busy-writer"), "x").unwrap();
        std::thread::sleep(Duration::from_millis(700));
    }
    let v = sweep(&m);
    assert_eq!(names(&v, "evicted"), ["s"], "{v}");
    assert!(treefork::daemon::is_mountpoint(&mp2));
    // A promoted session with until-promote (the default) is evicted; without it
    // it stays.
    tf_ok(&m.store, &["umount", mp2.to_str().unwrap()]);
    {
        let s = treefork::store::PackStore::open(&m.store).unwrap();
        let mut i = treefork::lifecycle::load(&s, "p").unwrap().unwrap();
        i.state = treefork::lifecycle::State::Promoted;
        treefork::store::ObjectStore::commit(&s, vec![i.op()]).unwrap();
    }
    tf_ok(
        &m.store,
        &[
            "mount",
            mp2.to_str().unwrap(),
            "--session",
            "p",
            "--no-until-promote",
        ],
    );
    assert!(names(&sweep(&m), "evicted").is_empty());
    tf_ok(&m.store, &["umount", mp2.to_str().unwrap()]);
    tf_ok(
        &m.store,
        &[
            "mount",
            mp2.to_str().unwrap(),
            "--session",
            "p",
            "--until-promote",
        ],
    );
    assert_eq!(
        info(&m, "p")["state"],
        "promoted",
        "a mount keeps the promote"
    );
    let v = sweep(&m);
    assert_eq!(names(&v, "evicted"), ["p"], "{v}");
    assert_eq!(info(&m, "p")["state"], "expired");
}

#[test]
fn a_store_command_right_after_the_last_eviction_waits_for_the_exiting_daemon() {
    // The daemon evicting its last session exits; for 1.5 s after its socket is
    // gone it still holds the store lock.
    let m = Mount::with_failpoint("daemon-exit-delay-ms:1500");
    tf_ok(&m.store, &["session", "extend", "s", "--ttl-idle", "1s"]);
    std::fs::write(m.p("f"), "data").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let v = sweep(&m);
    assert_eq!(names(&v, "evicted"), ["s"], "{v}");
    let t = std::time::Instant::now();
    while treefork::daemon::ping(&m.store).is_some() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !treefork::lock::is_free(&m.store),
        "the exiting daemon holds the store lock"
    );
    // Answered once the daemon is gone, never "in use by another daemon".
    assert_eq!(info(&m, "s")["state"], "expired");
    let list = tf_ok(&m.store, &["--json", "sessions"]);
    assert!(list.contains("expired"), "{list}");
    m.mount();
    assert_eq!(std::fs::read_to_string(m.p("f")).unwrap(), "data");
}
