//! Checkpoints, log, status, branches, checkout, fork, diff, restore, the session
//! control socket, auto-checkpoints and persistence of history.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{Mount, daemon_log, tf, tf_ok, ws, ws_ok};

// ---------------------------------------------------------------------------------
// Helpers

/// Like [`ws_ok`] with `--json`; returns the parsed output.
fn wsj(m: &Mount, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = ws_ok(m, &full);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}\n{out}"))
}

/// Like [`ws`], requiring failure; returns stderr.
fn ws_err(m: &Mount, args: &[&str]) -> String {
    let o = ws(m, args);
    assert!(
        !o.status.success(),
        "treefork {args:?} unexpectedly succeeded: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `treefork --store S --json args...` run with `dir` as current directory.
fn in_dir_json(m: &Mount, dir: &Path, args: &[&str]) -> Value {
    let o = in_dir(m, dir, args);
    assert!(
        o.status.success(),
        "treefork {args:?} in {} failed: {}\n{}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn in_dir(m: &Mount, dir: &Path, args: &[&str]) -> Output {
    Command::new(crate::harness::bin())
        .arg("--store")
        .arg(&m.store)
        .arg("--json")
        .args(args)
        .current_dir(dir)
        .env_remove("TREEFORK_STORE")
        .output()
        .expect("run treefork")
}

fn checkpoint(m: &Mount, msg: &str) -> String {
    let v = wsj(m, &["checkpoint", "-m", msg]);
    assert_eq!(v["ok"], true, "{v}");
    v["checkpoint"]["id"].as_str().unwrap().to_string()
}

fn log(m: &Mount) -> Vec<Value> {
    wsj(m, &["log", "--limit", "1000"])["checkpoints"]
        .as_array()
        .unwrap()
        .clone()
}

fn head(m: &Mount) -> String {
    log(m)[0]["id"].as_str().unwrap().to_string()
}

/// (path, change) pairs of a `changes`/`entries` array, sorted.
fn changes(v: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = v
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["change"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = v
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    out.sort();
    out
}

fn status(m: &Mount) -> Vec<(String, String)> {
    changes(&wsj(m, &["status"])["changes"])
}

fn branches(m: &Mount) -> Vec<Value> {
    wsj(m, &["branches"])["branches"]
        .as_array()
        .unwrap()
        .clone()
}

/// The checkpoint the session's branch (or automatic `auto/...` ref) `name` names.
fn branch_target(m: &Mount, name: &str) -> Option<String> {
    wsj(m, &["branches", "--auto"])["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .map(|b| b["checkpoint"].as_str().unwrap().to_string())
}

fn session_names(store: &Path) -> Vec<String> {
    let v: Value = serde_json::from_str(&tf_ok(store, &["sessions", "--json"])).unwrap();
    let mut names: Vec<String> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn read(p: PathBuf) -> String {
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

fn names(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Unmounts an extra mountpoint (a fork) at the end of a test, even on panic.
struct Guard(PathBuf, PathBuf);
impl Drop for Guard {
    fn drop(&mut self) {
        if !treefork::daemon::is_mountpoint(&self.1) {
            return;
        }
        let o = tf(&self.0, &["umount", self.1.to_str().unwrap()]);
        if !o.status.success() {
            treefork::daemon::detach(&self.1);
        }
    }
}

/// A long-running bash reading commands from stdin.
struct Shell {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Shell {
    fn spawn(cwd: &Path) -> Shell {
        let mut child = Command::new("bash")
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Shell { child, lines }
    }

    /// Run `cmd`; returns its output (stderr merged into stdout), one `\n` per line.
    fn run(&mut self, cmd: &str) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{{ {cmd} ; }} 2>&1; printf '\\n__END__\\n'").unwrap();
        stdin.flush().unwrap();
        let mut out = String::new();
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("shell running {cmd:?}: {e}; output so far: {out:?}"));
            if line == "__END__" {
                // Drop the newline printf added before the marker.
                out.pop();
                return out;
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------
// 1. checkpoint + log

#[test]
fn checkpoint_and_log() {
    let m = Mount::new();
    fs::write(m.p("a.txt"), b"a1").unwrap();
    fs::write(m.p("b.txt"), b"b1").unwrap();
    // Plain output: the id alone.
    let out = ws_ok(&m, &["checkpoint", "-m", "first"]);
    let c1 = out.trim().to_string();
    assert!(is_hex64(&c1), "plain checkpoint output: {out:?}");
    assert_eq!(out.lines().count(), 1, "{out:?}");

    fs::write(m.p("a.txt"), b"a2").unwrap();
    fs::remove_file(m.p("b.txt")).unwrap();
    fs::write(m.p("c.txt"), b"c").unwrap();
    let v = wsj(
        &m,
        &["checkpoint", "-m", "second", "--trigger", "milestone"],
    );
    assert_eq!(v["ok"], true);
    let cp = &v["checkpoint"];
    let c2 = cp["id"].as_str().unwrap().to_string();
    assert!(is_hex64(&c2));
    assert_ne!(c1, c2);
    assert!(c2.starts_with(cp["short"].as_str().unwrap()), "{cp}");
    assert_eq!(cp["parent"], c1.as_str());
    assert_eq!(cp["message"], "second");
    assert_eq!(cp["trigger"], "milestone");
    assert_eq!(cp["files_changed"], 3, "{cp}");
    assert!(cp["time"].as_u64().unwrap() > 1_600_000_000, "{cp}");

    let l = log(&m);
    assert_eq!(l.len(), 2, "{l:?}");
    assert_eq!(l[0]["id"], c2.as_str());
    assert_eq!(l[1]["id"], c1.as_str());
    assert_eq!(l[0]["parent"], c1.as_str());
    assert_eq!(l[1]["parent"], Value::Null);
    assert_eq!(l[1]["message"], "first");
    assert_eq!(l[1]["trigger"], "manual");
    assert_eq!(l[1]["files_changed"], 2, "{}", l[1]);
    assert_eq!(l[0]["trigger"], "milestone");
    assert_eq!(l[0]["files_changed"], 3);
    assert!(l[0]["time"].as_u64() >= l[1]["time"].as_u64());
    let l1 = wsj(&m, &["log", "--limit", "1"]);
    let l1 = l1["checkpoints"].as_array().unwrap();
    assert_eq!(l1.len(), 1);
    assert_eq!(l1[0]["id"], c2.as_str());

    // Data still in the writeback cache (no fsync, file still open) is captured.
    let mut f = File::create(m.p("wb.txt")).unwrap();
    f.write_all(b"before checkpoint").unwrap();
    let c3 = checkpoint(&m, "writeback");
    f.write_all(b" + after").unwrap();
    drop(f);
    assert_eq!(read(m.p("wb.txt")), "before checkpoint + after");
    ws_ok(&m, &["checkout", &c3]);
    assert_eq!(
        read(m.p("wb.txt")),
        "before checkpoint",
        "checkpoint lost unflushed data"
    );
    assert_eq!(read(m.p("a.txt")), "a2");
}

// ---------------------------------------------------------------------------------
// 2. status

#[test]
fn status_lists_exact_changes() {
    let m = Mount::new();
    fs::write(m.p("keep"), b"k").unwrap();
    fs::write(m.p("mod"), b"m1").unwrap();
    fs::write(m.p("del"), b"d").unwrap();
    fs::create_dir_all(m.p("dir/sub")).unwrap();
    fs::write(m.p("dir/sub/deep"), b"deep").unwrap();
    fs::write(m.p("dir/other"), b"o").unwrap();
    checkpoint(&m, "base");
    assert_eq!(status(&m), vec![], "status right after a checkpoint");

    fs::write(m.p("mod"), b"m2").unwrap();
    fs::remove_file(m.p("del")).unwrap();
    fs::write(m.p("new"), b"n").unwrap();
    fs::write(m.p("dir/sub/deep"), b"deeper").unwrap();
    fs::remove_file(m.p("dir/other")).unwrap();
    fs::write(m.p("dir/sub/added"), b"a").unwrap();
    assert_eq!(
        status(&m),
        pairs(&[
            ("mod", "modified"),
            ("del", "deleted"),
            ("new", "added"),
            ("dir/sub/deep", "modified"),
            ("dir/other", "deleted"),
            ("dir/sub/added", "added"),
        ])
    );
    // Plain output mentions every changed path.
    let plain = ws_ok(&m, &["status"]);
    for p in [
        "mod",
        "del",
        "new",
        "dir/sub/deep",
        "dir/other",
        "dir/sub/added",
    ] {
        assert!(plain.contains(p), "{p} missing from {plain}");
    }
    assert!(!plain.contains("keep"), "{plain}");

    checkpoint(&m, "second");
    assert_eq!(
        status(&m),
        vec![],
        "status right after the second checkpoint"
    );
}

// ---------------------------------------------------------------------------------
// 3. branches and refs

#[test]
fn branches_and_ref_errors() {
    let m = Mount::new();
    fs::write(m.p("f"), b"1").unwrap();
    let c1 = checkpoint(&m, "one");
    fs::write(m.p("f"), b"2").unwrap();
    let c2 = checkpoint(&m, "two");

    ws_ok(&m, &["branch", "old", "HEAD~1"]);
    ws_ok(&m, &["branch", "byid", &c1[..10]]);
    ws_ok(&m, &["branch", "here"]);
    assert_eq!(branch_target(&m, "old").as_deref(), Some(c1.as_str()));
    assert_eq!(branch_target(&m, "byid").as_deref(), Some(c1.as_str()));
    assert_eq!(branch_target(&m, "here").as_deref(), Some(c2.as_str()));
    assert_eq!(head(&m), c2, "branch without pending changes moved HEAD");

    // With pending changes, the branch checkpoints them first.
    fs::write(m.p("f"), b"3").unwrap();
    ws_ok(&m, &["branch", "pending"]);
    let c3 = head(&m);
    assert_ne!(c3, c2);
    assert_eq!(branch_target(&m, "pending").as_deref(), Some(c3.as_str()));
    assert_eq!(status(&m), vec![]);

    // Branches are usable as refs.
    ws_ok(&m, &["checkout", "old"]);
    assert_eq!(read(m.p("f")), "1");
    ws_ok(&m, &["checkout", "pending"]);
    assert_eq!(read(m.p("f")), "3");

    let before = branches(&m);
    let e = ws_err(&m, &["branch", "old"]);
    assert!(e.contains("already exists"), "{e}");
    for bad in [
        "a/../b", "", "x y", "a\u{1}b", "HEAD", "..", "/abs", "tab\tx",
    ] {
        let e = ws_err(&m, &["branch", bad]);
        assert!(e.contains("invalid branch name"), "{bad:?}: {e}");
    }
    assert_eq!(
        branches(&m),
        before,
        "refused branch commands changed branches"
    );

    ws_ok(&m, &["branch", "-d", "old"]);
    assert_eq!(branch_target(&m, "old"), None);
    assert!(branch_target(&m, "byid").is_some());
    let _ = ws_err(&m, &["branch", "-d", "old"]);
    let e = ws_err(&m, &["checkout", "old"]);
    assert!(e.contains("unknown ref"), "{e}");
    let e = ws_err(&m, &["checkout", "nonexistent"]);
    assert!(e.contains("unknown ref"), "{e}");
    let e = ws_err(&m, &["checkout", "deadbeef"]);
    assert!(e.contains("unknown ref"), "{e}");
    let e = ws_err(&m, &["checkout", "HEAD~99"]);
    assert!(!e.trim().is_empty());
    let e = ws_err(&m, &["diff", "HEAD~3", "HEAD"]);
    assert!(!e.trim().is_empty());
    // The failed commands changed nothing.
    assert_eq!(read(m.p("f")), "3");
    assert_eq!(head(&m), c3);
}

// ---------------------------------------------------------------------------------
// 4. checkout

#[test]
fn checkout_saves_keeps_inodes_and_live_processes() {
    let m = Mount::new();
    fs::create_dir(m.p("sub")).unwrap();
    fs::write(m.p("sub/keep.txt"), b"keep").unwrap();
    fs::write(m.p("sub/chg.txt"), b"v1\n").unwrap();
    fs::write(m.p("same.txt"), b"same").unwrap();
    let c1 = checkpoint(&m, "c1");
    // Let clocks move so a rewritten mtime would be visible.
    std::thread::sleep(Duration::from_millis(20));
    fs::write(m.p("sub/chg.txt"), b"v2\n").unwrap();
    fs::write(m.p("sub/new.txt"), b"new").unwrap();
    let c2 = checkpoint(&m, "c2");
    fs::write(m.p("pending.txt"), b"pending").unwrap();
    let keep_md = fs::metadata(m.p("sub/keep.txt")).unwrap();
    let same_md = fs::metadata(m.p("same.txt")).unwrap();
    let sub_md = fs::metadata(m.p("sub")).unwrap();

    let mut shell = Shell::spawn(&m.p("sub"));
    assert_eq!(shell.run("cat chg.txt"), "v2\n");
    let mut open = File::open(m.p("sub/chg.txt")).unwrap();
    let mut s = String::new();
    open.read_to_string(&mut s).unwrap();
    assert_eq!(s, "v2\n");

    let v = wsj(&m, &["checkout", &c1[..8]]);
    assert_eq!(v["checkpoint"]["id"], c1.as_str(), "{v}");
    let saved_ref = v["saved"]["ref"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert!(saved_ref.starts_with("auto/before-checkout-"), "{v}");
    let saved_cp = v["saved"]["checkpoint"].as_str().unwrap();
    assert!(is_hex64(saved_cp));
    assert_ne!(
        saved_cp, c2,
        "pending changes were not in the saved checkpoint"
    );
    assert_eq!(branch_target(&m, saved_ref).as_deref(), Some(saved_cp));

    // The tree is c1's.
    assert_eq!(read(m.p("sub/chg.txt")), "v1\n");
    assert!(!m.p("sub/new.txt").exists());
    assert!(!m.p("pending.txt").exists());
    assert_eq!(status(&m), vec![]);
    assert_eq!(head(&m), c1);

    // The shell that has sub/ as cwd sees the new tree.
    assert_eq!(shell.run("cat chg.txt"), "v1\n");
    assert_eq!(shell.run("ls"), "chg.txt\nkeep.txt\n");
    assert_eq!(shell.run("pwd"), format!("{}\n", m.p("sub").display()));
    assert_eq!(shell.run("cat ../same.txt"), "same");

    // The already-open file keeps its old content.
    let mut s = String::new();
    open.seek(SeekFrom::Start(0)).unwrap();
    open.read_to_string(&mut s).unwrap();
    assert_eq!(s, "v2\n", "open fd content changed under checkout");

    // Unchanged files keep inode and mtime.
    let keep_after = fs::metadata(m.p("sub/keep.txt")).unwrap();
    assert_eq!(keep_after.ino(), keep_md.ino(), "keep.txt inode changed");
    assert_eq!(
        (keep_after.mtime(), keep_after.mtime_nsec()),
        (keep_md.mtime(), keep_md.mtime_nsec()),
        "keep.txt mtime changed"
    );
    let same_after = fs::metadata(m.p("same.txt")).unwrap();
    assert_eq!(same_after.ino(), same_md.ino(), "same.txt inode changed");
    assert_eq!(
        (same_after.mtime(), same_after.mtime_nsec()),
        (same_md.mtime(), same_md.mtime_nsec()),
        "same.txt mtime changed"
    );
    assert_eq!(fs::metadata(m.p("sub")).unwrap().ino(), sub_md.ino());
    drop(open);
    drop(shell);

    // Checking out the saved ref brings the pending changes back.
    let v = wsj(&m, &["checkout", saved_ref]);
    assert_eq!(v["checkpoint"]["id"], saved_cp);
    assert_eq!(read(m.p("pending.txt")), "pending");
    assert_eq!(read(m.p("sub/chg.txt")), "v2\n");
    assert_eq!(read(m.p("sub/new.txt")), "new");
    assert_eq!(read(m.p("sub/keep.txt")), "keep");
}

// ---------------------------------------------------------------------------------
// 5. fork

#[test]
fn fork_isolates_sessions() {
    let m = Mount::new();
    fs::write(m.p("base"), b"c1").unwrap();
    fs::create_dir_all(m.p("conc")).unwrap();
    fs::create_dir_all(m.p("d/e")).unwrap();
    fs::write(m.p("d/e/deep"), b"deep").unwrap();
    checkpoint(&m, "c1");
    ws_ok(&m, &["branch", "feat"]);
    fs::write(m.p("base"), b"live").unwrap(); // pending, not checkpointed

    let f_mp = m.tmp.path().join("fork-f");
    fs::create_dir(&f_mp).unwrap();
    let _gf = Guard(m.store.clone(), f_mp.clone());
    ws_ok(&m, &["fork", "f", "--mount", f_mp.to_str().unwrap()]);
    assert!(treefork::daemon::is_mountpoint(&f_mp));
    let fp = |r: &str| f_mp.join(r);
    assert_eq!(read(fp("base")), "live");
    assert_eq!(read(fp("d/e/deep")), "deep");
    assert_eq!(names(&f_mp), names(&m.mp));

    // Writes in either direction stay in their session.
    fs::write(m.p("only-main"), b"m").unwrap();
    fs::write(fp("only-fork"), b"f").unwrap();
    fs::write(fp("base"), b"changed in fork").unwrap();
    fs::write(m.p("d/e/deep"), b"changed in main").unwrap();
    fs::remove_file(fp("d/e/deep")).unwrap();
    assert!(!fp("only-main").exists());
    assert!(!m.p("only-fork").exists());
    assert_eq!(read(m.p("base")), "live");
    assert_eq!(read(fp("base")), "changed in fork");
    assert_eq!(read(m.p("d/e/deep")), "changed in main");
    assert!(!fp("d/e/deep").exists());

    // Concurrent writers, one per mount, into the same-named shared directory.
    let writer = |dir: PathBuf, tag: &'static str| {
        std::thread::spawn(move || {
            for i in 0..200 {
                fs::write(dir.join(format!("{tag}-{i}")), format!("{tag} {i}")).unwrap();
            }
        })
    };
    let t1 = writer(m.p("conc"), "main");
    let t2 = writer(fp("conc"), "fork");
    t1.join().unwrap();
    t2.join().unwrap();
    for (dir, tag) in [(m.p("conc"), "main"), (fp("conc"), "fork")] {
        let got = names(&dir);
        let want: BTreeSet<String> = (0..200).map(|i| format!("{tag}-{i}")).collect();
        assert_eq!(got, want, "{tag} mount has foreign or missing files");
        for i in [0, 77, 199] {
            assert_eq!(read(dir.join(format!("{tag}-{i}"))), format!("{tag} {i}"));
        }
    }
    let mut main_top = names(&m.mp);
    let mut fork_top = names(&f_mp);
    assert!(main_top.remove("only-main"));
    assert!(fork_top.remove("only-fork"));
    assert_eq!(main_top, fork_top);

    // --from a branch.
    let g_mp = m.tmp.path().join("fork-g");
    fs::create_dir(&g_mp).unwrap();
    let _gg = Guard(m.store.clone(), g_mp.clone());
    ws_ok(
        &m,
        &[
            "fork",
            "g",
            "--from",
            "feat",
            "--mount",
            g_mp.to_str().unwrap(),
        ],
    );
    assert_eq!(read(g_mp.join("base")), "c1");
    assert_eq!(read(g_mp.join("d/e/deep")), "deep");
    assert!(!g_mp.join("only-main").exists());
    assert_eq!(names(&g_mp.join("conc")), BTreeSet::new());

    // Refused forks create nothing.
    let sessions = session_names(&m.store);
    assert_eq!(sessions, vec!["f", "g", "s"]);
    let full = m.tmp.path().join("full");
    fs::create_dir(&full).unwrap();
    fs::write(full.join("x"), b"x").unwrap();
    let e = ws_err(&m, &["fork", "h", "--mount", full.to_str().unwrap()]);
    assert!(e.contains("not empty"), "{e}");
    // A missing mountpoint is created (see races.rs), but never under a file.
    let missing = full.join("x").join("sub");
    let e = ws_err(&m, &["fork", "h", "--mount", missing.to_str().unwrap()]);
    assert!(e.contains("not a directory"), "{e}");
    let empty = m.tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let _ge = Guard(m.store.clone(), empty.clone());
    let e = ws_err(&m, &["fork", "f", "--mount", empty.to_str().unwrap()]);
    assert!(e.contains("already exists"), "{e}");
    let e = ws_err(&m, &["fork", "s", "--mount", empty.to_str().unwrap()]);
    assert!(e.contains("already exists"), "{e}");
    assert!(!treefork::daemon::is_mountpoint(&empty));
    assert!(!treefork::daemon::is_mountpoint(&full));
    assert!(!missing.exists());
    assert_eq!(session_names(&m.store), sessions);
    assert_eq!(fs::read(full.join("x")).unwrap(), b"x");

    tf_ok(&m.store, &["umount", g_mp.to_str().unwrap()]);
    tf_ok(&m.store, &["umount", f_mp.to_str().unwrap()]);
}

// ---------------------------------------------------------------------------------
// 6. diff

#[test]
fn diff_between_states() {
    let m = Mount::new();
    fs::write(m.p("t.txt"), "line1\nold line\nline3\n").unwrap();
    fs::write(m.p("bin.dat"), [0u8, 1, 2, 0, 255, 254, 0, 9]).unwrap();
    fs::write(m.p("gone.txt"), "g1\ng2\ng3\n").unwrap();
    fs::write(m.p("same.txt"), "same\n").unwrap();
    let c1 = checkpoint(&m, "c1");
    fs::write(m.p("t.txt"), "line1\nnew line\nline3\nline4\n").unwrap();
    fs::write(m.p("bin.dat"), [0u8, 1, 2, 0, 7, 7, 0, 9, 0]).unwrap();
    fs::remove_file(m.p("gone.txt")).unwrap();
    fs::write(m.p("added.txt"), "a\nb\n").unwrap();
    let c2 = checkpoint(&m, "c2");

    let want = pairs(&[
        ("t.txt", "modified"),
        ("bin.dat", "modified"),
        ("gone.txt", "deleted"),
        ("added.txt", "added"),
    ]);
    assert_eq!(changes(&wsj(&m, &["diff", &c1, &c2])["entries"]), want);
    assert_eq!(
        changes(&wsj(&m, &["diff", "HEAD~1", "HEAD"])["entries"]),
        want
    );
    assert_eq!(
        changes(&wsj(&m, &["diff", &c1[..6], "HEAD", "--name-status"])["entries"]),
        want
    );
    let rev = changes(&wsj(&m, &["diff", &c2, &c1])["entries"]);
    assert_eq!(
        rev,
        pairs(&[
            ("t.txt", "modified"),
            ("bin.dat", "modified"),
            ("gone.txt", "added"),
            ("added.txt", "deleted"),
        ])
    );

    // --stat
    let v = wsj(&m, &["diff", &c1, &c2, "--stat"]);
    let entry = |path: &str| -> Value {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["path"] == path)
            .unwrap_or_else(|| panic!("{path} missing: {v}"))
            .clone()
    };
    let t = entry("t.txt");
    assert_eq!(
        (t["added"].as_u64(), t["removed"].as_u64()),
        (Some(2), Some(1)),
        "{t}"
    );
    let a = entry("added.txt");
    assert_eq!(
        (a["added"].as_u64(), a["removed"].as_u64()),
        (Some(2), Some(0)),
        "{a}"
    );
    let g = entry("gone.txt");
    assert_eq!(
        (g["added"].as_u64(), g["removed"].as_u64()),
        (Some(0), Some(3)),
        "{g}"
    );
    let b = entry("bin.dat");
    assert_eq!(b["binary"], true, "binary file not reported as binary: {b}");
    let plain = ws_ok(&m, &["diff", &c1, &c2, "--stat"]);
    let bin_line = plain
        .lines()
        .find(|l| l.contains("bin.dat"))
        .unwrap_or_else(|| panic!("{plain}"));
    assert!(bin_line.contains("binary"), "{plain}");

    // --patch
    let v = wsj(&m, &["diff", "HEAD~1", "HEAD", "--patch"]);
    let patch = v["patch"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert!(patch.contains("\n-old line\n"), "{patch}");
    assert!(patch.contains("\n+new line\n"), "{patch}");
    assert!(patch.contains("\n+line4\n"), "{patch}");
    assert!(!patch.contains("same"), "{patch}");
    let plain = ws_ok(&m, &["diff", "HEAD~1", "HEAD", "--patch"]);
    assert!(
        plain.contains("-old line") && plain.contains("+new line"),
        "{plain}"
    );

    // Default: HEAD vs WORKING.
    assert_eq!(changes(&wsj(&m, &["diff"])["entries"]), vec![]);
    fs::write(m.p("t.txt"), "working\n").unwrap();
    fs::write(m.p("w.txt"), "w\n").unwrap();
    fs::remove_file(m.p("same.txt")).unwrap();
    let want = pairs(&[
        ("t.txt", "modified"),
        ("w.txt", "added"),
        ("same.txt", "deleted"),
    ]);
    assert_eq!(changes(&wsj(&m, &["diff"])["entries"]), want);
    assert_eq!(
        changes(&wsj(&m, &["diff", "HEAD", "WORKING"])["entries"]),
        want
    );
    let v = wsj(&m, &["diff", "--stat"]);
    let t = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "t.txt")
        .unwrap()
        .clone();
    assert_eq!(
        (t["added"].as_u64(), t["removed"].as_u64()),
        (Some(1), Some(4)),
        "{t}"
    );
    // A only: B defaults to WORKING.
    let from_c1 = changes(&wsj(&m, &["diff", &c1])["entries"]);
    assert_eq!(
        from_c1,
        pairs(&[
            ("t.txt", "modified"),
            ("bin.dat", "modified"),
            ("gone.txt", "deleted"),
            ("added.txt", "added"),
            ("w.txt", "added"),
            ("same.txt", "deleted"),
        ])
    );
}

// ---------------------------------------------------------------------------------
// 7. restore

#[test]
fn restore_paths_dry_run_and_undo() {
    let m = Mount::new();
    fs::write(m.p("a.txt"), b"a1").unwrap();
    fs::write(m.p("b.txt"), b"b1").unwrap();
    fs::create_dir_all(m.p("tree/x/y")).unwrap();
    fs::write(m.p("tree/x/y/z.txt"), b"z").unwrap();
    fs::write(m.p("tree/top.txt"), b"top1").unwrap();
    fs::write(m.p("tree/x/mid.txt"), b"mid").unwrap();
    let c1 = checkpoint(&m, "c1");
    fs::write(m.p("a.txt"), b"a2").unwrap();
    fs::write(m.p("b.txt"), b"b2").unwrap();
    let b_ino = fs::metadata(m.p("b.txt")).unwrap().ino();
    let status_before = status(&m);
    let head_before = head(&m);

    // Dry runs change nothing.
    let v = in_dir_json(&m, &m.mp, &["restore", &c1, "a.txt", "--dry-run"]);
    assert_eq!(v["dry_run"], true, "{v}");
    assert_eq!(
        changes(&v["changes"]),
        pairs(&[("a.txt", "modified")]),
        "{v}"
    );
    assert_eq!(v["saved"], Value::Null, "{v}");
    let v = in_dir_json(&m, &m.mp, &["restore", &c1, "--dry-run"]);
    assert_eq!(
        changes(&v["changes"]),
        pairs(&[("a.txt", "modified"), ("b.txt", "modified")]),
        "{v}"
    );
    assert_eq!(read(m.p("a.txt")), "a2");
    assert_eq!(read(m.p("b.txt")), "b2");
    assert_eq!(status(&m), status_before);
    assert_eq!(head(&m), head_before, "dry run took a checkpoint");
    assert_eq!(branches(&m), Vec::<Value>::new());

    // Restoring one path.
    let v = in_dir_json(&m, &m.mp, &["restore", &c1, "a.txt"]);
    assert_eq!(v["dry_run"], false, "{v}");
    assert_eq!(
        changes(&v["changes"]),
        pairs(&[("a.txt", "modified")]),
        "{v}"
    );
    let saved_ref = v["saved"]["ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string();
    assert!(saved_ref.starts_with("auto/before-restore-"), "{v}");
    assert_eq!(read(m.p("a.txt")), "a1");
    assert_eq!(read(m.p("b.txt")), "b2");
    assert_eq!(fs::metadata(m.p("b.txt")).unwrap().ino(), b_ino);
    assert_eq!(read(m.p("tree/top.txt")), "top1");

    // Undo via the saved ref.
    ws_ok(&m, &["checkout", &saved_ref]);
    assert_eq!(read(m.p("a.txt")), "a2");
    assert_eq!(read(m.p("b.txt")), "b2");

    // A deleted directory comes back whole.
    fs::remove_dir_all(m.p("tree")).unwrap();
    let v = in_dir_json(&m, &m.mp, &["restore", &c1, "tree"]);
    assert!(v["saved"]["ref"].as_str().is_some(), "{v}");
    assert_eq!(read(m.p("tree/x/y/z.txt")), "z");
    assert_eq!(read(m.p("tree/top.txt")), "top1");
    assert_eq!(read(m.p("tree/x/mid.txt")), "mid");
    assert_eq!(
        names(&m.p("tree")),
        ["top.txt", "x"].map(String::from).into()
    );
    assert_eq!(read(m.p("a.txt")), "a2");

    // Paths are relative to the current directory.
    fs::write(m.p("tree/top.txt"), b"top2").unwrap();
    fs::write(m.p("tree/x/mid.txt"), b"mid2").unwrap();
    let v = in_dir_json(&m, &m.p("tree"), &["restore", &c1, "top.txt"]);
    assert_eq!(
        changes(&v["changes"]),
        pairs(&[("tree/top.txt", "modified")]),
        "{v}"
    );
    assert_eq!(read(m.p("tree/top.txt")), "top1");
    assert_eq!(read(m.p("tree/x/mid.txt")), "mid2");

    // Escaping the workspace is refused and changes nothing.
    let head_before = head(&m);
    let status_before = status(&m);
    for bad in ["../outside", "tree/../../x", "/etc/passwd"] {
        let o = in_dir(&m, &m.mp, &["restore", &c1, bad]);
        assert!(!o.status.success(), "restore {bad} succeeded");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("outside the workspace"), "{bad}: {e}");
    }
    assert_eq!(head(&m), head_before);
    assert_eq!(status(&m), status_before);
    assert_eq!(read(m.p("tree/x/mid.txt")), "mid2");
}

// ---------------------------------------------------------------------------------
// 8. the session control socket under bad input

fn send_line(s: &mut UnixStream, line: &[u8]) -> Value {
    s.write_all(line).unwrap();
    read_response(s)
}

fn read_response(s: &mut UnixStream) -> Value {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match s.read(&mut byte) {
            Ok(0) => panic!("connection closed; got {:?}", String::from_utf8_lossy(&buf)),
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => buf.push(byte[0]),
            Err(e) => panic!("read: {e}; got {:?}", String::from_utf8_lossy(&buf)),
        }
    }
    serde_json::from_slice(&buf)
        .unwrap_or_else(|e| panic!("bad response {:?}: {e}", String::from_utf8_lossy(&buf)))
}

fn error_code(v: &Value) -> String {
    assert_eq!(v["ok"], false, "{v}");
    assert!(v["error"]["message"].as_str().is_some(), "{v}");
    v["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string()
}

#[test]
fn control_socket_survives_bad_input() {
    let m = Mount::new();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(m.p("data"), &data).unwrap();
    let rec = treefork::control::find_mount(&m.mp).expect("mount registered");
    let sock = rec.socket.expect("session socket recorded");

    let mut s = UnixStream::connect(&sock).unwrap();
    let cases: [(&[u8], &str); 5] = [
        (b"{not json\n", "bad_request"),
        (b"{\"v\":2,\"op\":\"status\"}\n", "unsupported_version"),
        (b"{\"v\":1,\"op\":\"dance\"}\n", "unknown_op"),
        (b"{\"op\":\"status\"}\n", "bad_request"),
        (b"[1,2,3]\n", "bad_request"),
    ];
    for (line, code) in cases {
        let v = send_line(&mut s, line);
        assert_eq!(
            error_code(&v),
            code,
            "{:?} -> {v}",
            String::from_utf8_lossy(line)
        );
    }
    // Same connection still works after protocol errors.
    let v = send_line(&mut s, b"{\"v\":1,\"op\":\"status\"}\n");
    assert_eq!(v["ok"], true, "{v}");
    drop(s);

    // A 2 MiB line: too_large, then the connection is closed.
    let mut s = UnixStream::connect(&sock).unwrap();
    let mut big = b"{\"v\":1,\"op\":\"status\",\"pad\":\"".to_vec();
    big.resize(2 << 20, b'x');
    big.extend_from_slice(b"\"}\n");
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&big); // the daemon may stop reading; errors are fine
    });
    let v = read_response(&mut s);
    assert_eq!(error_code(&v), "too_large", "{v}");
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("connection not closed after too_large: {e}"),
    }
    assert!(
        rest.is_empty(),
        "data after too_large: {:?}",
        String::from_utf8_lossy(&rest)
    );
    writer.join().unwrap();

    // Half a request, then hang up.
    {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(b"{\"v\":1,\"op\":\"sta").unwrap();
    }
    // An idle client holding a connection open must not block others.
    let idle = UnixStream::connect(&sock).unwrap();

    // 16 parallel clients x 20 requests.
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let sock = sock.clone();
            std::thread::spawn(move || {
                let mut s = UnixStream::connect(&sock).unwrap();
                for _ in 0..20 {
                    let v = send_line(&mut s, b"{\"v\":1,\"op\":\"status\"}\n");
                    assert_eq!(v["ok"], true, "{v}");
                    assert!(v["changes"].is_array(), "{v}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("parallel client failed");
    }
    drop(idle);

    // Still serving; data intact.
    let id = checkpoint(&m, "after abuse");
    assert!(is_hex64(&id));
    assert_eq!(fs::read(m.p("data")).unwrap(), data);
    assert_eq!(status(&m), vec![]);
    fs::write(m.p("more"), b"more").unwrap();
    assert_eq!(status(&m), pairs(&[("more", "added")]));
}

// ---------------------------------------------------------------------------------
// 9. auto-checkpoints

#[test]
fn auto_checkpoint_after_ops() {
    let m = Mount::new();
    let v = wsj(&m, &["config"]);
    assert_eq!(v["config"]["auto_checkpoint_ops"], 0, "{v}");
    let v = wsj(
        &m,
        &[
            "config",
            "auto_checkpoint_ops=5",
            "auto_checkpoint_min_interval_secs=0",
        ],
    );
    assert_eq!(v["config"]["auto_checkpoint_ops"], 5, "{v}");
    assert_eq!(v["config"]["auto_checkpoint_min_interval_secs"], 0, "{v}");
    assert_eq!(wsj(&m, &["config"])["config"], v["config"]);
    let e = ws_err(&m, &["config", "no_such_key=1"]);
    assert!(!e.trim().is_empty());

    for i in 0..10 {
        fs::write(m.p(&format!("f{i}")), format!("{i}")).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let l = log(&m);
        if let Some(cp) = l.iter().find(|c| c["trigger"] == "auto") {
            assert!(is_hex64(cp["id"].as_str().unwrap()));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no auto checkpoint within 3 s; log: {l:?}\n{}",
            daemon_log(&m.store)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------
// 10. history persists

#[test]
fn history_survives_remount_and_kill() {
    let m = Mount::new();
    fs::write(m.p("f"), b"1").unwrap();
    let c1 = checkpoint(&m, "one");
    ws_ok(&m, &["branch", "b1"]);
    fs::write(m.p("f"), b"2").unwrap();
    fs::write(m.p("g"), b"g").unwrap();
    let c2 = checkpoint(&m, "two");
    ws_ok(&m, &["branch", "b2"]);
    fs::write(m.p("f"), b"3").unwrap();
    let v = wsj(&m, &["checkout", &c1]); // saves "3" on an auto branch
    assert!(v["saved"]["ref"].is_string(), "{v}");
    assert_eq!(read(m.p("f")), "1");

    let snapshot = |m: &Mount| {
        let st = wsj(m, &["status"]);
        (
            wsj(m, &["log", "--limit", "1000"]),
            wsj(m, &["branches"]),
            st["head"].clone(),
            status(m),
        )
    };
    let before = snapshot(&m);
    assert_eq!(before.2, c1.as_str(), "HEAD after checkout");
    assert_eq!(before.3, vec![]);

    m.remount();
    assert_eq!(snapshot(&m), before, "history changed across remount");
    assert_eq!(read(m.p("f")), "1");
    assert!(!m.p("g").exists());

    m.kill_daemon();
    m.mount();
    assert_eq!(snapshot(&m), before, "history changed across kill -9");
    assert_eq!(read(m.p("f")), "1");

    // The persisted refs still resolve.
    ws_ok(&m, &["checkout", "b2"]);
    assert_eq!(read(m.p("f")), "2");
    assert_eq!(read(m.p("g")), "g");
    assert_eq!(head(&m), c2);
}

// ---------------------------------------------------------------------------------
// 11. large (sharded) directories and hard links across checkout

/// Contents of every regular file directly in `dir`.
fn contents(dir: &Path) -> std::collections::BTreeMap<String, String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn large_directory_checkpoint_diff_checkout_restore() {
    let m = Mount::new();
    let big = m.p("big");
    fs::create_dir(&big).unwrap();
    for i in 0..3000 {
        fs::write(big.join(format!("f{i:05}")), format!("v1 {i}\n")).unwrap();
    }
    let c1 = checkpoint(&m, "3000 files");
    let v1 = contents(&big);
    assert_eq!(v1.len(), 3000);

    // Changes spread over the directory: modify, add, delete, rename, chmod.
    for i in [7, 1500, 2999] {
        fs::write(big.join(format!("f{i:05}")), format!("v2 {i}\n")).unwrap();
    }
    fs::write(big.join("f01234.new"), "added\n").unwrap();
    fs::remove_file(big.join("f00100")).unwrap();
    fs::rename(big.join("f02000"), big.join("zz-renamed")).unwrap();
    fs::set_permissions(
        big.join("f00500"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let want = pairs(&[
        ("big/f01234.new", "added"),
        ("big/zz-renamed", "added"),
        ("big/f00100", "deleted"),
        ("big/f02000", "deleted"),
        ("big/f00007", "modified"),
        ("big/f00500", "modified"),
        ("big/f01500", "modified"),
        ("big/f02999", "modified"),
    ]);
    assert_eq!(status(&m), want);
    let c2 = checkpoint(&m, "changes");
    let v2 = contents(&big);
    assert_eq!(changes(&wsj(&m, &["diff", &c1, &c2])["entries"]), want);

    // Checkout back and forth: exact contents each time.
    ws_ok(&m, &["checkout", &c1]);
    assert_eq!(contents(&big), v1);
    assert_eq!(status(&m), vec![]);
    ws_ok(&m, &["checkout", &c2]);
    assert_eq!(contents(&big), v2);
    assert_eq!(
        fs::metadata(big.join("f00500")).unwrap().mode() & 0o777,
        0o600
    );

    // Restore one file of the big directory; the others stay.
    in_dir_json(&m, &m.mp, &["restore", &c1, "big/f01500"]);
    assert_eq!(read(big.join("f01500")), "v1 1500\n");
    assert_eq!(read(big.join("f00007")), "v2 7\n");
    assert_eq!(status(&m), pairs(&[("big/f01500", "modified")]));

    // Everything survives a remount (the directory is re-read from its shards).
    let before = contents(&big);
    m.remount();
    assert_eq!(contents(&big), before);
    ws_ok(&m, &["checkout", &c1]);
    assert_eq!(contents(&big), v1);
}

#[test]
fn checkout_restores_hard_linked_files() {
    let m = Mount::new();
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("d/a"), "one\n").unwrap();
    fs::hard_link(m.p("d/a"), m.p("d/b")).unwrap();
    let c1 = checkpoint(&m, "linked");
    // Change the content through one name: only the link table changes, the
    // directory node does not.
    fs::write(m.p("d/b"), "two\n").unwrap();
    assert_eq!(
        status(&m),
        pairs(&[("d/a", "modified"), ("d/b", "modified")])
    );
    let c2 = checkpoint(&m, "changed");
    assert_eq!(
        changes(&wsj(&m, &["diff", &c1, &c2])["entries"]),
        pairs(&[("d/a", "modified"), ("d/b", "modified")])
    );
    ws_ok(&m, &["checkout", &c1]);
    assert_eq!(read(m.p("d/a")), "one\n");
    assert_eq!(read(m.p("d/b")), "one\n");
    ws_ok(&m, &["checkout", &c2]);
    assert_eq!(read(m.p("d/a")), "two\n");
    assert_eq!(read(m.p("d/b")), "two\n");
    assert_eq!(status(&m), vec![]);
    // A write right after a checkout is a change (status, and the next checkout saves it).
    fs::write(m.p("d/c"), "new\n").unwrap();
    assert_eq!(status(&m), pairs(&[("d/c", "added")]));
    let v = wsj(&m, &["checkout", &c1]);
    assert!(v["saved"]["ref"].is_string(), "{v}");
    assert!(!m.p("d/c").exists());
}

/// Only the mounting user (here root) and root may use a session socket: even with
/// the file permissions opened up, another uid gets `forbidden` (SO_PEERCRED) as
/// soon as it connects, and the connection is closed.
#[test]
fn control_socket_refuses_other_users() {
    for tool in ["/usr/bin/setpriv", "/usr/bin/python3"] {
        assert!(Path::new(tool).exists(), "this test needs {tool}");
    }
    let m = Mount::new();
    let rec = treefork::control::find_mount(&m.mp).expect("mount registered");
    let sock = rec.socket.expect("session socket recorded");
    // The socket is 0600 in a 0700 directory (which other tests' commands keep
    // resetting): reach it through a hard link in an open directory, with the
    // socket's mode opened, so the peer check is what refuses.
    let open_dir = tempfile::tempdir().unwrap();
    let perm = |p: &Path, mode: u32| {
        fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap()
    };
    perm(open_dir.path(), 0o755);
    let link = open_dir.path().join("s.sock");
    fs::hard_link(&sock, &link).unwrap();
    perm(&link, 0o777);
    let sock = link.to_str().unwrap().to_string();
    let script = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({sock:?}); \
         print(s.makefile().readline())"
    );
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
        ])
        .arg(&script)
        .output()
        .unwrap();
    perm(Path::new(&sock), 0o600);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("\"forbidden\""),
        "uid 65534 was not refused: {out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Root still works.
    assert_eq!(wsj(&m, &["status"])["changes"], serde_json::json!([]));
}
