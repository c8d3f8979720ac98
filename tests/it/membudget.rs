//! Issue 45: one memory budget for the whole daemon. Sessions writing at once
//! share the store's `unsealed_bytes` (set with `treefork limits`), so the daemon's
//! peak memory stays within it (plus the read cache and a constant) however many
//! sessions write, and nothing written is lost on the way.

use std::io::Write;
use std::path::PathBuf;

use crate::harness::*;

const MIB: u64 = 1 << 20;

/// `VmRSS` or `VmHWM` of process `pid`, in bytes.
fn vm(pid: i32, key: &str) -> u64 {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = st.lines().find(|l| l.starts_with(key)).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

fn limits(m: &Mount) -> serde_json::Value {
    serde_json::from_str(&tf_ok(&m.store, &["limits", "--json"])).unwrap()
}

#[test]
fn sessions_writing_at_once_stay_within_one_memory_budget() {
    // A fixed pool (each worker holds a 1 MiB request buffer).
    let m = Mount::with_env(&[("TREEFORK_FUSE_WORKERS", "8")]);
    // 64 MiB of unsealed data for every session together, a 16 MiB read cache.
    tf_ok(
        &m.store,
        &[
            "limits",
            "unsealed_bytes=67108864",
            "read_cache_bytes=16777216",
        ],
    );
    let l = limits(&m);
    assert_eq!(l["limits"]["unsealed_bytes"], 64 * MIB, "{l}");
    assert_eq!(
        l["memory"]["unsealed_limit"],
        64 * MIB,
        "in effect at once: {l}"
    );
    assert_eq!(l["memory"]["read_cache_limit"], 16 * MIB, "{l}");
    let o = tf(&m.store, &["limits", "unsealed_bytes=1000"]);
    assert!(!o.status.success(), "a budget too small to work is refused");
    assert!(String::from_utf8_lossy(&o.stderr).contains("unsealed_bytes"));
    // Six sessions (the base and five forks), each writing 40 MiB at once and
    // closing without an fsync: without the shared budget each would hold up to
    // its own 32 MiB mark of new data (SEAL_FRESH), 192 MiB and more in all
    // (measured: 243 MiB growth).
    let mut dirs: Vec<PathBuf> = vec![m.mp.clone()];
    for i in 0..5 {
        let name = format!("w{i}");
        let dir = m.tmp.path().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let o = ws(&m, &["fork", &name, "--mount", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        dirs.push(dir);
    }
    let pid = m.daemon_pid();
    // The peak from here on (not the mount's or the forks').
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = vm(pid, "VmRSS");
    let writers: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let p = d.join("big.bin");
            std::thread::spawn(move || {
                let mut f = std::fs::File::create(&p).unwrap();
                for k in 0..40u64 {
                    f.write_all(&pattern(MIB as usize, i as u64 * 1000 + k))
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let peak = vm(pid, "VmHWM").saturating_sub(before);
    let l = limits(&m);
    eprintln!(
        "peak growth {} MiB over {} MiB; {l}",
        peak / MIB,
        before / MIB
    );
    // The budget, the read cache, and a constant: writes in flight, the block
    // pool (16 MiB), seals' compression buffers, allocator slack.
    assert!(
        peak <= (64 + 16 + 64) * MIB,
        "the daemon grew by {} MiB while six sessions wrote 240 MiB under a 64 MiB budget",
        peak / MIB
    );
    let used = l["memory"]["unsealed_used"].as_u64().unwrap();
    assert!(used <= 64 * MIB, "{l}");
    // Everything written reads back, in every session.
    for (i, d) in dirs.iter().enumerate() {
        let got = std::fs::read(d.join("big.bin")).unwrap();
        assert_eq!(got.len() as u64, 40 * MIB);
        for k in 0..40u64 {
            let at = (k * MIB) as usize;
            assert!(
                got[at..at + MIB as usize] == pattern(MIB as usize, i as u64 * 1000 + k)[..],
                "session {i}, MiB {k}"
            );
        }
    }
    // Back to the machine's default.
    tf_ok(
        &m.store,
        &["limits", "unsealed_bytes=0", "read_cache_bytes=0"],
    );
    let l = limits(&m);
    assert!(
        l["memory"]["unsealed_limit"].as_u64().unwrap() >= 256 * MIB,
        "{l}"
    );
    for d in &dirs[1..] {
        umount_ok(&m.store, d);
    }
    m.umount();
}
