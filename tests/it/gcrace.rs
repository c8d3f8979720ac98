//! gc while an operation is between its state change and its record.
//!
//! An operation record names workspace roots (the views before and after it). A
//! checkout flushes the workspace (its before view), swaps the tree, then commits
//! its batch (HEAD and the record); until the batch lands, the root it replaced
//! may be named by nothing durable (no auto-save when nothing differs from HEAD
//! but a directory's mtime).
//! A gc in that window must keep that root: sessions pin the roots flushed while
//! an operation runs, and gc reads the live tables before and after the durable
//! roots. The `op-record-delay-ms` failpoint holds the window open.

use std::time::Duration;

use serde_json::Value;

use crate::harness::{Mount, tf, tf_ok, ws_ok};

fn checkpoint(m: &Mount, msg: &str) -> String {
    let v: Value = serde_json::from_str(&ws_ok(m, &["--json", "checkpoint", "-m", msg])).unwrap();
    v["checkpoint"]["id"].as_str().unwrap().to_string()
}

#[test]
fn gc_between_a_checkout_and_its_record_keeps_the_replaced_root() {
    let m = Mount::with_failpoint("op-record-delay-ms:2500");
    std::fs::write(m.p("a"), "one").unwrap();
    let c1 = checkpoint(&m, "one");
    std::fs::write(m.p("a"), "two").unwrap();
    checkpoint(&m, "two");
    // Only the root directory's mtime changes: the workspace root differs from
    // HEAD's, its content does not (the checkout saves nothing first).
    std::fs::write(m.p("tmp"), "x").unwrap();
    std::fs::remove_file(m.p("tmp")).unwrap();
    let (store, mp) = (m.store.clone(), m.mp.clone());
    let c = c1.clone();
    let checkout =
        std::thread::spawn(move || tf(&store, &["-C", mp.to_str().unwrap(), "checkout", &c]));
    // The checkout has swapped the tree and waits before appending its record.
    std::thread::sleep(Duration::from_millis(1200));
    tf_ok(&m.store, &["gc"]);
    let o = checkout.join().unwrap();
    assert!(
        o.status.success(),
        "checkout: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read_to_string(m.p("a")).unwrap(), "one");
    // Every root the operation log names is still in the store.
    tf_ok(&m.store, &["gc"]);
    let fsck = tf(&m.store, &["fsck"]);
    assert!(
        fsck.status.success(),
        "{}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    // And undo brings that workspace back.
    ws_ok(&m, &["undo"]);
    assert_eq!(std::fs::read_to_string(m.p("a")).unwrap(), "two");
    assert!(!m.p("tmp").exists());
}
