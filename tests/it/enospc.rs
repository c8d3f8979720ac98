//! Disk full: the store on a small tmpfs that a filler file outside the store fills.
//!
//! Requirement: ENOSPC from the backing filesystem reaches the writing program as
//! ENOSPC; the store stays consistent; once space is freed the same mount carries on
//! (no remount), and after a remount every fsync'd byte and every checkpoint is intact.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::harness::{Mount, daemon_log, pattern, write_synced, ws_ok};

/// A size-limited tmpfs, unmounted on drop (lazily if something still holds it).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        fs::create_dir_all(dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("run mount");
        assert!(st.success(), "cannot mount a tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // The daemon exits shortly after its last unmount and closes the store.
        for _ in 0..100 {
            if Command::new("umount")
                .arg(&self.0)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
            {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Bytes available to unprivileged writers on the filesystem holding `p`... as root
/// tmpfs has no reserve, so this is what the daemon can use.
fn avail(p: &Path) -> u64 {
    treefork::store::statvfs_bytes(p).unwrap().2
}

/// Grow `filler` until at most `leave` bytes are free (or the filesystem is full).
fn fill(filler: &Path, leave: u64) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(filler)
        .unwrap();
    let buf = vec![0x5au8; 1 << 20];
    loop {
        let a = avail(filler);
        if a <= leave {
            break;
        }
        let n = ((a - leave) as usize).min(buf.len());
        if f.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = f.sync_all();
}

/// `treefork --store S -C MP args...` with `env`, killed (and reported as a hang)
/// after 120 s.
fn ws_env(m: &Mount, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new("timeout");
    c.arg("120")
        .arg(crate::harness::bin())
        .arg("--store")
        .arg(&m.store)
        .arg("-C")
        .arg(&m.mp)
        .args(args)
        .env_remove("TREEFORK_STORE");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("run treefork");
    assert_ne!(
        o.status.code(),
        Some(124),
        "treefork {args:?} hung\n{}",
        daemon_log(&m.store)
    );
    o
}

fn ws(m: &Mount, args: &[&str]) -> Output {
    ws_env(m, &[], args)
}

fn checkpoint(m: &Mount, msg: &str) -> String {
    let out = ws_ok(m, &["--json", "checkpoint", "-m", msg]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["checkpoint"]["id"].as_str().unwrap().to_string()
}

/// Which call failed, if any, writing `data` to `path` and fsyncing it.
#[derive(Debug)]
enum Outcome {
    Ok,
    Write(std::io::Error),
    Fsync(std::io::Error),
}

fn write_fsync(path: &Path, data: &[u8]) -> Outcome {
    let mut f = match File::create(path) {
        Ok(f) => f,
        Err(e) => return Outcome::Write(e),
    };
    if let Err(e) = f.write_all(data) {
        return Outcome::Write(e);
    }
    match f.sync_all() {
        Ok(()) => Outcome::Ok,
        Err(e) => Outcome::Fsync(e),
    }
}

/// Every file of `expected` (path relative to the mount -> bytes) reads back exactly.
fn check_files(m: &Mount, expected: &BTreeMap<String, Vec<u8>>, when: &str) {
    for (rel, want) in expected {
        let got = fs::read(m.p(rel)).unwrap_or_else(|e| panic!("{when}: {rel}: {e}"));
        assert_eq!(
            blake3::hash(&got),
            blake3::hash(want),
            "{when}: {rel} differs ({} bytes, want {})",
            got.len(),
            want.len()
        );
    }
}

/// A store on a 48 MiB tmpfs with session `s` mounted (mountpoint outside the tmpfs).
/// Fields drop in order: mount, then tmpfs, then the directory holding both.
struct Setup {
    m: Mount,
    _fs: Tmpfs,
    fsdir: PathBuf,
    _base: tempfile::TempDir,
}

fn setup(env: &[(&str, &str)]) -> Setup {
    let base = tempfile::Builder::new()
        .prefix("tf-enospc-")
        .tempdir()
        .unwrap();
    let fsdir = base.path().join("fs");
    let tmpfs = Tmpfs::mount(&fsdir, "48m");
    let m = Mount::at(
        tempfile::tempdir_in(base.path()).unwrap(),
        fsdir.join("store"),
        base.path().join("mnt"),
        "s",
    );
    let o = ws_env(
        &m,
        env,
        &["mount", m.mp.to_str().unwrap(), "--session", "s"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Setup {
        m,
        _fs: tmpfs,
        fsdir,
        _base: base,
    }
}

fn is_enospc(o: &Outcome) -> bool {
    match o {
        Outcome::Write(e) | Outcome::Fsync(e) => e.raw_os_error() == Some(libc::ENOSPC),
        Outcome::Ok => false,
    }
}

/// The store runs out of space while a program writes a large file: the program
/// gets ENOSPC, nothing earlier is harmed, and after space is freed the same mount
/// accepts the rewrite and a checkpoint; a remount shows every byte.
#[test]
fn enospc_reaches_the_writer_and_the_session_recovers_without_remount() {
    let s = setup(&[]);
    let m = &s.m;
    let mut expected = BTreeMap::new();
    for (rel, data) in [
        ("src/a.txt", b"alpha\n".repeat(100)),
        ("src/b.bin", pattern(200_000, 1)),
        ("c", pattern(5000, 2)),
    ] {
        write_synced(&m.p(rel), &data);
        expected.insert(rel.to_string(), data);
    }
    let before = checkpoint(m, "before");
    let before_files = expected.clone();

    let filler = s.fsdir.join("filler");
    fill(&filler, 6 << 20);
    let free = avail(&filler);
    let big = pattern(24 << 20, 3);
    let outcome = write_fsync(&m.p("big"), &big);
    eprintln!(
        "store had {free} bytes free; writing 24 MiB gave {outcome:?}; {} bytes free now",
        avail(&filler)
    );
    assert!(is_enospc(&outcome), "expected ENOSPC, got {outcome:?}");
    // The store stopped at its reserve instead of filling the disk.
    assert!(avail(&filler) > 1 << 20, "{} bytes free", avail(&filler));

    // Nothing earlier is harmed, and the control commands answer (clearly) at once.
    check_files(m, &before_files, "while full");
    let st = ws(m, &["status"]);
    eprintln!(
        "status while full: ok={} stdout={} stderr={}",
        st.status.success(),
        String::from_utf8_lossy(&st.stdout),
        String::from_utf8_lossy(&st.stderr)
    );
    if !st.status.success() {
        let err = String::from_utf8_lossy(&st.stderr);
        assert!(err.contains("No space left"), "unclear error: {err}");
    }
    let log = ws_ok(m, &["log"]);
    assert!(log.contains("before"), "{log}");

    // Space comes back: the same mount takes the rewrite, an fsync and a checkpoint.
    fs::remove_file(&filler).unwrap();
    write_synced(&m.p("big"), &big);
    expected.insert("big".into(), big);
    write_synced(&m.p("after"), b"after the disk was full");
    expected.insert("after".into(), b"after the disk was full".to_vec());
    check_files(m, &expected, "after freeing space");
    let after = checkpoint(m, "after");

    m.remount();
    check_files(m, &expected, "after remount");
    let log = ws_ok(m, &["log"]);
    assert!(log.contains("before") && log.contains("after"), "{log}");
    ws_ok(m, &["checkout", &before]);
    check_files(m, &before_files, "checkout of the checkpoint taken before");
    assert!(!m.p("big").exists());
    ws_ok(m, &["checkout", &after]);
    check_files(m, &expected, "checkout of the checkpoint taken after");
}

/// `treefork log` lists the first checkpoint, or fails clearly with ENOSPC (sled may
/// need to write even to read while its database is poisoned).
fn log_or_enospc(m: &Mount) {
    let o = ws(m, &["log"]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    eprintln!("log while full: ok={} {err}", o.status.success());
    if o.status.success() {
        assert!(out.contains("before"), "{out}");
    } else {
        assert!(
            err.contains("No space left on device"),
            "unclear error: {err}"
        );
    }
}

/// The filesystem is completely full when a checkpoint commits, so the metadata
/// database's own write fails (the reserve that normally prevents this is disabled).
/// sled 0.34 then refuses every later write until reopened; the daemon reopens it on
/// the next commit, so once space is freed the same mount carries on.
#[test]
fn enospc_in_the_metadata_commit_recovers_without_remount() {
    let s = setup(&[(treefork::store::space::RESERVE_ENV, "0")]);
    let m = &s.m;
    let mut expected = BTreeMap::new();
    for i in 0..5 {
        let rel = format!("f{i}");
        let data = pattern(100_000, 10 + i);
        write_synced(&m.p(&rel), &data);
        expected.insert(rel, data);
    }
    checkpoint(m, "before");
    let filler = s.fsdir.join("filler");
    fill(&filler, 0);
    // Checkpoints of an unchanged tree write no pack bytes, only the metadata batch:
    // repeat until sled's log needs a page the filesystem no longer has.
    let mut failure = None;
    for i in 0..500 {
        let o = ws(m, &["checkpoint", "-m", &format!("c{i}")]);
        if !o.status.success() {
            failure = Some((i, String::from_utf8_lossy(&o.stderr).into_owned()));
            break;
        }
    }
    let (n, err) = failure.expect("a checkpoint on a full disk failed");
    eprintln!("checkpoint {n} on the full disk failed: {err}");
    assert!(
        err.contains("No space left on device"),
        "unclear error: {err}"
    );
    // Still full: reads work, a write is refused with ENOSPC, and so is another
    // checkpoint (which reopens the database first) - without harming anything.
    check_files(m, &expected, "while full");
    log_or_enospc(m);
    let o = ws(m, &["checkpoint", "-m", "still full"]);
    eprintln!(
        "second checkpoint while full: ok={} {}",
        o.status.success(),
        String::from_utf8_lossy(&o.stderr)
    );
    let o = write_fsync(&m.p("while-full"), &pattern(300_000, 99));
    eprintln!("write while full: {o:?}");
    assert!(is_enospc(&o), "{o:?}");
    check_files(m, &expected, "after a checkpoint on the full disk");
    log_or_enospc(m);

    fs::remove_file(&filler).unwrap();
    write_synced(&m.p("after"), b"after");
    expected.insert("after".into(), b"after".to_vec());
    write_synced(&m.p("while-full"), &pattern(300_000, 99));
    expected.insert("while-full".into(), pattern(300_000, 99));
    checkpoint(m, "after");
    check_files(m, &expected, "after freeing space");
    assert!(
        daemon_log(&m.store).contains("reopened after a write error"),
        "{}",
        daemon_log(&m.store)
    );

    m.remount();
    check_files(m, &expected, "after remount");
    let log = ws_ok(m, &["log", "--limit", "1000"]);
    assert!(log.contains("before") && log.contains("after"), "{log}");
}
