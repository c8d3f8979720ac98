//! A full disk is not a dead end (issue 44): a store on a loop-mounted 300 MB ext4
//! (the power-cut rig, `crate::powercut::rig`), filled through the workspace with
//! distinct 30 MB files, each fsync'd, until one fails with ENOSPC.
//!
//! Requirement, checked at every step: every acknowledged file (its fsync returned)
//! reads back, also after a remount and after a power cut. While full, the read-only
//! commands answer; `umount` refuses, names the reason and what to do, and leaves
//! the workspace mounted; once the big files are deleted it unmounts, and `gc`
//! returns the space: the packs shrink to within a few MB of what is reachable, and
//! `fsck` is clean and agrees (no unindexed records left).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::harness::{pattern, write_synced};
use crate::powercut::rig::{LoopDev, Mounted, Rig, TfMounts, s, tf_env, tf_json};

/// Acknowledged files: path relative to the workspace -> (length, seed of `pattern`).
type Acked = BTreeMap<String, (usize, u64)>;

/// Size of each big file.
const BIG: usize = 30_000_000;

/// Bytes of `dir` and everything under it (`du -sb`).
fn du(dir: &Path) -> u64 {
    let out = Command::new("du").arg("-sb").arg(dir).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("du {}: {out:?}", dir.display()))
}

/// Every acknowledged file reads back exactly, under `mp`.
fn check(mp: &Path, acked: &Acked, when: &str) {
    for (rel, (len, seed)) in acked {
        let got = fs::read(mp.join(rel)).unwrap_or_else(|e| panic!("{when}: {rel}: {e}"));
        assert!(
            got.len() == *len && got == pattern(*len, *seed),
            "{when}: {rel} differs ({} bytes, want {len})",
            got.len()
        );
    }
}

/// Small files and a checkpoint, then big files until one fails: the acknowledged
/// files, the name of the one that failed, the packs' size before the big files.
fn fill(rig: &Rig) -> (Acked, String, u64) {
    let mp = rig.mp();
    let mut acked = Acked::new();
    for i in 0..3u64 {
        let rel = format!("keep/small-{i}");
        fs::create_dir_all(mp.join("keep")).unwrap();
        write_synced(&mp.join(&rel), &pattern(10_000, 100 + i));
        acked.insert(rel, (10_000, 100 + i));
    }
    tf_env(
        &rig.store,
        &["-C", s(&mp), "checkpoint", "-m", "small"],
        &[],
    )
    .unwrap();
    let base = du(&rig.store.join("packs"));
    let t = Instant::now();
    for i in 0..20u64 {
        let rel = format!("big-{i}");
        let data = pattern(BIG, i);
        let r = File::create(mp.join(&rel)).and_then(|mut f| {
            f.write_all(&data)?;
            f.sync_all()
        });
        match r {
            Ok(()) => {
                acked.insert(rel, (BIG, i));
            }
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{rel}: {e}");
                eprintln!(
                    "filled in {:.1} s: {} big files acknowledged, {rel} failed: {e}",
                    t.elapsed().as_secs_f64(),
                    i
                );
                assert!(i >= 5, "only {i} big files fit");
                return (acked, rel, base);
            }
        }
    }
    panic!("20 files of 30 MB fit on a 300 MB file system");
}

/// `treefork args` (run in `mp`'s workspace when given) must answer.
fn answers(store: &Path, mp: Option<&Path>, args: &[&str]) -> String {
    let mut full: Vec<&str> = Vec::new();
    if let Some(mp) = mp {
        full.extend(["-C", s(mp)]);
    }
    full.extend_from_slice(args);
    tf_env(store, &full, &[]).unwrap_or_else(|e| panic!("while full: {e}"))
}

/// While full: the read-only commands answer and `umount` refuses, saying why and
/// what to do, with the workspace left mounted and intact.
fn while_full(store: &Path, mp: &Path, acked: &Acked) {
    let st = answers(store, Some(mp), &["status"]);
    eprintln!("status while full:\n{st}");
    assert!(
        st.contains("treefork gc"),
        "status does not say the store is full: {st}"
    );
    let v = tf_json(store, &["-C", s(mp), "status"]).unwrap();
    assert!(v["store_full"].is_string(), "{v}");
    answers(store, Some(mp), &["log"]);
    let v = tf_json(store, &["-C", s(mp), "diff"]).unwrap();
    assert!(v["store_full"].is_string(), "{v}");
    answers(store, Some(mp), &["history"]);
    answers(store, None, &["sessions"]);
    answers(store, None, &["limits"]);
    answers(store, None, &["fsck"]);
    let e = tf_env(store, &["umount", s(mp)], &[]).expect_err("umount of a full store");
    eprintln!("umount while full: {e}");
    for want in [
        "No space left",
        "unmount",
        "refused",
        "nothing was lost",
        "treefork gc",
    ] {
        assert!(e.contains(want), "umount's refusal lacks {want:?}: {e}");
    }
    check(mp, acked, "after the refused umount");
}

/// Delete the big files but `big-0` (and the one that failed), unmount, `gc`
/// offline: the space comes back; remount: everything acknowledged is there.
/// `tfm` has session `s` mounted on `mp`; `base`: the packs' size before the big
/// files. Returns (packs before gc, after gc) in bytes.
fn reclaim(
    tfm: &mut TfMounts,
    mp: &Path,
    acked: &mut Acked,
    failed: &str,
    base: u64,
) -> (u64, u64) {
    let store = tfm.store.clone();
    let _ = fs::remove_file(mp.join(failed));
    let big: Vec<String> = acked
        .keys()
        .filter(|k| k.starts_with("big-"))
        .cloned()
        .collect();
    for rel in big.iter().filter(|r| *r != "big-0") {
        fs::remove_file(mp.join(rel)).unwrap();
        acked.remove(rel);
    }
    File::open(mp).unwrap().sync_all().unwrap();
    check(mp, acked, "after deleting the big files");
    tfm.close()
        .unwrap_or_else(|e| panic!("umount after deleting the big files: {e}"));
    let before = du(&store.join("packs"));
    let t = Instant::now();
    let out = tf_env(&store, &["gc"], &[]).unwrap_or_else(|e| panic!("gc: {e}"));
    eprintln!("gc in {:.1} s: {}", t.elapsed().as_secs_f64(), out.trim());
    tf_env(&store, &["gc"], &[]).unwrap_or_else(|e| panic!("second gc: {e}"));
    let after = du(&store.join("packs"));
    eprintln!("packs: {base} bytes before the big files, {before} full, {after} after gc");
    // Reachable: the small files and big-0 (incompressible); a few MB of slack.
    assert!(
        after <= base + BIG as u64 + (4 << 20),
        "gc left {after} bytes in packs/ ({before} before it; reachable about {})",
        base + BIG as u64
    );
    let f = tf_env(&store, &["fsck"], &[]).unwrap_or_else(|e| panic!("fsck: {e}"));
    eprintln!("fsck after gc: {}", f.trim());
    assert!(
        f.contains(" 0 unindexed records"),
        "fsck and gc disagree: {f}"
    );
    tfm.mount("s", mp, &[])
        .unwrap_or_else(|e| panic!("remount: {e}"));
    check(mp, acked, "after gc and a remount");
    (before, after)
}

/// On a full store the read-only commands answer, `umount` refuses as documented
/// (README "Troubleshooting"), and deleting the files then `gc` returns the space.
/// Before issue 44's fix: `status` failed with ENOSPC, and `gc` failed too.
#[test]
fn full_store_answers_refuses_umount_and_gc_returns_the_space() {
    let t = Instant::now();
    let mut rig = Rig::sized(&[], "300M");
    let mp = rig.mp();
    let (mut acked, failed, base) = fill(&rig);
    check(&mp, &acked, "when full");
    while_full(&rig.store, &mp, &acked);
    let (before, after) = reclaim(&mut rig.live, &mp, &mut acked, &failed, base);
    eprintln!(
        "full store: packs {before} -> {after} bytes; test took {:?}",
        t.elapsed()
    );
}

/// Mount session `s` of the store in a power-cut image (`e2fsck -p` first).
fn boot(img: &Path, dir: &Path) -> (LoopDev, Mounted) {
    let o = Command::new("e2fsck")
        .args(["-p", s(img)])
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "e2fsck -p: {o:?}");
    let lo = LoopDev::attach(img).unwrap();
    let fsm = Mounted::mount(&lo.0, &dir.join("fs")).unwrap();
    (lo, fsm)
}

/// A power cut while the store is full (the failed file's records appended, never
/// indexed): after the reboot everything acknowledged is there, and deleting the
/// files then `gc` returns the space. Before issue 44's fix, `gc` failed with ENOSPC.
#[test]
fn power_cut_while_full_loses_nothing_and_gc_reclaims_after() {
    let t = Instant::now();
    let rig = Rig::sized(&[], "300M");
    let (mut acked, failed, base) = fill(&rig);
    let img = rig.cut(0);
    // The live store: made unmountable for the rig's cleanup.
    for rel in acked
        .keys()
        .chain([&failed])
        .filter(|r| r.starts_with("big-"))
    {
        let _ = fs::remove_file(rig.mp().join(rel));
    }
    let dir: PathBuf = rig.work.path().join("cut");
    let (lo, fsm) = boot(&img, &dir);
    let store = fsm.0.join("store");
    let mut tfm = TfMounts::new(&store);
    let mp = dir.join("mnt");
    tfm.mount("s", &mp, &[])
        .unwrap_or_else(|e| panic!("mount after the cut: {e}"));
    check(&mp, &acked, "after the power cut");
    let (before, after) = reclaim(&mut tfm, &mp, &mut acked, &failed, base);
    drop(tfm);
    drop(fsm);
    drop(lo);
    let _ = fs::remove_file(&img);
    eprintln!(
        "power cut while full: packs {before} -> {after} bytes; test took {:?}",
        t.elapsed()
    );
}
