//! Eviction to a remote against a real S3 server (SeaweedFS): a session with a
//! short idle TTL and `--evict-to origin` is pushed before the sweep unmounts
//! it (with the server down the push fails and the session stays mounted,
//! `evict_blocked` naming the push), and `mount --from-remote origin/s` on
//! another store resumes it exactly: files, HEAD, branch, operation log,
//! messages.

use std::time::Duration;

use serde_json::Value;

use super::S3Server;
use super::pull::{add_remote, json_ok, machine, mount_from_remote};
use crate::harness::{Mount, pattern, tf, tf_ok, write_synced, ws_ok};

fn files() -> Vec<(String, Vec<u8>)> {
    let mut v = vec![("big.bin".to_string(), pattern(900_000, 3))];
    for i in 0..8u64 {
        v.push((
            format!("d{}/f{i}.txt", i % 2),
            pattern(2000 + i as usize * 13, i),
        ));
    }
    v
}

fn ops(m: &Mount) -> Vec<(u64, String)> {
    let v: Value = serde_json::from_str(&ws_ok(m, &["--json", "op", "log"])).unwrap();
    let list = v["operations"]
        .as_array()
        .or(v.as_array())
        .cloned()
        .unwrap_or_default();
    list.iter()
        .map(|o| {
            (
                o["seq"].as_u64().unwrap(),
                o["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn an_evicted_session_is_pushed_first_and_resumes_elsewhere() {
    let Some(mut s3) = S3Server::start_or_skip() else {
        return;
    };
    let a = Mount::new();
    add_remote(&a.store, &s3, "ev");
    // A manual session keeps the daemon alive (never evicted); --evict-to on
    // mount is validated against the configured remotes.
    let mp2 = a.tmp.path().join("keep");
    std::fs::create_dir(&mp2).unwrap();
    let keep = [
        "mount",
        mp2.to_str().unwrap(),
        "--session",
        "keep",
        "--manual",
    ];
    let bad: Vec<&str> = keep
        .iter()
        .copied()
        .chain(["--evict-to", "nosuch"])
        .collect();
    let o = tf(&a.store, &bad);
    assert!(
        !o.status.success(),
        "--evict-to an unknown remote was accepted"
    );
    let ok: Vec<&str> = keep
        .iter()
        .copied()
        .chain(["--evict-to", "origin"])
        .collect();
    tf_ok(&a.store, &ok);

    for (p, d) in files() {
        write_synced(&a.p(&p), &d);
    }
    ws_ok(&a, &["checkpoint", "-m", "one"]);
    ws_ok(&a, &["branch", "work"]);
    ws_ok(&a, &["checkout", "work"]);
    std::fs::write(a.p("late.txt"), "written just before eviction").unwrap();
    ws_ok(
        &a,
        &[
            "messages",
            "append",
            "--role",
            "user",
            "--content",
            "remember me",
            "--flush",
        ],
    );
    let o = tf(
        &a.store,
        &["session", "extend", "s", "--evict-to", "nosuch"],
    );
    assert!(!o.status.success());
    tf_ok(
        &a.store,
        &[
            "session",
            "extend",
            "s",
            "--ttl-idle",
            "2s",
            "--evict-to",
            "origin",
        ],
    );
    let show: Value =
        serde_json::from_str(&tf_ok(&a.store, &["session", "show", "s", "--json"])).unwrap();
    assert_eq!(show["info"]["policy"]["evict_to"], "origin", "{show}");
    let ops_a = ops(&a);
    std::thread::sleep(Duration::from_secs(3));

    // The server is down: the push fails, the session stays mounted.
    s3.stop();
    let v = json_ok(&a.store, &["session", "sweep"]);
    assert_eq!(v["evicted"].as_array().unwrap().len(), 0, "{v}");
    let blocked = v["busy"][0]["blocked"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(blocked.contains("push to origin failed"), "{v}");
    assert!(treefork::daemon::is_mountpoint(&a.mp));
    s3.restart();
    std::thread::sleep(Duration::from_secs(3));
    let v = json_ok(&a.store, &["session", "sweep"]);
    assert_eq!(v["evicted"][0]["session"], "s", "{v}");
    assert!(!treefork::daemon::is_mountpoint(&a.mp));
    let remote_ref = s3
        .client("ev")
        .get("refs/sessions/s", treefork::remote::client::Body::Ref)
        .unwrap();
    assert!(remote_ref.is_some(), "the session was not pushed");

    // Another store resumes it exactly.
    let b = machine("s");
    add_remote(&b.store, &s3, "ev");
    mount_from_remote(&b, "origin/s");
    for (p, d) in files() {
        assert!(std::fs::read(b.p(&p)).unwrap() == d, "{p} differs");
    }
    assert_eq!(
        std::fs::read_to_string(b.p("late.txt")).unwrap(),
        "written just before eviction"
    );
    let st: Value = serde_json::from_str(&ws_ok(&b, &["--json", "status"])).unwrap();
    assert_eq!(st["branch"], "work", "{st}");
    // HEAD is A's: the eviction checkpoint (taken at the first, blocked
    // attempt; the retry had nothing new to save).
    a.mount();
    let st_a: Value = serde_json::from_str(&ws_ok(&a, &["--json", "status"])).unwrap();
    assert_eq!(st["head"], st_a["head"], "{st} {st_a}");
    assert!(st["head"].is_string(), "{st}");
    let ckpt_log: Value = serde_json::from_str(&ws_ok(&b, &["--json", "log"])).unwrap();
    assert_eq!(ckpt_log["checkpoints"][1]["message"], "one", "{ckpt_log}");
    let msgs = ws_ok(&b, &["--json", "messages"]);
    assert!(msgs.contains("remember me"), "{msgs}");
    let ops_b = ops(&b);
    assert!(ops_b.len() > ops_a.len(), "{ops_a:?} {ops_b:?}");
    // Newest first: the eviction, then everything A had.
    assert_eq!(ops_b[ops_b.len() - ops_a.len()..], ops_a[..]);
    assert_eq!(ops_b[0].1, "evict", "{ops_b:?}");
    a.umount();
    tf_ok(&a.store, &["umount", mp2.to_str().unwrap()]);
}
