//! The CLI contract: mount/umount/sessions, --from, --json, and bad input.

use std::fs;
use std::os::unix::fs::MetadataExt;

use crate::harness::{Mount, tf, tf_ok};

fn err_line(o: &std::process::Output) -> String {
    assert!(!o.status.success(), "expected failure");
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        e.trim_end().lines().count(),
        1,
        "error must be one line: {e:?}"
    );
    e
}

fn store_listing(store: &std::path::Path) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    fn walk(p: &std::path::Path, out: &mut Vec<(String, u64)>) {
        for e in fs::read_dir(p).into_iter().flatten().flatten() {
            let md = e.metadata().unwrap();
            if md.is_dir() {
                walk(&e.path(), out);
            } else if e.file_name() != "daemon.log" && e.file_name() != "lock" {
                out.push((e.path().display().to_string(), md.len()));
            }
        }
    }
    walk(store, &mut v);
    v.sort();
    v
}

#[test]
fn bad_mountpoints_are_refused_with_one_line() {
    let m = Mount::new();
    let before = store_listing(&m.store);
    let missing = m.tmp.path().join("missing");
    let e = err_line(&tf(
        &m.store,
        &["mount", missing.to_str().unwrap(), "--session", "x"],
    ));
    assert!(e.contains("does not exist"), "{e}");

    let full = m.tmp.path().join("full");
    fs::create_dir(&full).unwrap();
    fs::write(full.join("f"), b"x").unwrap();
    let e = err_line(&tf(
        &m.store,
        &["mount", full.to_str().unwrap(), "--session", "x"],
    ));
    assert!(e.contains("not empty"), "{e}");

    let e = err_line(&tf(
        &m.store,
        &["mount", m.mp.to_str().unwrap(), "--session", "x"],
    ));
    assert!(e.contains("already a mount point"), "{e}");

    let other = m.tmp.path().join("other");
    fs::create_dir(&other).unwrap();
    let e = err_line(&tf(
        &m.store,
        &["mount", other.to_str().unwrap(), "--session", "s"],
    ));
    assert!(e.contains("already mounted"), "{e}");

    let e = err_line(&tf(
        &m.store,
        &["mount", other.to_str().unwrap(), "--session", "../x"],
    ));
    assert!(e.contains("invalid session name"), "{e}");

    // Nothing was created by the refused requests.
    let out = tf_ok(&m.store, &["sessions", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(before.len(), store_listing(&m.store).len());
}

#[test]
fn corrupt_or_foreign_store_is_refused_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let mp = tmp.path().join("mnt");
    fs::create_dir(&mp).unwrap();

    let foreign = tmp.path().join("foreign");
    fs::create_dir(&foreign).unwrap();
    fs::write(foreign.join("precious.txt"), b"mine").unwrap();
    let e = err_line(&tf(&foreign, &["mount", mp.to_str().unwrap()]));
    assert!(e.contains("not a treefork store"), "{e}");
    assert_eq!(fs::read(foreign.join("precious.txt")).unwrap(), b"mine");

    let store = tmp.path().join("store");
    fs::create_dir(&store).unwrap();
    fs::write(store.join("treefork.store"), b"{garbage").unwrap();
    let e = err_line(&tf(&store, &["mount", mp.to_str().unwrap()]));
    assert!(e.contains("corrupt"), "{e}");
    assert_eq!(fs::read(store.join("treefork.store")).unwrap(), b"{garbage");
    assert!(!treefork::daemon::is_mountpoint(&mp));

    // A damaged metadata database is refused, never mistaken for an empty store.
    let store2 = tmp.path().join("store2");
    tf_ok(&store2, &["mount", mp.to_str().unwrap(), "--session", "a"]);
    fs::write(mp.join("f"), b"data").unwrap();
    tf_ok(&store2, &["umount", mp.to_str().unwrap()]);
    let db = store2.join("meta/db");
    let mut bytes = fs::read(&db).unwrap();
    for i in (0..bytes.len()).step_by(97) {
        bytes[i] ^= 0xff;
    }
    fs::write(&db, &bytes).unwrap();
    let listing = store_listing(&store2.join("packs"));
    let e = err_line(&tf(
        &store2,
        &["mount", mp.to_str().unwrap(), "--session", "a"],
    ));
    assert!(e.contains("corrupt"), "{e}");
    assert_eq!(listing, store_listing(&store2.join("packs")));
    assert!(!treefork::daemon::is_mountpoint(&mp));
}

#[test]
fn second_daemon_on_a_store_is_refused() {
    let m = Mount::new();
    let o = tf(&m.store, &["daemon"]);
    let e = err_line(&o);
    assert!(e.contains("in use by another treefork daemon"), "{e}");
    assert!(e.contains(&format!("pid {}", m.daemon_pid())), "{e}");
    // The spawning client retries on this exit status, never on the message text.
    assert_eq!(o.status.code(), Some(75), "store-locked exit status");
    fs::write(m.p("still-works"), b"ok").unwrap();
    assert_eq!(fs::read(m.p("still-works")).unwrap(), b"ok");
}

#[test]
fn sessions_lists_state_and_size() {
    let m = Mount::new();
    fs::write(m.p("f"), vec![1u8; 10_000]).unwrap();
    let out = tf_ok(&m.store, &["sessions", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let s = &v["sessions"][0];
    assert_eq!(s["name"], "s");
    assert_eq!(s["state"], "mounted");
    assert_eq!(s["bytes"], 10_000);
    m.umount();
    // Global options are accepted after the subcommand too.
    let out = tf_ok(&m.store, &["sessions"]);
    assert!(out.contains("stopped"), "{out}");
    let o = std::process::Command::new(crate::harness::bin())
        .args(["sessions", "--json", "--store"])
        .arg(&m.store)
        .output()
        .unwrap();
    assert!(o.status.success());
    m.mount();
}

#[test]
fn from_imports_a_tree_with_links() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(src.join("d/e")).unwrap();
    fs::write(src.join("d/e/f"), b"deep").unwrap();
    fs::write(src.join("big"), vec![7u8; 300_000]).unwrap();
    fs::write(src.join("empty"), b"").unwrap();
    fs::hard_link(src.join("d/e/f"), src.join("hard")).unwrap();
    std::os::unix::fs::symlink("d/e/f", src.join("sym")).unwrap();
    let store = tmp.path().join("store");
    let mp = tmp.path().join("mnt");
    fs::create_dir(&mp).unwrap();
    tf_ok(
        &store,
        &[
            "mount",
            mp.to_str().unwrap(),
            "--session",
            "imp",
            "--from",
            src.to_str().unwrap(),
        ],
    );
    let guard = Guard(store.clone(), mp.clone());
    assert_eq!(fs::read(mp.join("d/e/f")).unwrap(), b"deep");
    assert_eq!(fs::read(mp.join("big")).unwrap(), vec![7u8; 300_000]);
    assert_eq!(fs::read(mp.join("empty")).unwrap(), b"");
    assert_eq!(
        fs::read_link(mp.join("sym")).unwrap().to_str(),
        Some("d/e/f")
    );
    let a = fs::metadata(mp.join("hard")).unwrap();
    let b = fs::metadata(mp.join("d/e/f")).unwrap();
    assert_eq!(a.ino(), b.ino());
    assert_eq!(a.nlink(), 2);
    // Writes do not reach the source tree.
    fs::write(mp.join("d/e/f"), b"changed").unwrap();
    assert_eq!(fs::read(src.join("d/e/f")).unwrap(), b"deep");
    assert_eq!(fs::read(mp.join("hard")).unwrap(), b"changed");
    // --from on an existing session is refused.
    tf_ok(&store, &["umount", mp.to_str().unwrap()]);
    let e = err_line(&tf(
        &store,
        &[
            "mount",
            mp.to_str().unwrap(),
            "--session",
            "imp",
            "--from",
            src.to_str().unwrap(),
        ],
    ));
    assert!(e.contains("already exists"), "{e}");
    drop(guard);
}

struct Guard(std::path::PathBuf, std::path::PathBuf);
impl Drop for Guard {
    fn drop(&mut self) {
        let o = tf(&self.0, &["umount", self.1.to_str().unwrap()]);
        if !o.status.success() {
            treefork::daemon::detach(&self.1);
        }
    }
}

#[test]
fn help_everywhere() {
    for args in [
        &["--help"][..],
        &["mount", "--help"],
        &["umount", "--help"],
        &["sessions", "--help"],
    ] {
        let o = std::process::Command::new(crate::harness::bin())
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("Usage"),
            "{args:?}"
        );
    }
}

#[test]
fn concurrent_first_mounts_share_one_daemon() {
    // Every mount finds no daemon and spawns one; all but one of those exit
    // "store locked", and their clients must retry against the winner.
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mps: Vec<_> = (0..4)
        .map(|i| {
            let mp = tmp.path().join(format!("mnt{i}"));
            fs::create_dir(&mp).unwrap();
            mp
        })
        .collect();
    let t0 = std::time::Instant::now();
    let outs: Vec<_> = std::thread::scope(|sc| {
        let hs: Vec<_> = mps
            .iter()
            .enumerate()
            .map(|(i, mp)| {
                let store = &store;
                sc.spawn(move || {
                    let session = format!("s{i}");
                    tf(
                        store,
                        &["mount", mp.to_str().unwrap(), "--session", &session],
                    )
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let guards: Vec<_> = mps
        .iter()
        .map(|mp| Guard(store.clone(), mp.clone()))
        .collect();
    for (i, o) in outs.iter().enumerate() {
        assert!(
            o.status.success(),
            "mount {i}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // A client that finds another's daemon starting waits for it to answer, not
    // for it to exit (that wait ran out only after 15 s).
    let took = t0.elapsed();
    assert!(
        took < std::time::Duration::from_secs(8),
        "mounts took {took:?}"
    );
    for mp in &mps {
        fs::write(mp.join("f"), b"x").unwrap();
    }
    drop(guards);
}

#[test]
fn json_through_an_explicit_socket() {
    let m = Mount::new();
    let sock = treefork::control::find_mount(&m.mp)
        .and_then(|r| r.socket)
        .expect("session socket registered");
    let sock = sock.to_str().unwrap();
    let out = tf_ok(&m.store, &["--socket", sock, "status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], true, "{out}");
    // umount through the socket answers JSON like umount through the store.
    let mp = m.mp.to_str().unwrap();
    let out = tf_ok(&m.store, &["--socket", sock, "umount", mp, "--json"]);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"));
    assert_eq!(v["ok"], true, "{out}");
    assert_eq!(v["mountpoint"], mp, "{out}");
    assert!(!treefork::daemon::is_mountpoint(&m.mp));
}

#[test]
fn every_result_prints_as_json_or_for_people() {
    let m = Mount::new();
    fs::write(m.p("a"), b"one\n").unwrap();
    let json = |args: &[&str]| -> serde_json::Value {
        let mut full = args.to_vec();
        full.push("--json");
        let out = crate::harness::ws_ok(&m, &full);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out:?}"))
    };
    let human = |args: &[&str]| crate::harness::ws_ok(&m, args);
    assert_eq!(json(&["status"])["changes"][0]["path"], "a");
    assert_eq!(human(&["status"]), "A a\n");
    assert_eq!(human(&["diff"]), "A\ta\n");
    assert_eq!(
        human(&["diff", "--stat"]),
        " a | 1 +\n 1 paths changed, 1 insertions(+), 0 deletions(-)\n"
    );
    let id = json(&["checkpoint", "-m", "first"])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(id.len(), 64);
    assert_eq!(
        human(&["branch", "b1"]),
        format!("branch b1 -> {}\n", &id[..12])
    );
    assert_eq!(json(&["branches"])["branches"][0]["name"], "b1");
    assert_eq!(human(&["branch", "-d", "b1"]), "deleted branch b1\n");
    assert_eq!(json(&["log"])["checkpoints"][0]["id"], id.as_str());
    let log = human(&["log"]);
    assert!(log.starts_with(&id[..12]) && log.contains("first"), "{log}");
    fs::write(m.p("a"), b"two\n").unwrap();
    let r = json(&["restore", "HEAD", "--dry-run"]);
    assert_eq!(r["dry_run"], true);
    assert_eq!(human(&["restore", "HEAD", "--dry-run"]), "would rewind a\n");
    let cfg = human(&["config"]);
    assert!(cfg.lines().all(|l| l.contains('=')), "{cfg}");
    assert!(json(&["config"])["config"].is_object());
    let f = json(&["fsck"]);
    assert_eq!(f["clean"], true);
    assert!(human(&["fsck"]).ends_with("store is clean\n"));
    assert!(json(&["gc", "--dry-run"])["gc"]["dry_run"] == true);
    assert!(human(&["gc", "--dry-run"]).starts_with("dry run: "));
}

/// Regression (issue 12): a mistyped `--store` silently created an empty store, and
/// `gc`/`fsck` reported it "clean". Only `mount` creates a store; every other command
/// says there is none there and creates nothing.
#[test]
fn only_mount_creates_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let typo = tmp.path().join("stroe");
    for args in [
        &["gc"][..],
        &["gc", "--dry-run"],
        &["fsck"],
        &["sessions"],
        &["session", "rm", "x"],
    ] {
        let o = tf(&typo, args);
        assert!(!o.status.success(), "{args:?} succeeded on a missing store");
        let e = err_line(&o);
        assert!(e.contains("no treefork store at"), "{args:?}: {e}");
        assert!(e.contains("stroe"), "{args:?} does not name the path: {e}");
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
    // An existing empty directory is not a store either.
    fs::create_dir(&typo).unwrap();
    let o = tf(&typo, &["fsck"]);
    assert!(!o.status.success());
    assert!(err_line(&o).contains("no treefork store at"));
    assert_eq!(
        fs::read_dir(&typo).unwrap().count(),
        0,
        "fsck wrote into it"
    );
}

/// A mount a process still uses is not torn away: `umount` waits up to 2 s for
/// short-lived references, then says it is busy (exit 5, nothing lost); once the
/// process is gone the same `umount` succeeds.
#[test]
fn busy_umount_waits_then_says_busy() {
    let m = Mount::new();
    fs::write(m.p("f"), b"kept").unwrap();
    let mut holder = std::process::Command::new("sleep")
        .arg("30")
        .current_dir(&m.mp)
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let o = tf(&m.store, &["umount", m.mp.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(err_line(&o).contains("is busy"), "{}", err_line(&o));
    assert_eq!(o.status.code(), Some(5), "busy is a conflict-class status");
    assert!(t0.elapsed() >= std::time::Duration::from_millis(1500));
    holder.kill().unwrap();
    holder.wait().unwrap();
    tf_ok(&m.store, &["umount", m.mp.to_str().unwrap()]);
    m.mount();
    assert_eq!(fs::read(m.p("f")).unwrap(), b"kept");
}
