//! `store trim` against a real S3 server (SeaweedFS): a pushed, unmounted
//! session's local copies are dropped (the store shrinks on disk), gc and fsck
//! are fine with what is only on the remote (`remote_held`), and every file
//! reads back exactly (lazily) once the session is mounted again; a mounted
//! session (trim through the daemon) keeps its workspace local.

use std::path::Path;

use super::S3Server;
use super::pull::{add_remote, json_ok};
use crate::harness::{Mount, pattern, write_synced};

fn packs_bytes(store: &Path) -> u64 {
    std::fs::read_dir(store.join("packs"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn trim_frees_local_bytes_and_files_read_back_lazily() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let a = Mount::new();
    for i in 0..6u64 {
        write_synced(&a.p(&format!("f{i}.bin")), &pattern(500_000, 90 + i));
    }
    add_remote(&a.store, &s3, "tr");
    json_ok(&a.store, &["push"]);
    // Mounted (through the daemon): the workspace is kept.
    let kept = json_ok(&a.store, &["store", "trim"]);
    assert_eq!(kept["sessions_kept"][0], "s", "{kept}");
    assert!(kept["objects"].as_u64().unwrap() < 3, "{kept}");
    a.umount();
    // Unmounted (offline): everything the remote holds goes.
    let before = packs_bytes(&a.store);
    let dry = json_ok(&a.store, &["store", "trim", "--dry-run"]);
    assert_eq!(packs_bytes(&a.store), before);
    let r = json_ok(&a.store, &["store", "trim"]);
    assert_eq!(r["objects"], dry["objects"], "{r}");
    assert!(r["objects"].as_u64().unwrap() >= 12, "{r}");
    let after = packs_bytes(&a.store);
    assert!(after * 4 < before, "{before} -> {after}: {r}");
    assert!(r["store_after"].as_u64().unwrap() < r["store_before"].as_u64().unwrap());
    let f = json_ok(&a.store, &["fsck"]);
    assert_eq!(f["clean"], true, "{f}");
    assert!(f["fsck"]["remote_held"].as_u64().unwrap() > 0, "{f}");
    json_ok(&a.store, &["gc"]);
    // Mounted again: every file reads back exactly, from the remote.
    a.mount();
    for i in 0..6u64 {
        let got = std::fs::read(a.p(&format!("f{i}.bin"))).unwrap();
        assert!(got == pattern(500_000, 90 + i), "f{i}.bin differs");
    }
    assert!(packs_bytes(&a.store) > after);
}
