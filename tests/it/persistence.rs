//! Persistence: clean remounts and `kill -9` of the daemon.

use std::fs::{self, File, OpenOptions};

use crate::harness::{Mount, pattern, tf_ok, write_synced};

#[test]
fn clean_unmount_keeps_everything_without_fsync() {
    let m = Mount::new();
    fs::create_dir_all(m.p("a/b/c")).unwrap();
    fs::write(m.p("a/b/c/small"), b"small file").unwrap();
    let big = pattern(3 << 20, 1);
    fs::write(m.p("a/big"), &big).unwrap();
    std::os::unix::fs::symlink("b/c/small", m.p("a/link")).unwrap();
    m.remount();
    assert_eq!(fs::read(m.p("a/b/c/small")).unwrap(), b"small file");
    assert_eq!(fs::read(m.p("a/big")).unwrap(), big);
    assert_eq!(fs::read(m.p("a/link")).unwrap(), b"small file");
}

#[test]
fn fsynced_files_survive_kill_9() {
    let m = Mount::new();
    let mut expected = Vec::new();
    for round in 0..5u64 {
        // Acknowledged (fsync'd) writes of this round.
        let name = format!("synced-{round}");
        let data = pattern(100_000 + round as usize * 70_000, round);
        write_synced(&m.p(&name), &data);
        expected.push((name, data));
        // An overwrite in place of an earlier file, also fsync'd.
        if round > 0 {
            let (n, d) = &mut expected[0];
            let f = OpenOptions::new().write(true).open(m.p(n)).unwrap();
            let patch = pattern(5000, 100 + round);
            use std::os::unix::fs::FileExt;
            f.write_all_at(&patch, 60_000).unwrap();
            f.sync_all().unwrap();
            d[60_000..65_000].copy_from_slice(&patch);
        }
        // Unacknowledged write: may or may not survive, must not corrupt anything.
        fs::write(m.p("unsynced"), pattern(50_000, 999)).unwrap();
        m.kill_daemon();
        // The mountpoint is now a dead FUSE mount; mount recovers it.
        m.mount();
        for (n, d) in &expected {
            let got = fs::read(m.p(n)).unwrap_or_else(|e| panic!("round {round}: {n}: {e}"));
            assert!(got == *d, "round {round}: {n} differs after kill -9");
        }
        if let Ok(u) = fs::read(m.p("unsynced")) {
            let full = pattern(50_000, 999);
            assert!(
                u.len() <= full.len() && full.starts_with(&u) || u.iter().all(|&b| b == 0),
                "unsynced file holds garbage"
            );
        }
    }
}

#[test]
fn fsync_covers_renames_and_directories() {
    let m = Mount::new();
    fs::create_dir_all(m.p("dir/sub")).unwrap();
    write_synced(&m.p("dir/sub/tmp"), b"v1");
    fs::rename(m.p("dir/sub/tmp"), m.p("dir/final")).unwrap();
    File::open(m.p("dir")).unwrap().sync_all().unwrap();
    m.kill_daemon();
    m.mount();
    assert_eq!(fs::read(m.p("dir/final")).unwrap(), b"v1");
    assert!(!m.p("dir/sub/tmp").exists());
}

#[test]
fn dead_daemon_lock_is_recovered_and_store_stays_usable() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"x");
    m.kill_daemon();
    m.mount();
    let out = tf_ok(&m.store, &["sessions", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sessions"][0]["state"], "mounted");
    assert_eq!(fs::read(m.p("f")).unwrap(), b"x");
}
