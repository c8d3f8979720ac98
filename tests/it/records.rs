//! Extensible checkpoint records over the real socket: `meta` set by a request, open
//! triggers (reserved ones refused), `parents` in every listing.

use serde_json::Value;

use crate::harness::{Mount, fuse_available, ws, ws_ok};

#[test]
fn checkpoint_meta_and_open_triggers() {
    assert!(fuse_available());
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
