//! A store written by the previous release (22a34dd: store version 2, checkpoint
//! and session records version 1) opens with this one, reads back every byte,
//! keeps its history and ids, works (fork, checkpoint, fsck), and is upgraded.
//! The fixture is made by scripts/make-fixture-v2.sh; its expect/*.json is the old
//! binary's own output.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::Value;
use treefork::meta;
use treefork::store::{ObjectStore, PackStore};

use crate::harness::*;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-v2.tar.gz"
);

fn json(store: &Path, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    serde_json::from_str(&tf_ok(store, &full)).unwrap()
}

fn expect(dir: &Path, name: &str) -> Value {
    serde_json::from_slice(&fs::read(dir.join("expect").join(name)).unwrap()).unwrap()
}

/// The contents scripts/make-fixture-v2.sh wrote into `big.txt`.
fn big() -> Vec<u8> {
    (1..=200_000)
        .flat_map(|i| format!("{i:08} the quick brown fox\n").into_bytes())
        .collect()
}

/// The files of checkpoint "first" (what branch `feature` names).
fn first_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("small.txt", b"hello v2\n".to_vec()),
        ("empty", vec![]),
        ("run.sh", b"#!/bin/sh\necho hi\n".to_vec()),
        ("big.txt", big()),
        ("dir/nested/deep.txt", b"deep\n".to_vec()),
        ("dir/hard.txt", b"deep\n".to_vec()),
    ]
}

/// `first` with the given files replaced or added.
fn with(
    mut files: Vec<(&'static str, Vec<u8>)>,
    more: &[(&'static str, &[u8])],
) -> Vec<(&'static str, Vec<u8>)> {
    for (p, b) in more {
        files.retain(|(q, _)| q != p);
        files.push((p, b.to_vec()));
    }
    files
}

/// The files of the auto checkpoint saved before main's checkout.
fn saved_files() -> Vec<(&'static str, Vec<u8>)> {
    with(
        first_files(),
        &[
            ("small.txt", b"hello v2\nmore\n"),
            ("second.txt", b"second\n"),
            ("pending.txt", b"pending\n"),
        ],
    )
}

/// Every path of a tree, sorted (directories with a trailing `/`).
fn tree_paths(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel)).unwrap() {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                out.push(format!("{}/", r.display()));
                stack.push(r);
            } else {
                out.push(r.display().to_string());
            }
        }
    }
    out.sort();
    out
}

fn check_tree(mp: &Path, files: &[(&str, Vec<u8>)]) {
    let mut want: Vec<String> = files.iter().map(|(p, _)| p.to_string()).collect();
    want.extend(["link", "dir/", "dir/nested/"].map(String::from));
    want.sort();
    assert_eq!(tree_paths(mp), want);
    for (p, bytes) in files {
        assert!(fs::read(mp.join(p)).unwrap() == *bytes, "{p} differs");
    }
    assert_eq!(
        fs::read_link(mp.join("link")).unwrap(),
        Path::new("small.txt")
    );
    assert_eq!(
        fs::read(mp.join("link")).unwrap(),
        fs::read(mp.join("small.txt")).unwrap()
    );
    let (a, b) = (
        fs::metadata(mp.join("dir/nested/deep.txt")).unwrap(),
        fs::metadata(mp.join("dir/hard.txt")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "hard link kept");
    let mode = fs::metadata(mp.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

/// (id, message, trigger, parent) of each checkpoint of a `log` answer.
fn history(log: &Value) -> Vec<(String, String, String, Value)> {
    log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["message"].as_str().unwrap().to_string(),
                c["trigger"].as_str().unwrap().to_string(),
                c["parent"].clone(),
            )
        })
        .collect()
}

/// Wait until the daemon is gone (it exits after its last unmount).
fn wait_daemon_gone(store: &Path) {
    for _ in 0..500 {
        if let Ok(l) = treefork::lock::StoreLock::acquire(store) {
            drop(l);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the daemon of {} did not exit", store.display());
}

fn record(s: &PackStore, key: &[u8]) -> Value {
    serde_json::from_slice(&s.meta_get(key).unwrap().expect("record present")).unwrap()
}

#[test]
fn store_of_the_previous_release_opens_and_upgrades() {
    let tmp = tempfile::Builder::new()
        .prefix("tf-upgrade-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().to_path_buf();
    sh(&dir, &format!("tar -xzf {FIXTURE}"));
    let store = dir.join("store");
    let descriptor = |s: &Path| -> Value {
        serde_json::from_slice(&fs::read(s.join("treefork.store")).unwrap()).unwrap()
    };
    assert_eq!(
        descriptor(&store)["version"],
        2,
        "the fixture is a version-2 store"
    );
    let old_log = expect(&dir, "log-main.json");
    let before = history(&expect(&dir, "log-main-before-checkout.json"));
    let (second, first) = (before[0].0.clone(), before[1].0.clone());

    // The working state of main, byte for byte; the history and branches as the
    // old binary reported them (same ids: nothing was recomputed).
    let m = Mount::at(tmp, store.clone(), dir.join("main"), "main");
    m.mount();
    assert_eq!(
        descriptor(&store)["version"],
        3,
        "marked upgraded when opened"
    );
    check_tree(&m.mp, &with(first_files(), &[("after.txt", b"after\n")]));
    let log = serde_json::from_str::<Value>(&ws_ok(&m, &["--json", "log"])).unwrap();
    assert_eq!(history(&log), history(&old_log));
    let branches = |v: &Value| -> Vec<(String, String)> {
        let mut b: Vec<_> = v["branches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["name"].as_str().unwrap().into(),
                    b["checkpoint"].as_str().unwrap().into(),
                )
            })
            .collect();
        b.sort();
        b
    };
    let old_branches = branches(&expect(&dir, "branches.json"));
    // Branches made before they were per session stay store-wide: listed (the
    // automatic ones with --auto) and resolved by every session as before.
    assert_eq!(
        branches(&json(
            &store,
            &["-C", m.mp.to_str().unwrap(), "branches", "--auto"]
        )),
        old_branches
    );
    let everyday = branches(&json(&store, &["-C", m.mp.to_str().unwrap(), "branches"]));
    assert!(
        everyday.iter().all(|b| !b.0.starts_with("auto/")),
        "{everyday:?}"
    );
    assert!(everyday.contains(&("feature".into(), first.clone())));
    let feature = json(
        &store,
        &["-C", m.mp.to_str().unwrap(), "log", "-n", "1", "feature"],
    );
    assert_eq!(feature["checkpoints"][0]["id"], first.as_str());
    // A new branch of that name is refused, saying whose the name is.
    let o = tf(&store, &["-C", m.mp.to_str().unwrap(), "branch", "feature"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("store-wide"), "{err}");
    let (auto_ref, saved) = old_branches
        .iter()
        .find(|b| b.0.starts_with("auto/"))
        .unwrap()
        .clone();
    assert!(old_branches.contains(&("feature".into(), first.clone())));
    let status = serde_json::from_str::<Value>(&ws_ok(&m, &["--json", "status"])).unwrap();
    assert_eq!(
        status["changes"],
        serde_json::json!([{"path": "after.txt", "change": "added"}])
    );

    // The old fork: its own file on top of branch feature, its own history.
    let f_mp = dir.join("forked");
    fs::create_dir_all(&f_mp).unwrap();
    tf_ok(
        &store,
        &["mount", f_mp.to_str().unwrap(), "--session", "forked"],
    );
    check_tree(&f_mp, &with(first_files(), &[("fork-only.txt", b"fork\n")]));
    let f_log = json(&store, &["-C", f_mp.to_str().unwrap(), "log"]);
    let f_feature = json(
        &store,
        &["-C", f_mp.to_str().unwrap(), "log", "-n", "1", "feature"],
    );
    assert_eq!(
        f_feature["checkpoints"][0]["id"],
        first.as_str(),
        "another session resolves the store-wide branch too"
    );
    assert_eq!(history(&f_log), history(&expect(&dir, "log-forked.json")));

    // A new fork of the old auto branch: the saved tree, and the whole old history
    // (auto save -> second -> first), parents read from version-1 records.
    let n_mp = dir.join("new-fork");
    fs::create_dir_all(&n_mp).unwrap();
    ws_ok(
        &m,
        &[
            "fork",
            "new-fork",
            "--from",
            &auto_ref,
            "--mount",
            n_mp.to_str().unwrap(),
        ],
    );
    check_tree(&n_mp, &saved_files());
    let n_log = json(&store, &["-C", n_mp.to_str().unwrap(), "log"]);
    let n_hist = history(&n_log);
    assert_eq!(n_hist[0].0, saved);
    assert_eq!(
        (n_hist[0].2.as_str(), &n_hist[0].3),
        ("before-checkout", &Value::from(second.clone()))
    );
    assert_eq!(n_hist[1..], before[..]);
    for c in n_log["checkpoints"].as_array().unwrap() {
        let parents: Vec<Value> = c["parent"].as_str().map(Value::from).into_iter().collect();
        assert_eq!(
            c["parents"],
            Value::Array(parents),
            "v1 parent read as parents"
        );
    }

    // Old checkpoints resolve by a short id prefix, odd length included (a range
    // scan of the real index).
    ws_ok(&m, &["branch", "by-prefix", &second[..7]]);
    let b = json(&store, &["-C", m.mp.to_str().unwrap(), "branches"]);
    assert!(branches(&b).contains(&("by-prefix".into(), second.clone())));

    // A new checkpoint on top of the old history.
    fs::write(m.p("new.txt"), "new\n").unwrap();
    let c = serde_json::from_str::<Value>(&ws_ok(&m, &["--json", "checkpoint", "-m", "new"]))
        .unwrap()["checkpoint"]
        .clone();
    let new_id = c["id"].as_str().unwrap().to_string();
    assert_eq!(c["parents"], serde_json::json!([first]));
    let log = serde_json::from_str::<Value>(&ws_ok(&m, &["--json", "log"])).unwrap();
    assert_eq!(history(&log)[1..], history(&old_log)[..]);

    // fsck: clean, with the old records and the new ones.
    let o = tf(&store, &["fsck"]);
    assert!(
        o.status.success(),
        "fsck found problems:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    tf_ok(&store, &["umount", n_mp.to_str().unwrap()]);
    tf_ok(&store, &["umount", f_mp.to_str().unwrap()]);
    m.umount();
    wait_daemon_gone(&store);

    // The records: written ones are the new version; untouched old checkpoints
    // stay as they were (records are immutable) and keep their ids.
    {
        let s = PackStore::open(&store).unwrap();
        let new = record(&s, &meta::checkpoint_key(&hex32(&new_id)));
        assert_eq!(new["version"], 2);
        assert_eq!(new["parents"], serde_json::json!([first]));
        assert!(new.get("parent").is_none());
        let main = record(&s, &meta::session_key("main"));
        assert_eq!(
            main["version"],
            treefork::refs::session_record::SESSION_RECORD_VERSION,
            "session record rewritten in the new format"
        );
        assert_eq!(main["head"], Value::from(new_id.clone()));
        assert!(main["meta"].is_object());
        let old = record(&s, &meta::checkpoint_key(&hex32(&first)));
        assert_eq!(
            (old["version"].clone(), old["id"].clone()),
            (1.into(), first.clone().into())
        );
        let c = treefork::refs::load(&s, &hex32(&second)).unwrap();
        assert!(c.id_matches(), "an old id still verifies");
    }
    // And it still mounts afterwards, with everything in place.
    m.mount();
    let files = with(
        first_files(),
        &[("after.txt", b"after\n"), ("new.txt", b"new\n")],
    );
    check_tree(&m.mp, &files);
}

fn hex32(s: &str) -> treefork::id::CheckpointId {
    treefork::id::CheckpointId::from_hex(s).unwrap()
}
