//! Session lifecycle I: the touched-file set kept by the FUSE handlers, the
//! `sessions` / `session show` columns, extend, discard, metrics, and auto-ref
//! retention at gc.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::Value;

use crate::harness::{Mount, tf, tf_ok, write_synced};
use crate::lifecycle::git_repo;

fn touched(store: &std::path::Path, session: &str) -> Vec<String> {
    let s = treefork::store::PackStore::open(store).unwrap();
    treefork::lifecycle::touched::list(&s, session)
        .unwrap()
        .into_iter()
        .map(|p| String::from_utf8(p).unwrap())
        .collect()
}

fn show(m: &Mount) -> Value {
    let out = tf_ok(&m.store, &["session", "show", &m.session, "--json"]);
    serde_json::from_str(&out).unwrap()
}

#[test]
fn touched_set_follows_writes_creates_renames_deletes_and_chmod_not_git() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = git_repo(tmp.path());
    std::fs::create_dir_all(repo.join("d/sub")).unwrap();
    std::fs::write(repo.join("d/sub/x"), "x").unwrap();
    std::fs::write(repo.join("d/y"), "y").unwrap();
    std::fs::write(repo.join("gone"), "g").unwrap();
    std::fs::write(repo.join("mode"), "m").unwrap();
    std::fs::write(repo.join("old"), "o").unwrap();
    let m = Mount::with_options("s", &["--from", repo.to_str().unwrap()]);
    std::fs::write(m.p("src/lib.rs"), "pub fn b() {}\n").unwrap(); // write
    std::fs::write(m.p("new.txt"), "n").unwrap(); // create
    std::fs::rename(m.p("old"), m.p("renamed")).unwrap(); // rename: both names
    std::fs::remove_file(m.p("gone")).unwrap(); // delete
    std::fs::set_permissions(m.p("mode"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(m.p("d"), m.p("e")).unwrap(); // a directory: everything below
    // The agent's own git activity never counts.
    let o = Command::new("git")
        .arg("-C")
        .arg(&m.mp)
        .args(["add", "-A"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    write_synced(&m.p(".git/scratch"), b"git internals");
    // Reads do not touch.
    let _ = std::fs::read(m.p("README")).unwrap();
    m.umount();
    let want = [
        "d",
        "d/sub",
        "d/sub/x",
        "d/y",
        "e",
        "e/sub",
        "e/sub/x",
        "e/y",
        "gone",
        "mode",
        "new.txt",
        "old",
        "renamed",
        "src/lib.rs",
    ];
    assert_eq!(touched(&m.store, "s"), want);
    // Survives a remount; the count shows in `sessions` and `session show`.
    m.mount();
    let v = show(&m);
    assert_eq!(v["touched"], want.len());
    assert_eq!(v["info"]["state"], "active");
    assert_eq!(v["mounted"], true);
    let list: Value = serde_json::from_str(&tf_ok(&m.store, &["sessions", "--json"])).unwrap();
    let row = &list["sessions"][0];
    assert_eq!(row["touched"], want.len());
    assert_eq!(row["lifecycle"], "active");
    assert!(row["age"].is_i64() && row["idle"].is_i64());
    let human = tf_ok(&m.store, &["sessions"]);
    assert!(
        human.contains("TOUCHED") && human.contains("active"),
        "{human}"
    );
}

#[test]
fn touched_paths_of_fsynced_writes_survive_kill_9() {
    let m = Mount::new();
    write_synced(&m.p("a/durable.txt"), b"kept");
    m.kill_daemon();
    let t = touched(&m.store, "s");
    assert!(t.contains(&"a/durable.txt".to_string()), "{t:?}");
    // The next mount counts a recovery.
    m.mount();
    assert_eq!(show(&m)["info"]["metrics"]["recoveries"], 1);
    m.umount();
    m.mount();
    assert_eq!(
        show(&m)["info"]["metrics"]["recoveries"],
        1,
        "a clean unmount is none"
    );
}

#[test]
fn mount_flags_extend_discard_and_metrics() {
    let m = Mount::with_options(
        "s",
        &["--task", "fix the parser", "--ttl-idle", "30m", "--manual"],
    );
    let p = &show(&m)["info"]["policy"];
    assert_eq!(p["idle_ttl_secs"], 1800);
    assert_eq!(p["manual"], true);
    assert_eq!(show(&m)["info"]["task"], "fix the parser");
    // Bad durations are refused before anything happens.
    let o = tf(&m.store, &["session", "extend", "s", "--ttl-idle", "soon"]);
    assert!(!o.status.success());
    tf_ok(
        &m.store,
        &[
            "session",
            "extend",
            "s",
            "--ttl-idle",
            "8h",
            "--ttl-absolute",
            "2d",
        ],
    );
    let i = &show(&m)["info"];
    assert_eq!(i["policy"]["idle_ttl_secs"], 8 * 3600);
    let abs = i["policy"]["absolute_ttl_secs"].as_i64().unwrap();
    assert!((2 * 86_400..2 * 86_400 + 60).contains(&abs), "{abs}");
    // Metrics: a checkpoint and a fork.
    std::fs::write(m.p("f"), "1").unwrap();
    crate::harness::ws_ok(&m, &["checkpoint", "-m", "one"]);
    let fmp = m.tmp.path().join("fork");
    crate::harness::ws_ok(&m, &["fork", "f2", "--mount", fmp.to_str().unwrap()]);
    let met = &show(&m)["info"]["metrics"];
    assert_eq!(met["checkpoints"], 1, "{met}");
    assert_eq!(met["forks"], 1);
    assert!(met["last_checkpoint"].is_i64());
    // The fork inherits the touched set (same baseline).
    let f: Value =
        serde_json::from_str(&tf_ok(&m.store, &["session", "show", "f2", "--json"])).unwrap();
    assert_eq!(f["touched"], 1);
    // Discard unmounts and marks; the session's data stays until gc's retention.
    tf_ok(&m.store, &["session", "discard", "f2"]);
    assert!(!treefork::daemon::is_mountpoint(&fmp));
    let f: Value =
        serde_json::from_str(&tf_ok(&m.store, &["session", "show", "f2", "--json"])).unwrap();
    assert_eq!(f["info"]["state"], "discarded");
    assert_eq!(f["mounted"], false);
}

#[test]
fn agent_socket_shows_its_own_session_only() {
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    let mp2 = m.tmp.path().join("other");
    std::fs::create_dir(&mp2).unwrap();
    tf_ok(
        &m.store,
        &["mount", mp2.to_str().unwrap(), "--session", "other"],
    );
    let agent = |args: &[&str]| {
        let mut full = vec!["--socket", sock.to_str().unwrap()];
        full.extend_from_slice(args);
        tf(&m.store, &full)
    };
    let o = agent(&["session", "show", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["info"]["session"], "s");
    for args in [
        &["session", "show", "other"][..],
        &["session", "extend", "s", "--ttl-idle", "1h"],
        &["session", "discard", "s"],
        &["session", "sweep"],
    ] {
        let o = agent(args);
        assert!(!o.status.success(), "{args:?} allowed on the agent socket");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("not allowed") || e.contains("may only"), "{e}");
    }
    tf_ok(&m.store, &["umount", mp2.to_str().unwrap()]);
}

#[test]
fn auto_refs_past_retention_are_dropped_at_gc() {
    let m = Mount::new();
    crate::harness::ws_ok(&m, &["checkpoint", "-m", "base"]);
    crate::harness::ws_ok(
        &m,
        &[
            "config",
            "auto_ref_retention_days=0",
            "auto_ref_retention_count=1",
        ],
    );
    for i in 0..3 {
        std::fs::write(m.p("f"), format!("{i}")).unwrap();
        crate::harness::ws_ok(&m, &["checkout", "HEAD"]);
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    let autos = |m: &Mount| -> usize {
        // Automatic refs are listed only when asked for (`--auto`).
        let out = crate::harness::ws_ok(m, &["branches", "--auto", "--json"]);
        out.matches("auto/").count()
    };
    let before = autos(&m);
    assert!(before >= 3, "{before}");
    tf_ok(&m.store, &["gc"]);
    assert_eq!(autos(&m), 1, "only the newest auto ref stays");
}

#[test]
fn session_show_counts_writes_not_yet_synced() {
    let m = Mount::new();
    assert_eq!(show(&m)["touched"], 0);
    // No fsync: the write sits in the kernel's cache and the session's memory.
    std::fs::write(m.p("unsynced.txt"), b"x").unwrap();
    assert_eq!(show(&m)["touched"], 1);
}

/// git's loose objects: a temporary file is written, linked to its final name,
/// unlinked and fsynced, one after the other (each fsync a flush). Every name shows
/// in the touched set; a hard-linked file written later counts all its names in
/// loaded directories, including names from before the session.
#[test]
fn git_style_link_unlink_touches_every_name() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let repo = git_repo(tmp.path());
    std::fs::create_dir_all(repo.join("d")).unwrap();
    std::fs::write(repo.join("h1"), "shared").unwrap();
    std::fs::hard_link(repo.join("h1"), repo.join("d/h2")).unwrap();
    let m = Mount::with_options("s", &["--from", repo.to_str().unwrap()]);
    let mut want = std::collections::BTreeSet::new();
    std::fs::create_dir(m.p("objs")).unwrap();
    want.insert("objs".to_string());
    for i in 0..4 {
        std::fs::create_dir(m.p(&format!("objs/{i:02x}"))).unwrap();
        want.insert(format!("objs/{i:02x}"));
    }
    for i in 0..400 {
        let tmp = format!("objs/tmp_obj_{i}");
        let obj = format!("objs/{:02x}/{i:038}", i % 4);
        let mut f = std::fs::File::create(m.p(&tmp)).unwrap();
        f.write_all(format!("blob {i}").as_bytes()).unwrap();
        std::fs::hard_link(m.p(&tmp), m.p(&obj)).unwrap();
        std::fs::remove_file(m.p(&tmp)).unwrap();
        f.sync_all().unwrap();
        want.insert(tmp);
        want.insert(obj);
    }
    // Both names of the imported hard link (its directory loaded first).
    assert_eq!(std::fs::read_dir(m.p("d")).unwrap().count(), 1);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(m.p("h1"))
        .unwrap();
    f.write_all(b"!").unwrap();
    f.sync_all().unwrap();
    drop(f);
    want.insert("h1".to_string());
    want.insert("d/h2".to_string());
    m.umount();
    let got: std::collections::BTreeSet<String> = touched(&m.store, "s").into_iter().collect();
    assert_eq!(got, want);
    // Each object, back to one name, left the link table (`unlink_to_one`): after a
    // remount every object reads back under its name with one link, and the
    // imported pair still shares its inode.
    m.mount();
    for i in 0..400 {
        let obj = m.p(&format!("objs/{:02x}/{i:038}", i % 4));
        assert_eq!(std::fs::read(&obj).unwrap(), format!("blob {i}").as_bytes());
        assert_eq!(
            std::os::unix::fs::MetadataExt::nlink(&std::fs::metadata(&obj).unwrap()),
            1
        );
    }
    let (a, b) = (
        std::fs::metadata(m.p("h1")).unwrap(),
        std::fs::metadata(m.p("d/h2")).unwrap(),
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    assert_eq!(std::fs::read(m.p("d/h2")).unwrap(), b"shared!");
    // A link and an unlink more, across a remount: the survivor keeps its bytes.
    let first = format!("objs/00/{:038}", 0);
    std::fs::hard_link(m.p(&first), m.p("again")).unwrap();
    std::fs::remove_file(m.p(&first)).unwrap();
    m.remount();
    assert_eq!(std::fs::read(m.p("again")).unwrap(), b"blob 0");
}
