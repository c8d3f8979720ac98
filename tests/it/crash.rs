//! Crash consistency: a mixed workload (fsync'd writes, renames, unlinks, checkpoints,
//! forks, a concurrent gc) is cut by `kill -9` of the daemon at a random moment, in a
//! loop. After every remount the tree must be exactly the acknowledged state, except
//! the one operation in flight, which may show its old state, its new state or (for a
//! write) a torn new state — each 4 KiB page either new or zero, never other bytes.
//! Every checkpoint and fork that was reported created must exist; at the end `fsck`
//! is clean and a gc keeps everything.
//!
//! Iterations: `TREEFORK_CRASH_ITERATIONS` (default 50).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::{Mount, pattern, tf, tf_ok};

type Tree = BTreeMap<String, Vec<u8>>;

/// What an in-flight operation may have left: for each affected path, the states
/// allowed, as alternatives of the whole set (a rename is old-old or new-new).
#[derive(Clone, Default)]
struct Inflight {
    alternatives: Vec<BTreeMap<String, Option<Vec<u8>>>>,
    /// Paths whose "new" content may also be torn.
    tearable: Vec<(String, Vec<u8>)>,
}

#[derive(Default)]
struct Shared {
    acked: Tree,
    inflight: Inflight,
    checkpoints: Vec<(String, Tree)>,
    forks: Vec<(String, Tree)>,
    /// Operations acknowledged, over the whole loop.
    acked_ops: u64,
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

fn path_of(r: &mut Rng) -> String {
    format!("d{}/f{}", r.below(3), r.below(12))
}

fn torn_ok(got: &[u8], new: &[u8]) -> bool {
    got.len() <= new.len()
        && got
            .chunks(4096)
            .zip(new.chunks(4096))
            .all(|(g, n)| g == &n[..g.len()] || g.iter().all(|&b| b == 0))
}

fn fsync_dir(p: &Path) -> std::io::Result<()> {
    fs::File::open(p)?.sync_all()
}

/// One workload run until the daemon dies (or `ops` operations).
fn workload(m: &Mount, seed: u64, sh: &Mutex<Shared>, fork_dir: &Path, fork_name: &str) {
    let mut r = Rng(seed | 1);
    let mp = m.mp.to_str().unwrap().to_string();
    let mut forked = false;
    for _ in 0..400 {
        let op = r.below(100);
        let acked = sh.lock().unwrap().acked.clone();
        let res: Result<(), String> = if op < 55 {
            // Write a whole file in place (O_TRUNC) and fsync it.
            let p = path_of(&mut r);
            let len = match r.below(4) {
                0 => r.below(5000) as usize,
                _ => r.below(400_000) as usize,
            };
            let data = pattern(len, r.next());
            {
                let mut s = sh.lock().unwrap();
                s.inflight = Inflight {
                    alternatives: vec![
                        BTreeMap::from([(p.clone(), acked.get(&p).cloned())]),
                        BTreeMap::from([(p.clone(), Some(data.clone()))]),
                    ],
                    tearable: vec![(p.clone(), data.clone())],
                };
            }
            let w = (|| -> std::io::Result<()> {
                let mut f = fs::File::create(m.p(&p))?;
                f.write_all(&data)?;
                f.sync_all()
            })();
            w.map_err(|e| e.to_string()).map(|_| {
                sh.lock().unwrap().acked.insert(p, data);
            })
        } else if op < 70 {
            // Rename (maybe over an existing file), then fsync the directory.
            let keys: Vec<&String> = acked.keys().collect();
            if keys.is_empty() {
                continue;
            }
            let from = keys[r.below(keys.len() as u64) as usize].clone();
            let to = path_of(&mut r);
            if to == from {
                continue;
            }
            let data = acked[&from].clone();
            {
                let mut s = sh.lock().unwrap();
                s.inflight = Inflight {
                    alternatives: vec![
                        BTreeMap::from([
                            (from.clone(), Some(data.clone())),
                            (to.clone(), acked.get(&to).cloned()),
                        ]),
                        BTreeMap::from([(from.clone(), None), (to.clone(), Some(data.clone()))]),
                    ],
                    tearable: vec![],
                };
            }
            fs::rename(m.p(&from), m.p(&to))
                .and_then(|_| fsync_dir(&m.p(to.split('/').next().unwrap())))
                .map_err(|e| e.to_string())
                .map(|_| {
                    let mut s = sh.lock().unwrap();
                    s.acked.remove(&from);
                    s.acked.insert(to, data);
                })
        } else if op < 80 {
            let keys: Vec<&String> = acked.keys().collect();
            if keys.is_empty() {
                continue;
            }
            let p = keys[r.below(keys.len() as u64) as usize].clone();
            {
                let mut s = sh.lock().unwrap();
                s.inflight = Inflight {
                    alternatives: vec![
                        BTreeMap::from([(p.clone(), acked.get(&p).cloned())]),
                        BTreeMap::from([(p.clone(), None)]),
                    ],
                    tearable: vec![],
                };
            }
            fs::remove_file(m.p(&p))
                .and_then(|_| fsync_dir(&m.p(p.split('/').next().unwrap())))
                .map_err(|e| e.to_string())
                .map(|_| {
                    sh.lock().unwrap().acked.remove(&p);
                })
        } else if op < 84 {
            // Check out an earlier checkpoint of this session (a root swap + graft).
            let target = {
                let s = sh.lock().unwrap();
                if s.checkpoints.is_empty() {
                    continue;
                }
                let i = r.below(s.checkpoints.len() as u64) as usize;
                s.checkpoints[i].clone()
            };
            let (id, tree) = target;
            {
                let mut s = sh.lock().unwrap();
                let paths: std::collections::BTreeSet<&String> =
                    acked.keys().chain(tree.keys()).collect();
                s.inflight = Inflight {
                    alternatives: vec![
                        paths
                            .iter()
                            .map(|p| ((*p).clone(), acked.get(*p).cloned()))
                            .collect(),
                        paths
                            .iter()
                            .map(|p| ((*p).clone(), tree.get(*p).cloned()))
                            .collect(),
                    ],
                    tearable: vec![],
                };
            }
            let o = tf(&m.store, &["-C", &mp, "checkout", &id]);
            if o.status.success() {
                sh.lock().unwrap().acked = tree;
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&o.stderr).into_owned())
            }
        } else if op < 97 || forked {
            sh.lock().unwrap().inflight = Inflight::default();
            let o = tf(
                &m.store,
                &["--json", "-C", &mp, "checkpoint", "-m", "crash"],
            );
            if o.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                let id = v["checkpoint"]["id"]
                    .as_str()
                    .expect("checkpoint id")
                    .to_string();
                sh.lock().unwrap().checkpoints.push((id, acked));
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&o.stderr).into_owned())
            }
        } else {
            // Fork (once per iteration): a fresh checkpoint, a new session, mounted.
            forked = true;
            sh.lock().unwrap().inflight = Inflight::default();
            let fd = fork_dir.to_str().unwrap();
            let o = tf(&m.store, &["-C", &mp, "fork", fork_name, "--mount", fd]);
            if o.status.success() {
                sh.lock()
                    .unwrap()
                    .forks
                    .push((fork_name.to_string(), acked));
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&o.stderr).into_owned())
            }
        };
        if res.is_err() {
            return; // the daemon is gone
        }
        let mut s = sh.lock().unwrap();
        s.inflight = Inflight::default();
        s.acked_ops += 1;
    }
}

fn read_tree(root: &Path) -> Tree {
    let mut t = Tree::new();
    for d in 0..3 {
        let dir = root.join(format!("d{d}"));
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let rel = format!("d{d}/{}", e.file_name().to_string_lossy());
            t.insert(rel, fs::read(e.path()).unwrap());
        }
    }
    t
}

fn check_tree(got: &Tree, acked: &Tree, inflight: &Inflight, when: &str) {
    let affected: Vec<&String> = inflight
        .alternatives
        .first()
        .map(|a| a.keys().collect())
        .unwrap_or_default();
    // Everything outside the in-flight op: exactly as acknowledged.
    for (p, data) in acked {
        if affected.contains(&p) {
            continue;
        }
        let g = got
            .get(p)
            .unwrap_or_else(|| panic!("{when}: acknowledged file {p} is missing"));
        assert!(
            g == data,
            "{when}: {p} differs from its acknowledged content"
        );
    }
    for p in got.keys() {
        assert!(
            acked.contains_key(p) || affected.contains(&p),
            "{when}: unexpected file {p}"
        );
    }
    if inflight.alternatives.is_empty() {
        return;
    }
    let ok = inflight.alternatives.iter().any(|alt| {
        alt.iter().all(|(p, want)| {
            let g = got.get(p);
            match (g, want) {
                (None, None) => true,
                (Some(g), Some(w)) if g == w => true,
                (Some(g), _) => inflight
                    .tearable
                    .iter()
                    .any(|(tp, new)| tp == p && torn_ok(g, new)),
                _ => false,
            }
        })
    });
    assert!(
        ok,
        "{when}: the in-flight operation left a state that never existed: {:?}",
        affected
            .iter()
            .map(|p| (p, got.get(*p).map(|v| v.len())))
            .collect::<Vec<_>>()
    );
}

#[test]
fn kill_9_at_random_moments_loses_nothing_acknowledged() {
    let iterations: u64 = std::env::var("TREEFORK_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let m = Arc::new(Mount::new());
    for d in 0..3 {
        fs::create_dir_all(m.p(&format!("d{d}"))).unwrap();
    }
    fsync_dir(&m.mp).unwrap();
    let sh = Arc::new(Mutex::new(Shared::default()));
    let mut seed = 0x5eed_u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
    eprintln!("crash loop: seed {seed:#x}, {iterations} iterations");
    let t0 = Instant::now();
    let mut kills_mid_gc = 0;
    let mut checked = 0;
    for it in 0..iterations {
        let fork_dir = m.tmp.path().join(format!("fork-{it}"));
        fs::create_dir_all(&fork_dir).unwrap();
        let fork_name = format!("fork-{it}");
        // A concurrent gc loop (through the daemon while it lives).
        let stop = Arc::new(AtomicBool::new(false));
        let in_gc = Arc::new(AtomicBool::new(false));
        let gc = {
            let (m, stop, in_gc) = (m.clone(), stop.clone(), in_gc.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    in_gc.store(true, Ordering::Relaxed);
                    let o = tf(&m.store, &["gc"]);
                    in_gc.store(false, Ordering::Relaxed);
                    if !o.status.success() {
                        let e = String::from_utf8_lossy(&o.stderr);
                        // After the kill: the daemon is gone (or the CLI found the
                        // store locked by the next daemon).
                        assert!(
                            !e.contains("gc refused"),
                            "gc found damage during the workload: {e}"
                        );
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let work = {
            let (m, sh, fd, fname) = (m.clone(), sh.clone(), fork_dir.clone(), fork_name.clone());
            let s = seed;
            std::thread::spawn(move || workload(&m, s, &sh, &fd, &fname))
        };
        seed = Rng(seed).next();
        std::thread::sleep(Duration::from_millis(30 + Rng(seed).below(700)));
        if in_gc.load(Ordering::Relaxed) {
            kills_mid_gc += 1;
        }
        // Stop starting new gc runs (one in flight is cut by the kill; an offline gc
        // started after the kill would hold the store lock).
        stop.store(true, Ordering::Relaxed);
        m.kill_daemon();
        work.join().unwrap();
        gc.join().unwrap();
        treefork::daemon::detach(&fork_dir);
        m.mount();
        let when = format!("iteration {it}");
        let (acked, inflight, ckpts, forks) = {
            let s = sh.lock().unwrap();
            (
                s.acked.clone(),
                s.inflight.clone(),
                s.checkpoints.clone(),
                s.forks.clone(),
            )
        };
        let got = read_tree(&m.mp);
        check_tree(&got, &acked, &inflight, &when);
        // The tree now *is* the acknowledged state plus whichever way the in-flight
        // operation went: adopt it.
        {
            let mut s = sh.lock().unwrap();
            s.acked = got;
            s.inflight = Inflight::default();
        }
        // Every checkpoint reported since the last check exists (a checkout moves
        // HEAD, so `log` need not list them all; all are checked again at the end).
        for (id, _) in &ckpts[checked..] {
            let o = tf(&m.store, &["-C", m.mp.to_str().unwrap(), "diff", id, id]);
            assert!(
                o.status.success(),
                "{when}: checkpoint {id} lost: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        checked = ckpts.len();
        // Every reported fork exists; check this iteration's fork's content.
        let sessions: serde_json::Value =
            serde_json::from_str(&tf_ok(&m.store, &["--json", "sessions"])).unwrap();
        let names: Vec<&str> = sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["name"].as_str())
            .collect();
        for (name, _) in &forks {
            assert!(names.contains(&name.as_str()), "{when}: fork {name} lost");
        }
        if let Some((name, tree)) = forks.iter().find(|(n, _)| *n == fork_name) {
            tf_ok(
                &m.store,
                &["mount", fork_dir.to_str().unwrap(), "--session", name],
            );
            assert_eq!(&read_tree(&fork_dir), tree, "{when}: fork {name} content");
            tf_ok(&m.store, &["umount", fork_dir.to_str().unwrap()]);
        }
        // Now and then, the content of the newest checkpoint (through a fork of it).
        if it % 10 == 9
            && let Some((id, tree)) = ckpts.last()
        {
            let d = m.tmp.path().join(format!("verify-{it}"));
            fs::create_dir_all(&d).unwrap();
            let ds = d.to_str().unwrap();
            let name = format!("verify-{it}");
            tf_ok(
                &m.store,
                &[
                    "-C",
                    m.mp.to_str().unwrap(),
                    "fork",
                    &name,
                    "--from",
                    id,
                    "--mount",
                    ds,
                ],
            );
            assert_eq!(&read_tree(&d), tree, "{when}: checkpoint {id} content");
            tf_ok(&m.store, &["umount", ds]);
            tf_ok(&m.store, &["session", "rm", &name]);
        }
    }
    {
        let s = sh.lock().unwrap();
        eprintln!(
            "crash loop: {iterations} kills ({kills_mid_gc} during a gc), {} operations acknowledged, {} checkpoints, {} forks, in {:.1} s",
            s.acked_ops,
            s.checkpoints.len(),
            s.forks.len(),
            t0.elapsed().as_secs_f64()
        );
        assert!(s.checkpoints.len() >= 5 && s.acked_ops >= iterations * 3);
    }
    // The store is whole, and a gc (with the session mounted, then offline) keeps
    // everything.
    let o = tf(&m.store, &["fsck"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    tf_ok(&m.store, &["gc"]);
    let acked = sh.lock().unwrap().acked.clone();
    assert_eq!(read_tree(&m.mp), acked);
    m.umount();
    tf_ok(&m.store, &["gc"]);
    let o = tf(&m.store, &["fsck"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    {
        let _lock = treefork::lock::StoreLock::acquire(&m.store).unwrap();
        let store = treefork::store::PackStore::open(&m.store).unwrap();
        for (id, _) in &sh.lock().unwrap().checkpoints {
            let cid = treefork::id::CheckpointId::from_hex(id).unwrap();
            treefork::refs::load(&store, &cid).unwrap_or_else(|e| panic!("checkpoint {id}: {e}"));
        }
    }
    m.mount();
    assert_eq!(read_tree(&m.mp), acked);
}
