//! Issue 12, D9 (session part): a mount does not keep every inode it ever served.
//! Files read once and then forgotten by the kernel (`drop_caches` makes it send
//! FORGETs) leave the daemon's live table (`live_inodes` in `sessions --json`), and
//! everything reads back, checkpoints and checks out as before.

use std::fs;
use std::time::{Duration, Instant};

use crate::harness::{Mount, tf_ok, ws_ok};

const DIRS: usize = 20;
const PER_DIR: usize = 1000;

fn content(d: usize, f: usize) -> String {
    format!("file {d}/{f}\n").repeat(1 + (d * 7 + f) % 40)
}

fn live_inodes(m: &Mount) -> u64 {
    let out = tf_ok(&m.store, &["sessions", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["sessions"][0]["live_inodes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no live_inodes in {v}"))
}

fn drop_caches() {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    fs::write("/proc/sys/vm/drop_caches", "3").expect("drop caches (needs root)");
}

/// Drop the kernel's caches until the live table is below `bound` (FORGETs arrive
/// asynchronously); returns the count seen last.
fn forget_until_below(m: &Mount, bound: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        drop_caches();
        let n = live_inodes(m);
        if n < bound || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn read_all(m: &Mount) {
    for d in 0..DIRS {
        for f in 0..PER_DIR {
            let got = fs::read_to_string(m.p(&format!("d{d:02}/f{f:04}.txt"))).unwrap();
            assert_eq!(got, content(d, f), "d{d:02}/f{f:04}.txt");
        }
    }
}

#[test]
fn forgotten_inodes_leave_the_live_table() {
    // Below the automatic-sweep floor (65,536 live inodes) nothing is evicted:
    // this 20,000-file tree needs the floor off.
    let m = Mount::with_env(&[(treefork::session::evict::EVICT_FLOOR_ENV, "0")]);
    for d in 0..DIRS {
        fs::create_dir(m.p(&format!("d{d:02}"))).unwrap();
        for f in 0..PER_DIR {
            fs::write(m.p(&format!("d{d:02}/f{f:04}.txt")), content(d, f)).unwrap();
        }
    }
    // A file held open across the evictions keeps working.
    fs::create_dir(m.p("held")).unwrap();
    fs::write(m.p("held/f"), "held\n").unwrap();
    let held = fs::File::open(m.p("held/f")).unwrap();
    ws_ok(&m, &["checkpoint", "-m", "written"]);
    let total = (DIRS * PER_DIR + DIRS + 3) as u64;

    // Read every file once: the table holds them while the kernel does.
    forget_until_below(&m, 100);
    read_all(&m);
    let loaded = live_inodes(&m);
    assert!(
        loaded > (DIRS * PER_DIR) as u64 / 2,
        "{loaded} live after reading"
    );
    // The kernel forgets them: the table comes down (no flush needed).
    let after = forget_until_below(&m, total / 20);
    assert!(
        after < total / 20,
        "{after} of {total} inodes still live after the kernel forgot them ({loaded} before)"
    );
    eprintln!("live inodes: {loaded} after reading, {after} after drop_caches");

    // Everything reads back, also through the file held open.
    read_all(&m);
    let mut s = String::new();
    std::io::Read::read_to_string(&mut &held, &mut s).unwrap();
    assert_eq!(s, "held\n");

    // Checkpoint and checkout work across evictions.
    let v: serde_json::Value = serde_json::from_str(&ws_ok(
        &m,
        &["--json", "checkpoint", "-m", "before changes"],
    ))
    .unwrap();
    let c1 = v["checkpoint"]["id"].as_str().unwrap().to_string();
    forget_until_below(&m, total / 20);
    for d in 0..DIRS {
        fs::write(m.p(&format!("d{d:02}/f0001.txt")), "changed\n").unwrap();
    }
    fs::remove_file(m.p("d05/f0500.txt")).unwrap();
    ws_ok(&m, &["checkpoint", "-m", "changes"]);
    forget_until_below(&m, total / 20);
    assert_eq!(
        fs::read_to_string(m.p("d07/f0001.txt")).unwrap(),
        "changed\n"
    );
    ws_ok(&m, &["checkout", &c1]);
    forget_until_below(&m, total / 20);
    read_all(&m);
    // And after a remount (the durable tree is whole).
    drop(held);
    m.remount();
    read_all(&m);
}
