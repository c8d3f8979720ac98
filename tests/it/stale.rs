//! Opens through entries the kernel cached before a checkout replaced them.
//!
//! A checkout swaps the tree and then sends the kernel its invalidations; in
//! between, the kernel still resolves a replaced path to the inode the graft took
//! out of the tree (entries live an hour). An open in that window used to succeed on
//! the orphan, so an `fsync`ed append vanished. Now such an open answers ESTALE, the
//! kernel looks the path up again and the write lands in the new tree. The window is
//! widened with the debug failpoint `inval-delay-ms` (see `src/failpoint.rs`).

use std::fs;
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{Mount, bin, daemon_log, ws_ok};

const PROBES: usize = 40;

#[test]
fn an_open_through_a_replaced_entry_reaches_the_new_tree() {
    let m = Mount::with_failpoint("inval-delay-ms:4000");
    // Checkpoint a: `log` = "A", probes "a", directory `gone` absent.
    fs::write(m.p("log"), b"A\n").unwrap();
    for i in 0..PROBES {
        fs::write(m.p(&format!("probe{i}")), b"a").unwrap();
    }
    ws_ok(&m, &["checkpoint", "-m", "a"]);
    ws_ok(&m, &["branch", "a"]);
    // The live state: every file differs from a, plus a directory a lacks.
    fs::write(m.p("log"), b"B version\n").unwrap();
    for i in 0..PROBES {
        fs::write(m.p(&format!("probe{i}")), b"b").unwrap();
    }
    fs::create_dir(m.p("gone")).unwrap();
    ws_ok(&m, &["checkpoint", "-m", "b"]);
    // The kernel caches `log` and `gone` (entries and attributes); the probes'
    // entries (cached when they were written) are dropped first, so each probe
    // below is a fresh lookup.
    fs::write("/proc/sys/vm/drop_caches", b"2").unwrap();
    assert_eq!(fs::read(m.p("log")).unwrap(), b"B version\n");
    assert!(fs::metadata(m.p("gone")).unwrap().is_dir());
    let store = m.store.clone();
    let mp = m.mp.clone();
    let checkout = std::thread::spawn(move || {
        Command::new(bin())
            .arg("--store")
            .arg(&store)
            .arg("-C")
            .arg(&mp)
            .args(["checkout", "a"])
            .output()
            .unwrap()
    });
    // Wait until the tree is swapped (an uncached probe reads a's content) while
    // the invalidations are still held back.
    let t0 = Instant::now();
    let mut swapped = false;
    for i in 0..PROBES {
        if fs::read(m.p(&format!("probe{i}"))).unwrap() == b"a" {
            swapped = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(swapped, "the checkout did not swap the tree");
    assert!(
        t0.elapsed() < Duration::from_millis(3000),
        "too slow to test inside the invalidation window"
    );
    // An append through the cached entry of `log`, acknowledged by fsync.
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(m.p("log"))
        .unwrap();
    f.write_all(b"appended\n").unwrap();
    f.sync_all().unwrap();
    drop(f);
    // Creating in a directory the checkout removed is refused, not done in an orphan.
    let e = fs::write(m.p("gone/x"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    let o = checkout.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The append is in the live tree, and survives a remount.
    assert_eq!(
        fs::read(m.p("log")).unwrap(),
        b"A\nappended\n",
        "the acknowledged append went to the replaced inode\n{}",
        daemon_log(&m.store)
    );
    m.umount();
    m.mount();
    assert_eq!(fs::read(m.p("log")).unwrap(), b"A\nappended\n");
}
