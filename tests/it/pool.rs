//! Issue 42: one pool of workers serves every mount's /dev/fuse connection
//! (`fs::devpool`). Requests that block in the core hold their workers; the pool
//! then starts spares, so mounts whose requests block do not stall the others,
//! and the spares go away once they are idle.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::harness::*;

/// Threads of process `pid` whose name starts with `prefix`.
fn threads_named(pid: i32, prefix: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.starts_with(prefix))
        .count()
}

/// Start `n` writers in `dir`, each writing and fsyncing its own file (the
/// fsync's WRITE request blocks in the daemon); `done` counts the finished ones.
fn writers(dir: &Path, n: usize, done: &Arc<AtomicUsize>) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|i| {
            let (p, done) = (dir.join(format!("w{i}")), done.clone());
            std::thread::spawn(move || {
                let mut f = std::fs::File::create(&p).unwrap();
                f.write_all(&pattern(64 << 10, i as u64)).unwrap();
                f.sync_all().unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect()
}

#[test]
fn mounts_whose_requests_block_do_not_stall_the_other_mounts() {
    // 4 base workers (at most 3 requests of one mount in flight); every FUSE
    // write waits 4 s in the daemon.
    let m = Mount::with_env(&[
        ("TREEFORK_FUSE_WORKERS", "4"),
        (treefork::failpoint::ENV, "fuse-write-delay-ms:4000"),
    ]);
    std::fs::create_dir(m.p("d")).unwrap();
    let forks: Vec<PathBuf> = ["a", "b"]
        .iter()
        .map(|name| {
            let dir = m.tmp.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let o = ws(&m, &["fork", name, "--mount", dir.to_str().unwrap()]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            dir
        })
        .collect();
    let pid = m.daemon_pid();
    // Two mounts' writes block: 3 + 3 requests in flight, more than the 4 workers.
    let done = Arc::new(AtomicUsize::new(0));
    let mut w = writers(&m.p("d"), 4, &done);
    w.extend(writers(&forks[0].join("d"), 4, &done));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        threads_named(pid, "fuse-spare") > 0,
        "spares were started while every worker was busy"
    );
    // A third mount still answers at once (a LOOKUP of a name not there, and a
    // directory listing: nothing the kernel could answer from its cache).
    let t = Instant::now();
    assert!(!forks[1].join("d/not-there").exists());
    assert_eq!(std::fs::read_dir(forks[1].join("d")).unwrap().count(), 0);
    let took = t.elapsed();
    assert_eq!(
        done.load(Ordering::SeqCst),
        0,
        "the writers were still blocked while the other mount was asked"
    );
    assert!(
        took < Duration::from_millis(1500),
        "a mount was stalled by two others' blocked requests: {took:?}"
    );
    for h in w {
        h.join().unwrap();
    }
    // Everything written is there.
    for (dir, n) in [(m.p("d"), 4), (forks[0].join("d"), 4)] {
        for i in 0..n {
            let got = std::fs::read(dir.join(format!("w{i}"))).unwrap();
            assert!(
                got == pattern(64 << 10, i as u64),
                "w{i} in {}",
                dir.display()
            );
        }
    }
    // Idle spares exit (after 10 s without work); the base workers stay.
    let deadline = Instant::now() + Duration::from_secs(30);
    while threads_named(pid, "fuse-spare") > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(threads_named(pid, "fuse-spare"), 0, "idle spares exit");
    assert_eq!(threads_named(pid, "fuse-"), 4, "the base workers stay");
    assert!(m.p("d/w0").exists(), "the mount is still served");
    for d in &forks {
        umount_ok(&m.store, d);
    }
    m.umount();
}
