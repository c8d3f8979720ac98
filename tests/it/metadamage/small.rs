//! A small store (one session `keepme` of 300 files, one named checkpoint, one
//! branch) with bytes flipped in its `meta/db`: sled may then recover an older
//! state in which the session does not exist. `mount --session keepme` must be
//! refused or show the same files — never an empty workspace (a new session of
//! that name) — and after `fsck --repair` the session, its files, its log and the
//! branch are back.

use serde_json::Value;

use super::damage;
use super::facts::{tree_diff, tree_hashes, ws_cli};
use crate::harness::{Mount, tf, tf_ok, umount_ok, wait_daemon_gone, write_synced};

/// `log` and `branches` of the mounted session.
fn refs_of(m: &Mount) -> (Value, Value) {
    (
        ws_cli(&m.store, &m.mp, &["log"]),
        ws_cli(&m.store, &m.mp, &["branches"]),
    )
}

#[test]
fn small_store_never_shows_an_empty_session() {
    let m = Mount::with_session("keepme");
    for i in 0..300u64 {
        let body = format!("keep file {i}\n").repeat(1 + (i % 7) as usize);
        write_synced(&m.p(&format!("d{}/k{i:03}.txt", i % 10)), body.as_bytes());
    }
    let mp = m.mp.to_str().unwrap();
    tf_ok(&m.store, &["-C", mp, "checkpoint", "-m", "keep these"]);
    tf_ok(&m.store, &["-C", mp, "branch", "keepbr"]);
    let files = tree_hashes(&m.mp);
    assert_eq!(files.values().filter(|v| *v != "dir").count(), 300);
    let (log, branches) = refs_of(&m);
    assert!(branches.to_string().contains("keepbr"), "{branches}");
    m.umount();
    wait_daemon_gone(&m.store);

    damage::flip(&m.store.join("meta/db"), 1);
    let o = tf(&m.store, &["mount", mp, "--session", "keepme"]);
    if o.status.code() == Some(7) {
        eprintln!("small store: the damaged mount was refused");
        damage::assert_refused(&o, "mount --session keepme", &m.store);
        assert!(crate::harness::fuse_mounts_under(&m.mp).is_empty());
    } else {
        assert!(
            o.status.success(),
            "mount of the damaged small store: exit {:?}: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        );
        eprintln!("small store: the damaged store mounted");
        let seen = tree_hashes(&m.mp);
        assert!(
            !seen.is_empty(),
            "the damaged store mounted keepme as an EMPTY workspace"
        );
        let d = tree_diff(&files, &seen);
        assert!(d.is_empty(), "the damaged store mounted other files: {d}");
        assert_eq!(refs_of(&m), (log.clone(), branches.clone()));
        umount_ok(&m.store, &m.mp);
        wait_daemon_gone(&m.store);
    }

    // Repair (a no-op when the open was sound), then everything is back.
    let r = tf(&m.store, &["--json", "fsck", "--repair"]);
    assert_eq!(
        r.status.code(),
        Some(0),
        "fsck --repair: {}\n{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    m.mount();
    let d = tree_diff(&files, &tree_hashes(&m.mp));
    assert!(d.is_empty(), "files after the repair: {d}");
    assert_eq!(
        refs_of(&m),
        (log, branches),
        "log and branches after the repair"
    );
    m.umount();
    wait_daemon_gone(&m.store);
    damage::assert_fsck_clean(&m.store);
}
