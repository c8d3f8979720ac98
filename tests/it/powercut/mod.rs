//! Power-cut test: what treefork acknowledged survives a cut of the power, not only a
//! `kill -9` (which keeps the page cache, so it cannot tell whether anything was
//! synced).
//!
//! Setup (all of it private to the test; the machine's root file system is never
//! frozen): an "outer" ext4 on a loop device whose backing file is in /dev/shm holds
//! the backing file of an "inner" ext4 on a second loop device; the store lives on the
//! inner one, a session of it is mounted. A cut: a writer (fsync'd writes, unlinks
//! with a directory fsync, checkpoints, branches, a fork, a gc) runs for a random
//! 0.3-1.8 s and stops (so no acknowledgement is recorded after the cut); then the
//! outer file system is frozen (`fsfreeze -f`: the inner loop device's writes block),
//! the inner image is copied, and it is thawed. The copy holds exactly what the inner
//! ext4 had sent to its device; what was only in its page cache or in a journal
//! transaction not yet committed is gone, as after a power cut. (The device is modelled
//! without a volatile write cache: what reached it stays.)
//!
//! Each copy is then checked as a machine booting after the cut would be: `e2fsck -p`,
//! mount it, mount the session with treefork: every file has the bytes of its last
//! fsync, every checkpoint, branch and fork whose command returned exists (the newest
//! checkpoint and the cycle's fork compared byte for byte), `treefork fsck` is clean.
//!
//! `TREEFORK_POWERCUT_CYCLES` sets the cycles per test (default 8). The test fails —
//! never skips — when it cannot set up (not root, no loop devices, tools missing:
//! `scripts/install-test-tools.sh` installs e2fsprogs and util-linux).
//!
//! That it bites: [`powercut_catches_loss_without_sync`] runs the same cycles with the
//! daemon's syncs off (`TREEFORK_UNSAFE_NO_SYNC=all`, test only) and requires a loss
//! to be caught; the ignored [`powercut_meta_syncs_off_report`] counts how often the
//! cut loses data when only the metadata database's own syncs are off (sled's flush
//! alone, as before issue 12).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{pattern, write_synced};

pub(crate) mod rig;
use rig::{LoopDev, Mounted, Rig, TfMounts, s, tf_env, tf_json};

type Tree = BTreeMap<String, Vec<u8>>;

// ---------------------------------------------------------------------------------
// The writer and its model of what was acknowledged.

#[derive(Default, Clone)]
struct Model {
    /// Files as of their last fsync.
    files: Tree,
    /// Checkpoints whose command returned, with the files they hold.
    ckpts: Vec<(String, Tree)>,
    branches: Vec<String>,
    /// Forks whose command returned, with the files they hold.
    forks: Vec<(String, Tree)>,
    ops: u64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One busy stretch of acknowledged operations for `dur`. Every operation is recorded
/// in the model only after it was acknowledged (fsync or command returned); the
/// stretch ends between two operations, so nothing is in flight at the cut.
fn write_for(rig: &Rig, fork_mp: &Path, cycle: u32, dur: Duration, r: &mut Rng, m: &mut Model) {
    let t = Instant::now();
    while t.elapsed() < dur {
        write_op(&rig.mp(), &rig.store, fork_mp, cycle, r, m);
    }
}

/// Unacknowledged background writes under `u/` (never fsync'd, never checked), so the
/// cut lands while the daemon is busy with more than the acknowledged writer; files
/// of `big` bytes each when `big` is not 0.
fn background_writer(
    mp: PathBuf,
    stop: Arc<AtomicBool>,
    big: usize,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let dir = mp.join("u");
        let _ = fs::create_dir_all(&dir);
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // Big files repeat 16 contents: sealed, they deduplicate, so the
            // store's disk does not fill up; unsealed, each is charged again.
            let data = if big > 0 {
                pattern(big, i % 16)
            } else {
                pattern(4096 + (i as usize % 7) * 5000, i)
            };
            let _ = fs::write(dir.join(format!("f{}", i % 8)), &data);
            i += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

fn write_op(mp: &Path, store: &Path, fork_mp: &Path, cycle: u32, r: &mut Rng, m: &mut Model) {
    let mps = s(mp);
    let op = r.below(100);
    if op < 78 {
        let path = format!("d{}/f{}", r.below(4), r.below(16));
        // Mostly small; now and then past one 64 KiB block.
        let len = if r.below(8) == 0 {
            r.below(300_000)
        } else {
            r.below(20_000)
        } as usize;
        let data = pattern(len, r.next());
        write_synced(&mp.join(&path), &data);
        m.files.insert(path, data);
    } else if op < 86 {
        let Some(path) = m
            .files
            .keys()
            .nth(r.below(m.files.len().max(1) as u64) as usize)
            .cloned()
        else {
            return;
        };
        let p = mp.join(&path);
        fs::remove_file(&p).unwrap();
        fs::File::open(p.parent().unwrap())
            .unwrap()
            .sync_all()
            .unwrap();
        m.files.remove(&path);
    } else if op < 94 {
        let v = tf_json(store, &["-C", mps, "checkpoint", "-m", "powercut"])
            .unwrap_or_else(|e| panic!("{e}"));
        let id = v["checkpoint"]["id"].as_str().expect("checkpoint id");
        m.ckpts.push((id.to_string(), m.files.clone()));
    } else if op < 97 {
        let name = format!("b-{cycle}-{}", m.branches.len());
        tf_env(store, &["-C", mps, "branch", &name], &[]).unwrap_or_else(|e| panic!("{e}"));
        m.branches.push(name);
    } else if op < 99 {
        let name = format!("f-{cycle}");
        if m.forks.iter().any(|(n, _)| *n == name) {
            return;
        }
        fs::create_dir_all(fork_mp).unwrap();
        tf_env(
            store,
            &["-C", mps, "fork", &name, "--mount", s(fork_mp)],
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        m.forks.push((name, m.files.clone()));
    } else {
        tf_env(store, &["gc"], &[]).unwrap_or_else(|e| panic!("{e}"));
    }
    m.ops += 1;
}

/// Regular files under `root`, by relative path.
fn read_tree(root: &Path) -> Result<Tree, String> {
    let mut out = Tree::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let e = e.map_err(|e| e.to_string())?;
            let p = e.path();
            let t = e.file_type().map_err(|e| e.to_string())?;
            if t.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                let data = fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                out.insert(rel, data);
            }
        }
    }
    Ok(out)
}

/// First difference between the tree found and the acknowledged one.
fn compare(what: &str, got: &Tree, want: &Tree) -> Result<(), String> {
    for (p, data) in want {
        match got.get(p) {
            None => return Err(format!("{what}: fsync'd file {p} lost")),
            Some(g) if g != data => {
                return Err(format!(
                    "{what}: {p} has {} bytes, not its acknowledged {} bytes{}",
                    g.len(),
                    data.len(),
                    if g.len() == data.len() {
                        " (content differs)"
                    } else {
                        ""
                    }
                ));
            }
            _ => {}
        }
    }
    if let Some(p) = got
        .keys()
        .find(|p| !p.starts_with("u/") && !want.contains_key(*p))
    {
        return Err(format!(
            "{what}: {p} present, but its unlink was acknowledged"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Checking a copy: as a machine booting after the cut.

/// Check the image `img` of the cut of `cycle` against the model; the first problem
/// found (data lost, store unopenable, fsck not clean) is the error.
fn check_cut(rig: &Rig, img: &Path, cycle: u32, m: &Model) -> Result<(), String> {
    // e2fsck -p replays the journal; exit 1 means "errors corrected", 2+ is trouble.
    let o = Command::new("e2fsck")
        .args(["-p", s(img)])
        .output()
        .map_err(|e| e.to_string())?;
    if o.status.code().is_none_or(|c| c > 1) {
        return Err(format!(
            "e2fsck -p of the cut: {}\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let dir = rig.work.path().join(format!("cut-{cycle}"));
    let lo = LoopDev::attach(img)?;
    let fsm = Mounted::mount(&lo.0, &dir.join("fs"))?;
    let store = fsm.0.join("store");
    let mut tfm = TfMounts::new(&store);
    let r = check_store(&mut tfm, &dir, cycle, m);
    let closed = tfm.close();
    r?;
    closed?;
    // Offline: the store opens and every reachable object verifies.
    tf_env(&store, &["fsck"], &[]).map_err(|e| format!("fsck of the cut store: {e}"))?;
    drop(fsm);
    drop(lo);
    Ok(())
}

fn check_store(tfm: &mut TfMounts, dir: &Path, cycle: u32, m: &Model) -> Result<(), String> {
    let store = tfm.store.clone();
    let mp = dir.join("mnt");
    tfm.mount("s", &mp, &[])
        .map_err(|e| format!("mounting the session of the cut store: {e}"))?;
    let mps = s(&mp);
    compare("session s", &read_tree(&mp)?, &m.files)?;
    for (id, _) in &m.ckpts {
        tf_env(&store, &["-C", mps, "diff", id, id], &[])
            .map_err(|e| format!("checkpoint {id} lost: {e}"))?;
    }
    let v = tf_json(&store, &["-C", mps, "branches"])?;
    let names: Vec<&str> = v["branches"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["name"].as_str())
        .collect();
    if let Some(b) = m.branches.iter().find(|b| !names.contains(&b.as_str())) {
        return Err(format!("branch {b} lost (have {names:?})"));
    }
    let v = tf_json(&store, &["sessions"])?;
    let sessions: Vec<&str> = v["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .collect();
    if let Some((f, _)) = m
        .forks
        .iter()
        .find(|(f, _)| !sessions.contains(&f.as_str()))
    {
        return Err(format!("fork {f} lost (have {sessions:?})"));
    }
    // Byte for byte: this cycle's fork, and the newest checkpoint (through a fork).
    if let Some((name, tree)) = m.forks.iter().find(|(n, _)| *n == format!("f-{cycle}")) {
        let fmp = dir.join("fork");
        tfm.mount(name, &fmp, &[])
            .map_err(|e| format!("mounting fork {name}: {e}"))?;
        compare(&format!("fork {name}"), &read_tree(&fmp)?, tree)?;
    }
    if let Some((id, tree)) = m.ckpts.last() {
        let vmp = dir.join("verify");
        fs::create_dir_all(&vmp).map_err(|e| e.to_string())?;
        tf_env(
            &store,
            &[
                "-C",
                mps,
                "fork",
                "verify",
                "--from",
                id,
                "--mount",
                s(&vmp),
            ],
            &[],
        )
        .map_err(|e| format!("fork of checkpoint {id}: {e}"))?;
        tfm.mps.push(vmp.clone());
        compare(&format!("checkpoint {id}"), &read_tree(&vmp)?, tree)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// The cycles.

fn cycles(default: u32) -> u32 {
    std::env::var("TREEFORK_POWERCUT_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Run `n` cut cycles with the live daemon's environment `env`; returns, per cycle,
/// the problem its cut showed (if any). With `stop_at_loss`, stops at the first.
fn run_cycles(env: &[(&str, &str)], n: u32, seed: u64, stop_at_loss: bool) -> Vec<Option<String>> {
    run_cycles_with(env, n, seed, stop_at_loss, 0)
}

/// [`run_cycles`], the background writer's files `big` bytes each (0: small ones).
fn run_cycles_with(
    env: &[(&str, &str)],
    n: u32,
    seed: u64,
    stop_at_loss: bool,
    big: usize,
) -> Vec<Option<String>> {
    let mut rig = Rig::new(env);
    let stop = Arc::new(AtomicBool::new(false));
    let bg = background_writer(rig.mp(), stop.clone(), big);
    let mut r = Rng(seed | 1);
    let mut m = Model::default();
    let mut out = Vec::new();
    let t0 = Instant::now();
    for cycle in 0..n {
        let fork_mp = rig.work.path().join(format!("fork-{cycle}"));
        let dur = Duration::from_millis(300 + r.below(1500));
        write_for(&rig, &fork_mp, cycle, dur, &mut r, &mut m);
        if m.forks.iter().any(|(f, _)| *f == format!("f-{cycle}")) {
            rig.live.mps.push(fork_mp.clone());
        }
        // The writer has stopped: every acknowledgement is in the model. Cut now.
        let img = rig.cut(cycle);
        let res = check_cut(&rig, &img, cycle, &m);
        let _ = fs::remove_file(&img);
        eprintln!(
            "cycle {cycle}: {} ops acknowledged so far, {} files, {} checkpoints, {} branches, {} forks: {}",
            m.ops,
            m.files.len(),
            m.ckpts.len(),
            m.branches.len(),
            m.forks.len(),
            match &res {
                Ok(()) => "everything acknowledged is there".to_string(),
                Err(e) => format!("LOSS: {e}"),
            }
        );
        let lost = res.is_err();
        out.push(res.err());
        if lost && stop_at_loss {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    bg.join().unwrap();
    if big > 0 {
        // The cuts landed amid seals made for the budget.
        let l = tf_json(&rig.store, &["limits"]).unwrap_or_else(|e| panic!("{e}"));
        let m = &l["memory"];
        let seals = m["sealer_seals"].as_u64().unwrap() + m["forced_seals"].as_u64().unwrap();
        assert!(seals > 0, "the budget was never spent: {l}");
    }
    eprintln!(
        "{} cycles in {:.1} s",
        out.len(),
        t0.elapsed().as_secs_f64()
    );
    out
}

/// Everything fsync'd or checkpointed survives every cut.
#[test]
fn powercut_keeps_everything_acknowledged() {
    must_lose_nothing(run_cycles(&[], cycles(8), 0x5eed_0001, false));
}

/// Issue 45: the same while the daemon-wide budget of unsealed data is spent all
/// the time (16 MiB, and the background writer writes 2 MiB files unsynced), so
/// cuts land amid the sealer's seals and writes that seal first.
#[test]
fn powercut_under_a_spent_memory_budget_keeps_everything_acknowledged() {
    let env = [("TREEFORK_UNSEALED_MB", "16")];
    must_lose_nothing(run_cycles_with(
        &env,
        cycles(8).div_ceil(2),
        0x5eed_0003,
        false,
        2 << 20,
    ));
}

fn must_lose_nothing(res: Vec<Option<String>>) {
    let lost: Vec<String> = res
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().map(|e| format!("cycle {i}: {e}")))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged data lost:\n{}",
        lost.join("\n")
    );
}

/// The test bites: with every treefork sync off, a cut loses acknowledged data.
#[test]
fn powercut_catches_loss_without_sync() {
    let env = [(treefork::durable::UNSAFE_NO_SYNC_ENV, "all")];
    let res = run_cycles(&env, cycles(6), 0x5eed_0002, true);
    assert!(
        res.iter().any(Option::is_some),
        "{} cuts with syncing off lost nothing: the power-cut test does not bite",
        res.len()
    );
}

/// Measurement, not a pass/fail test: how often a cut loses acknowledged data when
/// only the metadata database's own syncs are off (sled's flush alone). Run with
/// `cargo test --test it powercut_meta_syncs_off_report -- --ignored --nocapture`.
#[test]
#[ignore]
fn powercut_meta_syncs_off_report() {
    let env = [(treefork::durable::UNSAFE_NO_SYNC_ENV, "meta")];
    let res = run_cycles(&env, cycles(10), 0x5eed_0003, false);
    let lost = res.iter().filter(|r| r.is_some()).count();
    eprintln!(
        "meta syncs off: {lost} of {} cuts lost acknowledged data",
        res.len()
    );
}
