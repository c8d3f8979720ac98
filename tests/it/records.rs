//! Extensible checkpoint records over the real socket: `meta` set by a request, open
//! triggers (reserved ones refused), `parents` in every listing.

use serde_json::Value;

use crate::harness::{Mount, ws, ws_ok};

#[test]
fn checkpoint_meta_and_open_triggers() {
    let m = Mount::new();
    std::fs::write(m.mp.join("a"), b"1").unwrap();
    let first = ws_ok(&m, &["checkpoint", "-m", "one"]).trim().to_string();
    std::fs::write(m.mp.join("a"), b"2").unwrap();
    let out = ws_ok(
        &m,
        &[
            "--json",
            "checkpoint",
            "-m",
            "two",
            "--trigger",
            "tool-run",
            "--meta",
            "step=3",
            "--meta",
            r#"tool={"name":"pytest","ok":true}"#,
            "--meta",
            "note=plain words",
        ],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    let c = &v["checkpoint"];
    assert_eq!(c["trigger"], "tool-run");
    assert_eq!(c["meta"]["step"], 3);
    assert_eq!(c["meta"]["tool"]["name"], "pytest");
    assert_eq!(c["meta"]["note"], "plain words");
    assert_eq!(c["parents"], serde_json::json!([first]));
    assert_eq!(c["parent"], first);

    // The record keeps them: the log shows them after a remount.
    m.remount();
    let log: Value = serde_json::from_str(&ws_ok(&m, &["--json", "log"])).unwrap();
    let newest = &log["checkpoints"][0];
    assert_eq!(newest["meta"]["tool"]["ok"], true);
    assert_eq!(newest["parents"][0], first);
    assert_eq!(log["checkpoints"][1]["parents"], serde_json::json!([]));

    // Triggers the daemon sets for its own records are refused on request, as is a
    // malformed name or meta key; nothing is recorded for them.
    for (args, what) in [
        (vec!["checkpoint", "--trigger", "fork"], "reserved"),
        (vec!["checkpoint", "--trigger", "evict"], "reserved"),
        (
            vec!["checkpoint", "--trigger", "Bad Name"],
            "invalid trigger",
        ),
        (vec!["checkpoint", "--meta", "9bad=1"], "meta"),
    ] {
        let o = ws(&m, &args);
        assert!(!o.status.success(), "{args:?} accepted");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(what), "{args:?}: {e}");
    }
    let log: Value = serde_json::from_str(&ws_ok(&m, &["--json", "log"])).unwrap();
    assert_eq!(log["checkpoints"].as_array().unwrap().len(), 2);
}

/// Regression (found by the model test's author): a fork from an older checkpoint
/// started with the *current* session's usage (bytes, inodes), and kept it.
#[test]
fn a_fork_from_an_old_checkpoint_starts_with_that_checkpoints_usage() {
    let m = Mount::new();
    std::fs::write(m.mp.join("small"), vec![1u8; 10_000]).unwrap();
    let old = ws_ok(&m, &["checkpoint", "-m", "small"]).trim().to_string();
    std::fs::write(m.mp.join("big"), vec![2u8; 1_000_000]).unwrap();
    ws_ok(&m, &["checkpoint", "-m", "big"]);
    let fork = m.tmp.path().join("fork");
    ws_ok(
        &m,
        &[
            "fork",
            "f",
            "--from",
            &old,
            "--mount",
            fork.to_str().unwrap(),
        ],
    );
    let sessions: Value =
        serde_json::from_str(&crate::harness::tf_ok(&m.store, &["sessions", "--json"])).unwrap();
    let by_name = |n: &str| {
        sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(by_name("s")["bytes"], 1_010_000);
    assert_eq!(by_name("f")["bytes"], 10_000, "{sessions}");
    assert_eq!(
        by_name("f")["inodes"].as_i64().unwrap() + 1,
        by_name("s")["inodes"].as_i64().unwrap()
    );
    crate::harness::tf_ok(&m.store, &["umount", fork.to_str().unwrap()]);
}
