//! Checkout and restore while several processes write (issue 12, concurrency
//! tests): no write a program saw acknowledged is lost, no EIO, no torn rewrite, the
//! tree is one of the two states plus the writers' files, the daemon lives.
//!
//! A write counts as acknowledged when its `fsync` returned and the path still
//! names the inode written (`stat(path).st_ino == fstat(fd).st_ino`): a program
//! whose open file is replaced by a checkout writes to the unlinked inode, as with
//! any rename or unlink on POSIX, and such a write is not claimed to persist.
//!
//! Every acknowledged write must be in a saved `auto/` checkpoint or the live tree,
//! also one made between a switch's graft and the arrival of its per-entry kernel
//! invalidations: the epoch increment sent under the gate (`fs::KernelCache`) makes
//! the kernel look every path up again, and HEAD is committed under the gate, so
//! no flush of such a write is overwritten (`tests/it/stale.rs` widens that window
//! on purpose).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::harness::{Mount, daemon_log, write_synced, ws, ws_ok};

const WRITERS: usize = 4;

/// Wall-clock seconds (the writers' `time.time()`).
fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// One writer process: appends a numbered line to `w<k>/log` and rewrites
/// `w<k>/cur` whole, each fsync'd, until the stop file exists. Prints `A seq` for an
/// acknowledged append and `R seq ok|stale` for each rewrite. A vanished directory
/// (a checkout removed it) is recreated; any other error ends it with a traceback.
const WRITER: &str = r#"
import os, sys, time
mp, k, stop = sys.argv[1], sys.argv[2], sys.argv[3]
d = os.path.join(mp, "w" + k)
def cur(seq):
    return ("w%s rewrite %d\n" % (k, seq)) * 200
def write(name, flags, data):
    path = os.path.join(d, name)
    while True:
        try:
            os.makedirs(d, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
            break
        except (FileNotFoundError, FileExistsError):
            # The directory went away meanwhile (FileExistsError: mkdir saw it,
            # then it was gone): a checkout removed it.
            continue
    try:
        os.write(fd, data)
        os.fsync(fd)
        try:
            return os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False
    finally:
        os.close(fd)
seq = 0
while not os.path.exists(stop):
    seq += 1
    t0 = time.time()
    if write("log", os.O_APPEND, ("w%s line %d\n" % (k, seq)).encode()):
        print("A %d %f %f" % (seq, t0, time.time()), flush=True)
    t0 = time.time()
    ok = write("cur", os.O_TRUNC, cur(seq).encode())
    print("R %d %s %f %f" % (seq, "ok" if ok else "stale", t0, time.time()), flush=True)
"#;

fn rewrite_content(k: usize, seq: u64) -> Vec<u8> {
    format!("w{k} rewrite {seq}\n").repeat(200).into_bytes()
}

/// When the switch whose `--json` answer is `stdout` saved pending changes (from
/// its `auto/before-...-<sec><nsec>` ref); None when it saved nothing.
fn saved_at(stdout: &[u8]) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_slice(stdout).ok()?;
    let r = v["saved"]["ref"].as_str()?;
    let digits = r.rsplit('-').next()?;
    let (sec, nsec) = digits.split_at(digits.len().checked_sub(9)?);
    Some(sec.parse::<f64>().ok()? + nsec.parse::<f64>().ok()? / 1e9)
}

/// What a writer reported: its acknowledged appends and its last rewrite (seq,
/// acknowledged).
struct Report {
    /// (seq, wall-clock seconds before its open, after its fsync).
    appended: Vec<(u64, f64, f64)>,
    last_rewrite: Option<(u64, bool, f64, f64)>,
}

fn spawn_writer(mp: &Path, k: usize, stop: &Path) -> Child {
    Command::new("python3")
        .arg("-c")
        .arg(WRITER)
        .arg(mp)
        .arg(k.to_string())
        .arg(stop)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3")
}

fn finish_writer(k: usize, c: Child, log: &dyn Fn() -> String) -> Report {
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "writer {k} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        log()
    );
    let mut r = Report {
        appended: Vec::new(),
        last_rewrite: None,
    };
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = l.split(' ').collect();
        match f[..] {
            ["A", s, t0, t1] => {
                r.appended
                    .push((s.parse().unwrap(), t0.parse().unwrap(), t1.parse().unwrap()))
            }
            ["R", s, ok, t0, t1] => {
                r.last_rewrite = Some((
                    s.parse().unwrap(),
                    ok == "ok",
                    t0.parse().unwrap(),
                    t1.parse().unwrap(),
                ))
            }
            _ => panic!("writer {k}: unexpected line {l:?}"),
        }
    }
    r
}

/// The contents of `w<k>/log` and `w<k>/cur` in every `auto/` checkpoint of the
/// store (read offline).
fn saved_states(store: &Path) -> Vec<(String, Vec<Option<Vec<u8>>>)> {
    use treefork::diff::{Tree, read_file};
    let s = treefork::store::PackStore::open(store).unwrap();
    let mut out = Vec::new();
    for (name, _) in treefork::refs::list_refs(&s).unwrap() {
        // Stored as `SESSION:auto/...` (branch names are per session).
        if !treefork::refs::names::short(&name).starts_with("auto/") {
            continue;
        }
        let id = treefork::refs::get_ref(&s, &name)
            .unwrap()
            .unwrap()
            .checkpoint;
        let c = treefork::refs::load(&s, &id).unwrap();
        let t = Tree::load(&s, c.root).unwrap();
        let mut files = Vec::new();
        for k in 0..WRITERS {
            for f in ["log", "cur"] {
                let r = t.lookup(&s, format!("w{k}/{f}").as_bytes()).unwrap();
                files.push(r.map(|r| read_file(&s, &r, u64::MAX).unwrap()));
            }
        }
        out.push((name, files));
    }
    out
}

fn lines_of(data: &[u8], k: usize) -> BTreeSet<u64> {
    let prefix = format!("w{k} line ");
    String::from_utf8_lossy(data)
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix)?.parse().ok())
        .collect()
}

#[test]
fn checkout_during_writes_from_several_processes_loses_no_acknowledged_write() {
    let m = Mount::new();
    // Two states to switch between; neither has the writers' directories.
    write_synced(&m.p("base/a"), b"x\n");
    write_synced(&m.p("base/only-x"), b"x\n");
    write_synced(&m.p("deep/1/2/3"), b"x\n");
    ws_ok(&m, &["branch", "x"]);
    write_synced(&m.p("base/a"), b"y\n");
    fs::remove_file(m.p("base/only-x")).unwrap();
    write_synced(&m.p("base/only-y"), b"y\n");
    write_synced(&m.p("deep/1/2/3"), b"y\n");
    ws_ok(&m, &["branch", "y"]);

    let stop = m.tmp.path().join("stop");
    let writers: Vec<Child> = (0..WRITERS)
        .map(|k| spawn_writer(&m.mp, k, &stop))
        .collect();
    // Every writer has started writing.
    let t0 = std::time::Instant::now();
    while !(0..WRITERS).all(|k| m.p(&format!("w{k}/log")).exists()) {
        assert!(t0.elapsed().as_secs() < 60, "writers did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // At least 24 switches and 5 s of them (the writers are slow on a busy machine).
    let t0 = std::time::Instant::now();
    let (mut done, mut refused, mut switches) = (0, Vec::new(), Vec::new());
    let mut i = 0;
    while i < 24 || t0.elapsed().as_secs() < 5 {
        i += 1;
        let target = ["x", "y"][i % 2];
        let cmd = if i % 4 < 2 { "checkout" } else { "restore" };

        let start = now();
        let o = ws(&m, &["--json", cmd, target]);
        switches.push((saved_at(&o.stdout).unwrap_or(start), now()));
        if o.status.success() {
            done += 1;
        } else {
            refused.push(String::from_utf8_lossy(&o.stderr).into_owned());
        }
    }
    fs::write(&stop, b"").unwrap();
    let log = || daemon_log(&m.store);
    let reports: Vec<Report> = writers
        .into_iter()
        .enumerate()
        .map(|(k, c)| finish_writer(k, c, &log))
        .collect();
    // A refusal may only be the documented `conflict` (writers never paused).
    for e in &refused {
        assert!(
            e.contains("kept changing"),
            "checkout failed: {e}\n{}",
            log()
        );
    }
    assert!(
        done * 10 >= i * 9,
        "only {done} of {i} checkouts ran: {refused:?}"
    );
    for (k, r) in reports.iter().enumerate() {
        eprintln!(
            "writer {k}: {} acknowledged appends, last rewrite {:?}",
            r.appended.len(),
            r.last_rewrite
        );
        assert!(r.appended.len() >= 3, "writer {k} barely ran");
    }

    // The tree is one of the two states plus the writers' files.
    let ours = |out: &str| {
        out.lines()
            .all(|l| l.split('\t').nth(1).is_some_and(|p| p.starts_with('w')))
    };
    let dx = ws_ok(&m, &["diff", "x", "WORKING"]);
    let dy = ws_ok(&m, &["diff", "y", "WORKING"]);
    assert!(
        ours(&dx) || ours(&dy),
        "the tree is neither x nor y:\n{dx}\n{dy}"
    );

    // The live files, read through the mount; then the saved ones, offline.
    let live: Vec<Option<Vec<u8>>> = (0..WRITERS)
        .flat_map(|k| ["log", "cur"].map(|f| fs::read(m.p(&format!("w{k}/{f}"))).ok()))
        .collect();
    ws_ok(&m, &["status"]);
    m.umount();
    let mut states = saved_states(&m.store);
    assert!(!states.is_empty(), "no checkout saved anything");
    states.push(("the live tree".into(), live));

    let in_window = |t0: f64, t1: f64| switches.iter().any(|&(saved, end)| t0 < end && saved < t1);
    for (k, r) in reports.iter().enumerate() {
        let mut seen = BTreeSet::new();
        for (_, files) in &states {
            if let Some(d) = &files[2 * k] {
                seen.extend(lines_of(d, k));
            }
            // A rewrite is never torn: empty (truncated, not yet written) or whole.
            if let Some(d) = &files[2 * k + 1] {
                let seq = String::from_utf8_lossy(d)
                    .lines()
                    .next()
                    .and_then(|l| l.rsplit(' ').next()?.parse().ok());
                assert!(
                    d.is_empty() || seq.is_some_and(|s| *d == rewrite_content(k, s)),
                    "writer {k}: torn rewrite ({} bytes)",
                    d.len()
                );
            }
        }
        let lost: Vec<(u64, f64, f64)> = r
            .appended
            .iter()
            .copied()
            .filter(|(s, _, _)| !seen.contains(s))
            .collect();
        assert!(
            lost.is_empty(),
            "writer {k}: acknowledged appends lost: {lost:?} of {} (overlapping a switch: {:?})",
            r.appended.len(),
            lost.iter()
                .map(|&(_, t0, t1)| in_window(t0, t1))
                .collect::<Vec<_>>()
        );
        if let Some((seq, true, t0, t1)) = r.last_rewrite {
            let want = rewrite_content(k, seq);
            let found = states
                .iter()
                .any(|(_, files)| files[2 * k + 1].as_ref() == Some(&want));
            assert!(
                found,
                "writer {k}: the last acknowledged rewrite ({seq}) is lost (overlapping a switch: {})",
                in_window(t0, t1)
            );
        }
    }
}
