//! A checkout or restore whose graft fails midway still sends the kernel
//! invalidations of what it changed (issue 12, defect 5). The failure is injected with the debug-build
//! failpoint `TREEFORK_DEBUG_FAILPOINT=graft-after:N` (see `src/failpoint.rs`).
//!
//! With one-hour entry and attribute TTLs, a missed invalidation shows as a path
//! that still names the inode the graft replaced: reads return the old content, and
//! writes go to an orphan and vanish at remount.

use std::fs;
use std::os::unix::fs::MetadataExt;

use crate::harness::{Mount, daemon_log, write_synced, ws, ws_ok};

const FILES: usize = 30;

fn version_a(i: usize) -> String {
    format!("A{i}\n")
}

fn version_b(i: usize) -> String {
    format!("version B of file {i}, a longer line than A\n")
}

fn name(i: usize) -> String {
    format!("f{i:02}")
}

/// A fresh store whose daemon runs with the graft failpoint set to `after`.
fn mount_with_failpoint(after: usize) -> Mount {
    Mount::with_failpoint(&format!("graft-after:{after}"))
}

/// Every file read through the mount (path lookup, attributes, content), checked
/// against `expect(i)`.
fn check_all(m: &Mount, what: &str, expect: &dyn Fn(usize) -> String) {
    for i in 0..FILES {
        let p = m.p(&name(i));
        let want = expect(i);
        let got = fs::read_to_string(&p).unwrap();
        assert_eq!(got, want, "{what}: {} reads stale content", name(i));
        let size = fs::metadata(&p).unwrap().size();
        assert_eq!(
            size,
            want.len() as u64,
            "{what}: {} has a stale size",
            name(i)
        );
    }
}

#[test]
fn failed_checkout_still_invalidates_the_kernel_cache() {
    fail_midway(&["checkout", "a"]);
}

#[test]
fn failed_restore_still_invalidates_the_kernel_cache() {
    fail_midway(&["restore", "a"]);
}

/// Cache every file in the kernel, run `cmd` (a checkout or restore of branch `a`)
/// and let its graft fail midway; then every path must show the daemon's tree.
fn fail_midway(cmd: &[&str]) {
    // About four invalidations per replaced file: the graft fails after ~10 of 30.
    let m = mount_with_failpoint(40);
    for i in 0..FILES {
        write_synced(&m.p(&name(i)), version_a(i).as_bytes());
    }
    ws_ok(&m, &["branch", "a"]);
    for i in 0..FILES {
        write_synced(&m.p(&name(i)), version_b(i).as_bytes());
    }
    ws_ok(&m, &["branch", "b"]);
    // The kernel caches every entry, attribute and page (one-hour TTLs).
    check_all(&m, "before the checkout", &version_b);

    let o = ws(&m, cmd);
    assert!(!o.status.success(), "{cmd:?} should fail at the failpoint");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("debug failpoint"), "unexpected error: {err}");

    // What the session's tree holds now, from the daemon: the files the graft
    // replaced differ from `b` (HEAD: the failed checkout did not move it).
    let changed: Vec<usize> = ws_ok(&m, &["diff", "--name-status", "b", "WORKING"])
        .lines()
        .map(|l| {
            let (c, path) = l.split_once('\t').unwrap();
            assert_eq!(c, "M", "{l}");
            path[1..].parse().unwrap()
        })
        .collect();
    assert!(
        !changed.is_empty() && changed.len() < FILES,
        "the graft should fail midway (changed {changed:?})\n{}",
        daemon_log(&m.store)
    );
    let held = |i: usize| {
        if changed.contains(&i) {
            version_a(i)
        } else {
            version_b(i)
        }
    };
    check_all(&m, "after the failed graft", &held);

    // A write through a path the failed graft replaced reaches the live tree.
    let w = changed[0];
    write_synced(&m.p(&name(w)), b"written after the failed graft\n");
    let after_write = |i: usize| {
        if i == w {
            "written after the failed graft\n".to_string()
        } else {
            held(i)
        }
    };
    check_all(&m, "after the write", &after_write);
    m.remount();
    check_all(&m, "after remount", &after_write);
}
