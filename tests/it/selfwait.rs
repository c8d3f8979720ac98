//! A daemon killed while the kernel waits on its own mount still dies.
//!
//! A checkpoint flushes the kernel's dirty pages of the mount (`syncfs`). If a
//! daemon thread made that call itself, a `kill -9` while the writeback waits
//! for the daemon's answer would leave the thread in an uninterruptible sleep
//! that only the (never coming) death of its own process could end: the daemon
//! would never die and the mount would hang. `fs::outside` makes such calls from
//! a child process holding no `/dev/fuse` descriptor; these tests hold it to that.

use std::io::Write;
use std::time::Duration;

use crate::harness::{Mount, abort_fuse_connections, pattern, tf};

#[test]
fn kill_9_during_a_checkpoints_syncfs_kills_the_daemon() {
    // Every FUSE write waits 3 s: the checkpoint's writeback is still waiting
    // on the daemon when it is killed.
    let m = Mount::with_failpoint("fuse-write-delay-ms:3000");
    // Dirty pages in the kernel's cache, never written back: the file stays open
    // (a close would flush them).
    let mut f = std::fs::File::create(m.p("dirty.bin")).unwrap();
    f.write_all(&pattern(256 << 10, 3)).unwrap();
    let (store, mp) = (m.store.clone(), m.mp.clone());
    let ckpt = std::thread::spawn(move || tf(&store, &["-C", mp.to_str().unwrap(), "checkpoint"]));
    // Until the daemon is inside the checkpoint's syncfs, waiting on the writes.
    std::thread::sleep(Duration::from_millis(1000));
    let pid = m.daemon_pid();
    let died = m.kill_daemon_within(Duration::from_secs(10));
    if died.is_err() {
        abort_fuse_connections(&m.store);
    }
    assert!(
        died.is_ok(),
        "daemon {pid} did not die after kill -9 during a checkpoint's syncfs: {died:?}"
    );
    let o = ckpt.join().unwrap();
    assert!(!o.status.success(), "the checkpoint cannot have succeeded");
    drop(f);
    // The store opens again: a new daemon mounts the session.
    m.mount();
    std::fs::write(m.p("after"), "ok").unwrap();
    assert_eq!(std::fs::read_to_string(m.p("after")).unwrap(), "ok");
}
