//! Store maintenance on real mounts: gc (with concurrent writers), session rm,
//! fsck (clean, corrupt chunk, lost index, dangling refs) and repair.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use treefork::store::Packs as _;

use crate::harness::{Mount, pattern, tf, tf_ok, write_synced};

fn json(store: &Path, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&tf_ok(store, &a)).unwrap()
}

fn gc(store: &Path) -> Value {
    json(store, &["gc"])["gc"].clone()
}

fn fsck_clean(store: &Path) {
    let o = tf(store, &["fsck"]);
    assert!(
        o.status.success(),
        "fsck found problems:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn gc_reclaims_only_what_session_rm_and_branch_delete_release() {
    let m = Mount::new();
    let keep = pattern(2 << 20, 1);
    fs::write(m.p("keep"), &keep).unwrap();
    let mp = m.mp.to_str().unwrap();
    tf_ok(&m.store, &["-C", mp, "checkpoint", "-m", "base"]);
    // A fork with data of its own, checkpointed, and a branch on it.
    let fmp = m.tmp.path().join("fork");
    fs::create_dir_all(&fmp).unwrap();
    let fmp = fmp.to_str().unwrap();
    tf_ok(&m.store, &["-C", mp, "fork", "f", "--mount", fmp]);
    let own = pattern(3 << 20, 2);
    fs::write(Path::new(fmp).join("own"), &own).unwrap();
    tf_ok(&m.store, &["-C", fmp, "checkpoint", "-m", "fork work"]);
    tf_ok(&m.store, &["-C", fmp, "branch", "keepme"]);
    tf_ok(&m.store, &["umount", fmp]);

    // Nothing is garbage yet beyond superseded nodes.
    let g = json(&m.store, &["gc", "--dry-run"])["gc"].clone();
    assert!(g["bytes_reclaimed"].as_u64().unwrap() < 100_000, "{g}");

    // A mounted session cannot be removed; an unknown one is an error.
    let o = tf(&m.store, &["session", "rm", "s"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("is mounted"));
    let o = tf(&m.store, &["session", "rm", "nope"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no session named nope"));

    // Removing the fork: its checkpoint is still named by the branch.
    tf_ok(&m.store, &["session", "rm", "f"]);
    let g = gc(&m.store);
    assert!(g["bytes_reclaimed"].as_u64().unwrap() < 100_000, "{g}");
    assert_eq!(g["checkpoints_reclaimed"], 0, "{g}");
    fsck_clean(&m.store);
    // The branch still shows the fork's data.
    let f2 = m.tmp.path().join("fork2");
    fs::create_dir_all(&f2).unwrap();
    let f2 = f2.to_str().unwrap();
    tf_ok(
        &m.store,
        // The removed fork's branch, addressed as SESSION/BRANCH from session s
        // (branch names are per session).
        &["-C", mp, "fork", "f2", "--from", "f/keepme", "--mount", f2],
    );
    assert_eq!(fs::read(Path::new(f2).join("own")).unwrap(), own);
    tf_ok(&m.store, &["umount", f2]);
    tf_ok(&m.store, &["session", "rm", "f2"]);

    // Deleting the branch: the session's operation log still names the fork's
    // checkpoint (the delete can be undone), so gc keeps it...
    tf_ok(&m.store, &["-C", mp, "branch", "-d", "f/keepme"]);
    let g = gc(&m.store);
    assert_eq!(g["checkpoints_reclaimed"], 0, "{g}");
    // ... until the records naming it expire (retention 0 days / 0 records): then
    // the store shrinks.
    tf_ok(
        &m.store,
        &[
            "-C",
            mp,
            "config",
            "op_retention_days=0",
            "op_retention_count=0",
        ],
    );
    let g = gc(&m.store);
    assert!(g["bytes_reclaimed"].as_u64().unwrap() >= 3 << 20, "{g}");
    assert!(g["checkpoints_reclaimed"].as_u64().unwrap() >= 1, "{g}");
    assert!(
        g["disk_after"].as_u64().unwrap() + (3 << 20) <= g["disk_before"].as_u64().unwrap(),
        "{g}"
    );
    // Everything the live session reaches is intact, now and after a remount.
    assert_eq!(fs::read(m.p("keep")).unwrap(), keep);
    fsck_clean(&m.store);
    m.umount();
    fsck_clean(&m.store);
    m.mount();
    assert_eq!(fs::read(m.p("keep")).unwrap(), keep);
    tf_ok(&m.store, &["-C", mp, "checkout", "HEAD"]);
}

#[test]
fn gc_with_concurrent_writers_removes_nothing_reachable() {
    let m = Arc::new(Mount::new());
    let stop = Arc::new(AtomicBool::new(false));
    let gc_runs = {
        let (m, stop) = (m.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let o = tf(&m.store, &["gc"]);
                assert!(
                    o.status.success(),
                    "gc failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                n += 1;
            }
            n
        })
    };
    // Writers: each owns some files, rewrites them (with shared content so dedup
    // hits objects a gc may be sweeping), deletes some, checkpoints now and then.
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let m = m.clone();
            std::thread::spawn(move || {
                let mut expect: HashMap<String, Vec<u8>> = HashMap::new();
                for round in 0..40u64 {
                    for f in 0..6u64 {
                        let name = format!("w{w}-f{f}");
                        if (round + f) % 5 == 4 {
                            let _ = fs::remove_file(m.p(&name));
                            expect.remove(&name);
                            continue;
                        }
                        // Seeds repeat across rounds and writers: content that was
                        // garbage a moment ago comes back.
                        let seed = (round * 7 + f) % 11;
                        let len = 70_000 + (seed as usize) * 40_000;
                        let data = pattern(len, seed);
                        if f % 2 == 0 {
                            write_synced(&m.p(&name), &data);
                        } else {
                            fs::write(m.p(&name), &data).unwrap();
                        }
                        expect.insert(name, data);
                    }
                    if round % 10 == 9 {
                        tf_ok(
                            &m.store,
                            &["-C", m.mp.to_str().unwrap(), "checkpoint", "-m", "w"],
                        );
                    }
                }
                expect
            })
        })
        .collect();
    let mut expect = HashMap::new();
    for w in writers {
        expect.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let runs = gc_runs.join().unwrap();
    assert!(runs >= 2, "gc ran {runs} times");
    gc(&m.store);
    for (name, data) in &expect {
        assert_eq!(&fs::read(m.p(name)).unwrap(), data, "{name}");
    }
    fsck_clean(&m.store);
    m.umount();
    gc(&m.store);
    fsck_clean(&m.store);
    m.mount();
    for (name, data) in &expect {
        assert_eq!(&fs::read(m.p(name)).unwrap(), data, "{name} after remount");
    }
    // Every checkpoint is still whole.
    let log = json(&m.store, &["-C", m.mp.to_str().unwrap(), "log"]);
    assert!(log["checkpoints"].as_array().unwrap().len() >= 8, "{log}");
}

/// Flip one byte inside the payload of the record of `id` in the store's packs.
fn corrupt_object(store: &Path, id: &[u8; 32]) {
    for e in fs::read_dir(store.join("packs")).unwrap() {
        let p = e.unwrap().path();
        let mut bytes = fs::read(&p).unwrap();
        let (recs, _) = treefork::store::pack::scan(&bytes);
        if let Some(r) = recs.iter().find(|r| r.header.id.0 == *id) {
            let at = r.offset as usize
                + treefork::store::pack::RECORD_HEADER_LEN
                + r.header.stored_len as usize / 2;
            bytes[at] ^= 0x55;
            fs::write(&p, bytes).unwrap();
            return;
        }
    }
    panic!("object not found in any pack");
}

#[test]
fn corrupt_chunk_is_eio_and_fsck_names_file_and_object() {
    let m = Mount::new();
    fs::create_dir_all(m.p("dir")).unwrap();
    let victim = pattern(200_000, 9);
    fs::write(m.p("dir/victim"), &victim).unwrap();
    let fine = pattern(150_000, 10);
    fs::write(m.p("fine"), &fine).unwrap();
    m.umount();
    // The second 64 KiB block of the victim.
    let block = &victim[65536..131072];
    let id = treefork::store::Kind::Chunk.hash(block).0;
    corrupt_object(&m.store, &id);
    m.mount();
    let e = fs::read(m.p("dir/victim")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    // The first block is still readable; other files read fine.
    let mut f = fs::File::open(m.p("dir/victim")).unwrap();
    let mut first = vec![0u8; 65536];
    std::io::Read::read_exact(&mut f, &mut first).unwrap();
    assert_eq!(first, victim[..65536]);
    drop(f);
    assert_eq!(fs::read(m.p("fine")).unwrap(), fine);
    let log = crate::harness::daemon_log(&m.store);
    assert!(
        log.contains("/dir/victim") && log.contains(&treefork::id::hex(&id)),
        "daemon log does not name the file and chunk:\n{log}"
    );
    // fsck (online, through the daemon) names the file and the object.
    let o = tf(&m.store, &["fsck"]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("/dir/victim") && out.contains(&treefork::id::hex(&id)),
        "{out}"
    );
    // Repair needs the store offline, and cannot invent the lost bytes: the
    // problem stays reported, nothing else is touched.
    let o = tf(&m.store, &["fsck", "--repair"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("offline"));
    m.umount();
    let o = tf(&m.store, &["fsck", "--repair"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("/dir/victim"));
    m.mount();
    assert_eq!(fs::read(m.p("fine")).unwrap(), fine);
}

#[test]
fn fsck_repair_rebuilds_index_and_moves_dangling_refs_aside() {
    let m = Mount::new();
    let data = pattern(500_000, 3);
    fs::write(m.p("f"), &data).unwrap();
    fs::write(m.p("small"), b"small").unwrap();
    tf_ok(
        &m.store,
        &["-C", m.mp.to_str().unwrap(), "checkpoint", "-m", "c"],
    );
    m.umount();
    {
        // Lose a third of the index and add a branch to a checkpoint that does not exist.
        use treefork::meta::{self, MetaOp};
        use treefork::store::ObjectStore;
        let _lock = treefork::lock::StoreLock::acquire(&m.store).unwrap();
        let s = treefork::store::PackStore::open(&m.store).unwrap();
        let mut ops: Vec<MetaOp> = s
            .index()
            .unwrap()
            .iter()
            .step_by(3)
            .map(|(id, _)| MetaOp::Delete(meta::object_key(id)))
            .collect();
        assert!(!ops.is_empty());
        ops.push(MetaOp::Put(
            meta::ref_key("dangling"),
            format!(r#"{{"checkpoint":"{}","created":0}}"#, "ab".repeat(32)).into_bytes(),
        ));
        s.commit(ops).unwrap();
    }
    let o = tf(&m.store, &["fsck"]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("branch dangling"), "{out}");
    assert!(out.contains("missing object"), "{out}");
    let o = tf(&m.store, &["fsck", "--repair"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("repaired: index"), "{out}");
    assert!(out.contains("moved branch dangling aside"), "{out}");
    fsck_clean(&m.store);
    m.mount();
    assert_eq!(fs::read(m.p("f")).unwrap(), data);
    assert_eq!(fs::read(m.p("small")).unwrap(), b"small");
    let b = json(&m.store, &["-C", m.mp.to_str().unwrap(), "branches"]);
    assert!(!b.to_string().contains("dangling"), "{b}");
}

#[test]
fn fsck_repair_rebuilds_the_index_of_a_lost_metadata_database() {
    let m = Mount::new();
    let data = pattern(300_000, 7);
    fs::write(m.p("f"), &data).unwrap();
    m.umount();
    let objects_before = {
        let _lock = treefork::lock::StoreLock::acquire(&m.store).unwrap();
        treefork::store::PackStore::open(&m.store)
            .unwrap()
            .index()
            .unwrap()
            .len()
    };
    // The whole sled database is gone; the packs are intact.
    fs::remove_dir_all(m.store.join("meta")).unwrap();
    let o = tf(&m.store, &["fsck"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("format marker missing") && e.contains("--repair"),
        "{e}"
    );
    let o = tf(&m.store, &["fsck", "--repair"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("repaired: index"), "{out}");
    fsck_clean(&m.store);
    {
        let _lock = treefork::lock::StoreLock::acquire(&m.store).unwrap();
        let s = treefork::store::PackStore::open(&m.store).unwrap();
        assert_eq!(s.index().unwrap().len(), objects_before);
        // The file's chunks are back in the index (verified reads).
        let chunk = treefork::store::Kind::Chunk.hash(&data[..65536]);
        assert_eq!(
            &**treefork::store::ObjectStore::get(&s, treefork::store::Kind::Chunk, &chunk).unwrap(),
            &data[..65536]
        );
    }
    // The store is usable again (session records lived only in the lost database).
    m.mount();
    fs::write(m.p("g"), b"new").unwrap();
    m.remount();
    assert_eq!(fs::read(m.p("g")).unwrap(), b"new");
}

fn pack_bytes(store: &Path) -> u64 {
    fs::read_dir(store.join("packs"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

fn source_text(seed: usize, lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| {
            format!(
                "    let v{i} = compute({seed}, {}); // step {i}\n",
                (i * 31 + seed) % 977
            )
            .into_bytes()
        })
        .collect()
}

/// Small edits of source files are stored as deltas of the previous version: a
/// checkpoint of 60 edited files costs a few KiB, every version reads back exactly
/// (live, after checkout, after gc, remount and offline), and fsck verifies them.
#[test]
fn edits_are_stored_as_deltas_and_every_version_reads_back() {
    let m = Mount::new();
    let mp = m.mp.to_str().unwrap();
    fs::create_dir(m.p("src")).unwrap();
    // 40 block files (~30 KiB and ~150 KiB) and 20 inline ones (< 4 KiB).
    let mut v: Vec<(String, Vec<u8>)> = (0..60)
        .map(|i| {
            let lines = match i % 3 {
                0 => 3000,
                1 => 600,
                _ => 40,
            };
            (format!("src/f{i}.rs"), source_text(i, lines))
        })
        .collect();
    for (p, d) in &v {
        fs::write(m.p(p), d).unwrap();
    }
    let ck = |msg: &str| -> String {
        let v = json(&m.store, &["-C", mp, "checkpoint", "-m", msg]);
        v["checkpoint"]["id"].as_str().unwrap().to_string()
    };
    let c1 = ck("v1");
    let v1 = v.clone();
    let before = pack_bytes(&m.store);
    let whole: u64 = v.iter().map(|(_, d)| d.len() as u64).sum();
    let mut last = String::new();
    for round in 0..2 {
        for (p, d) in v.iter_mut() {
            let at = d.len() / 2;
            d.splice(at..at, format!("// edit {round}\n").into_bytes());
            fs::write(m.p(p), &*d).unwrap();
        }
        last = ck(&format!("v{}", round + 2));
    }
    let grown = pack_bytes(&m.store) - before;
    // Whole copies would take ~2 x 25 % of `whole` (zstd on this text); deltas a
    // few hundred bytes per file and version.
    assert!(
        grown < 120_000,
        "two rounds of 60 one-line edits grew the packs by {grown} bytes ({whole} raw)"
    );
    let check = |want: &[(String, Vec<u8>)]| {
        for (p, d) in want {
            assert!(fs::read(m.p(p)).unwrap() == *d, "{p} differs");
        }
    };
    check(&v);
    tf_ok(&m.store, &["-C", mp, "checkout", &c1]);
    check(&v1);
    let g = gc(&m.store);
    assert!(g["objects_live"].as_u64().unwrap() > 0, "{g}");
    m.remount();
    check(&v1);
    tf_ok(&m.store, &["-C", mp, "checkout", &last]);
    check(&v);
    fsck_clean(&m.store);
    m.umount();
    fsck_clean(&m.store);
    m.mount();
    check(&v);
}
