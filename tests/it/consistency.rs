//! Checkpoints taken while another process writes: every checkpoint holds a state
//! that existed (each fsync'd, atomically replaced file is one whole version, at least
//! as new as the last version acknowledged before the checkpoint was requested).

use std::fs;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::harness::{Mount, tf, tf_ok};

fn version_of(bytes: &[u8]) -> Option<u64> {
    let first = *bytes.first()?;
    if bytes.len() != 100_000 || bytes.iter().any(|&b| b != first) {
        return None;
    }
    Some(first as u64)
}

#[test]
fn checkpoints_under_concurrent_writes_are_consistent() {
    let m = Mount::new();
    fs::create_dir(m.p("data")).unwrap();
    fs::write(m.p("data/x"), vec![0u8; 100_000]).unwrap();
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop, dir) = (acked.clone(), stop.clone(), m.p("data"));
        std::thread::spawn(move || {
            let mut v = 1u64;
            while !stop.load(Ordering::Relaxed) && v < 250 {
                let tmp = dir.join("x.tmp");
                let mut f = fs::File::create(&tmp).unwrap();
                f.write_all(&vec![v as u8; 100_000]).unwrap();
                f.sync_all().unwrap();
                fs::rename(&tmp, dir.join("x")).unwrap();
                fs::File::open(&dir).unwrap().sync_all().unwrap();
                acked.store(v, Ordering::SeqCst);
                v += 1;
            }
        })
    };
    let mut taken = Vec::new();
    for _ in 0..8 {
        std::thread::sleep(std::time::Duration::from_millis(30));
        let before = acked.load(Ordering::SeqCst);
        let o = tf(
            &m.store,
            &[
                "-C",
                m.mp.to_str().unwrap(),
                "checkpoint",
                "-m",
                "during writes",
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        taken.push((
            String::from_utf8_lossy(&o.stdout).trim().to_string(),
            before,
        ));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // Read each checkpoint through a fork of it.
    for (i, (id, before)) in taken.iter().enumerate() {
        let fmp = m.tmp.path().join(format!("fork{i}"));
        fs::create_dir(&fmp).unwrap();
        tf_ok(
            &m.store,
            &[
                "-C",
                m.mp.to_str().unwrap(),
                "fork",
                &format!("f{i}"),
                "--from",
                id,
                "--mount",
                fmp.to_str().unwrap(),
            ],
        );
        let bytes = fs::read(fmp.join("data/x")).unwrap();
        tf_ok(&m.store, &["umount", fmp.to_str().unwrap()]);
        let v = version_of(&bytes)
            .unwrap_or_else(|| panic!("checkpoint {id}: data/x is a mix of versions"));
        assert!(
            v >= before % 256,
            "checkpoint {id} holds version {v}, older than acknowledged {before}"
        );
        assert!(
            !fs::read_dir(fmp).unwrap().any(|_| true),
            "fork mountpoint not empty after unmount"
        );
    }
}

#[test]
fn checkout_under_a_writer_loses_no_acknowledged_write() {
    let m = Mount::new();
    let mp = m.mp.to_str().unwrap().to_string();
    fs::write(m.p("base"), b"base").unwrap();
    tf_ok(&m.store, &["-C", &mp, "branch", "start"]);
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop, dir) = (acked.clone(), stop.clone(), m.mp.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && i < 2000 {
                let mut f = fs::File::create(dir.join(format!("w{i}"))).unwrap();
                f.write_all(format!("write {i}").as_bytes()).unwrap();
                f.sync_all().unwrap();
                acked.store(i + 1, Ordering::SeqCst);
                i += 1;
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    // Writes acknowledged before the checkout was requested must survive it (in the
    // saved checkpoint or the new tree); later ones race with it, as with any tree
    // replaced under a running writer.
    let before = acked.load(Ordering::SeqCst);
    let out = tf_ok(&m.store, &["-C", &mp, "--json", "checkout", "start"]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let n = before;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let saved = v["saved"]["ref"]
        .as_str()
        .expect("pending writes were saved")
        .to_string();
    let fmp = m.tmp.path().join("saved");
    fs::create_dir(&fmp).unwrap();
    tf_ok(
        &m.store,
        &[
            "-C",
            &mp,
            "fork",
            "saved",
            "--from",
            &saved,
            "--mount",
            fmp.to_str().unwrap(),
        ],
    );
    let mut missing = Vec::new();
    for i in 0..n {
        let name = format!("w{i}");
        let want = format!("write {i}").into_bytes();
        let live = fs::read(m.p(&name)).ok();
        let kept = fs::read(fmp.join(&name)).ok();
        if live.as_ref() != Some(&want) && kept.as_ref() != Some(&want) {
            missing.push(name);
        }
    }
    tf_ok(&m.store, &["umount", fmp.to_str().unwrap()]);
    assert!(
        missing.is_empty(),
        "acknowledged writes lost by checkout: {missing:?} (of {n})"
    );
    let o = tf(&m.store, &["-C", &mp, "status"]);
    assert!(o.status.success());
}
