//! The damage done to a store copy, and the checks of what a damaged open and a
//! repair must do: refused with exit status 7 and ONE stderr line
//! `treefork: error: …fsck --repair…` (no panic text), or opened with identical
//! facts; `fsck --repair` rebuilding, moving the damaged directories aside.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::harness::{daemon_log, pattern, tf, umount_ok, wait_daemon_gone, write_synced};

/// Flip (invert) 16 bytes at 50 pseudo-random offsets (from `seed`) in the last
/// two thirds of `file`.
pub fn flip(file: &Path, seed: u64) {
    let mut b = std::fs::read(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
    assert!(b.len() > 64, "{} is only {} bytes", file.display(), b.len());
    let from = b.len() / 3;
    let span = (b.len() - from - 16) as u64;
    let r = pattern(50 * 8, seed);
    for c in r.chunks(8) {
        let at = from + (u64::from_le_bytes(c.try_into().unwrap()) % span) as usize;
        for x in &mut b[at..at + 16] {
            *x = !*x;
        }
    }
    std::fs::write(file, b).unwrap();
}

/// Cut `file` to half of its data: half the offset just past its last non-zero
/// byte. (sled's `meta/db` is a preallocated 512 KiB segment at the fixture's
/// size, its second half still zeros: cutting the file in half cuts nothing sled
/// wrote.)
pub fn truncate_half(file: &Path) {
    let b = std::fs::read(file).unwrap();
    let used = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1) as u64;
    assert!(
        used > 4096,
        "{} holds only {used} bytes of data",
        file.display()
    );
    let len = used;
    std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Damage the journal record(s) holding the bytes `probe` (the big exec output):
/// 16 bytes inverted where `probe` occurs in each journal file. Returns the
/// files damaged; panics when the probe is nowhere (the record is not stored as
/// plain bytes: this helper must then learn the journal's format).
pub fn damage_journal_record(store: &Path, probe: &[u8]) -> Vec<PathBuf> {
    let mut hit = Vec::new();
    let files = files_under(&store.join("journal"));
    for f in &files {
        let mut b = std::fs::read(f).unwrap();
        let mut at = 0;
        let mut n = 0;
        while let Some(i) = b[at..].windows(probe.len()).position(|w| w == probe) {
            let i = at + i;
            for x in &mut b[i..i + 16] {
                *x = !*x;
            }
            at = i + probe.len();
            n += 1;
        }
        if n > 0 {
            std::fs::write(f, &b).unwrap();
            hit.push(f.clone());
        }
    }
    let sizes: Vec<String> = files
        .iter()
        .map(|f| {
            format!(
                "{} ({} B)",
                f.display(),
                std::fs::metadata(f).unwrap().len()
            )
        })
        .collect();
    assert!(
        !hit.is_empty(),
        "the big output is in no journal file as plain bytes; journal: {sizes:?}"
    );
    hit
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Assert `o` (the run of `what`) is the refusal of a damaged store.
pub fn assert_refused(o: &Output, what: &str, store: &Path) {
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    let ctx = || {
        format!(
            "{what}: exit {:?}\nstdout: {out}\nstderr: {err}\n{}",
            o.status.code(),
            daemon_log(store)
        )
    };
    assert_eq!(
        o.status.code(),
        Some(7),
        "not refused with status 7: {}",
        ctx()
    );
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "not ONE stderr line: {}", ctx());
    assert!(lines[0].starts_with("treefork: error: "), "{}", ctx());
    assert!(
        lines[0].contains("fsck --repair"),
        "no `fsck --repair` named: {}",
        ctx()
    );
    for bad in ["panicked", "RUST_BACKTRACE"] {
        assert!(
            !out.contains(bad) && !err.contains(bad),
            "panic text: {}",
            ctx()
        );
    }
}

/// How a damaged store opened.
#[derive(Debug, PartialEq)]
pub enum Opened {
    /// Refused (checked: `sessions`, `fsck`, `gc` and `mount` all refused).
    Refused,
    /// Opened (the caller compares the facts).
    Fine,
}

/// Open the damaged store (`sessions`); when refused, check that `fsck`, `gc`
/// and `mount` (on `mp`) are refused alike. Anything but exit 0 or a proper
/// refusal fails.
pub fn open_damaged(store: &Path, mp: &Path, session: &str) -> Opened {
    let o = tf(store, &["--json", "sessions"]);
    if o.status.success() {
        let err = text(&o.stderr);
        assert!(
            !err.contains("panicked"),
            "sessions opened with a panic: {err}"
        );
        return Opened::Fine;
    }
    assert_refused(&o, "sessions", store);
    assert_refused(&tf(store, &["fsck"]), "fsck", store);
    assert_refused(&tf(store, &["--json", "fsck"]), "fsck --json", store);
    assert_refused(&tf(store, &["gc"]), "gc", store);
    std::fs::create_dir_all(mp).unwrap();
    let m = tf(
        store,
        &["mount", mp.to_str().unwrap(), "--session", session],
    );
    assert_refused(&m, "mount", store);
    assert!(
        crate::harness::fuse_mounts_under(mp).is_empty(),
        "mount was refused, yet {} is mounted",
        mp.display()
    );
    wait_daemon_gone(store);
    Opened::Refused
}

/// `fsck --repair --json` of an offline store: exit status (0, or 7 when
/// `lost_ok` and records were lost) and its `fsck.rebuilt`, checked for shape.
pub fn repair(store: &Path, lost_ok: bool) -> Value {
    let o = tf(store, &["--json", "fsck", "--repair"]);
    let ctx = || {
        format!(
            "fsck --repair: exit {:?}\nstdout: {}\nstderr: {}",
            o.status.code(),
            text(&o.stdout),
            text(&o.stderr)
        )
    };
    let code = o.status.code();
    assert!(
        code == Some(0) || (lost_ok && code == Some(7)),
        "repair failed: {}",
        ctx()
    );
    assert!(!text(&o.stderr).contains("panicked"), "{}", ctx());
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("repair answer is not JSON ({e}): {}", ctx()));
    let r = v["fsck"]["rebuilt"].clone();
    eprintln!("fsck --repair of {}: rebuilt {r}", store.display());
    assert!(r.is_object(), "nothing rebuilt: {}", ctx());
    for k in ["reason", "source"] {
        assert!(r[k].is_string(), "rebuilt.{k}: {}", ctx());
    }
    assert!(r["generation"].is_u64(), "rebuilt.generation: {}", ctx());
    assert!(
        r["moved_aside"].is_array(),
        "rebuilt.moved_aside: {}",
        ctx()
    );
    assert!(r["recovered"].is_object(), "rebuilt.recovered: {}", ctx());
    assert!(r["lost"].is_array(), "rebuilt.lost: {}", ctx());
    if code == Some(7) {
        assert!(
            !r["lost"].as_array().unwrap().is_empty(),
            "exit 7, nothing lost: {}",
            ctx()
        );
    }
    r
}

/// The store's entries whose names start with `prefix`.
pub fn entries_starting(store: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(store)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Every path `rebuilt.moved_aside` names exists (relative paths are taken in
/// the store); `meta.damaged-<secs>` exists when `had_meta`,
/// `journal.damaged-<secs>` when `had_journal`.
pub fn assert_moved_aside(store: &Path, rebuilt: &Value, had_meta: bool, had_journal: bool) {
    for p in rebuilt["moved_aside"].as_array().unwrap() {
        let p = Path::new(p.as_str().unwrap());
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            store.join(p)
        };
        assert!(
            p.exists(),
            "moved aside {} does not exist ({rebuilt})",
            p.display()
        );
    }
    for (had, prefix) in [
        (had_meta, "meta.damaged-"),
        (had_journal, "journal.damaged-"),
    ] {
        if !had {
            continue;
        }
        let found = entries_starting(store, prefix);
        assert!(
            found
                .iter()
                .any(|n| n[prefix.len()..].parse::<u64>().is_ok()),
            "no {prefix}<unix seconds> in {}: {:?} ({rebuilt})",
            store.display(),
            entries_starting(store, "")
        );
    }
    assert!(store.join("meta").is_dir(), "no new meta/ after the repair");
}

/// `fsck` exits 0 and reports no problem.
pub fn assert_fsck_clean(store: &Path) {
    let o = tf(store, &["--json", "fsck"]);
    assert!(
        o.status.success(),
        "fsck after the repair: exit {:?}\n{}\n{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["fsck"]["problems"], serde_json::json!([]), "{v}");
}

/// Mount `session` on `mp`, write and fsync a new file, unmount, mount again and
/// read it back.
pub fn assert_takes_write(store: &Path, mp: &Path, session: &str) {
    std::fs::create_dir_all(mp).unwrap();
    let m = ["mount", mp.to_str().unwrap(), "--session", session];
    crate::harness::tf_ok(store, &m);
    let body = b"written after the repair\n";
    write_synced(&mp.join("after-repair.txt"), body);
    umount_ok(store, mp);
    crate::harness::tf_ok(store, &m);
    assert_eq!(std::fs::read(mp.join("after-repair.txt")).unwrap(), body);
    umount_ok(store, mp);
    wait_daemon_gone(store);
}
