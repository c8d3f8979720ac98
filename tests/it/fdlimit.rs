//! Issue 42: the daemon raises its descriptor limit to the hard one at start,
//! and under a limit it cannot raise far, a mount it cannot serve is refused
//! cleanly before anything is made: a clear error, no half-made mount, no
//! registry entry, and every mount made before still works and unmounts.

use std::path::Path;
use std::process::Command;

use crate::harness::*;

/// The soft and hard "Max open files" of process `pid`.
fn nofile(pid: i32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    (f[3].parse().unwrap(), f[4].parse().unwrap())
}

fn is_mounted(p: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let p = p.to_str().unwrap();
    info.lines().any(|l| l.split_whitespace().nth(4) == Some(p))
}

#[test]
fn under_a_low_descriptor_limit_mounts_beyond_it_are_refused_and_nothing_is_half_made() {
    let m = Mount::unmounted("s");
    // The daemon starts under soft 128, hard 256: it raises itself to 256.
    let o = Command::new("prlimit")
        .arg("--nofile=128:256")
        .arg("--")
        .arg(bin())
        .arg("--store")
        .arg(&m.store)
        .args(["mount", m.mp.to_str().unwrap(), "--session", "s"])
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "mount: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let pid = m.daemon_pid();
    assert_eq!(
        nofile(pid),
        (256, 256),
        "the soft limit raised to the hard one"
    );
    std::fs::write(m.p("f"), b"base\n").unwrap();
    // Forks until one is refused: well before the 256 descriptors are gone.
    let mut made = Vec::new();
    let mut refused = None;
    for i in 0..40 {
        let name = format!("k{i}");
        let dir = m.tmp.path().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let o = fork_at(&m, &name, &dir);
        if o.status.success() {
            made.push(dir);
        } else {
            refused = Some((name, dir, String::from_utf8_lossy(&o.stderr).into_owned()));
            break;
        }
    }
    let (name, dir, err) = refused.expect("a mount beyond the limit is refused");
    eprintln!(
        "{} forks mounted under 256 descriptors, then: {err}",
        made.len()
    );
    assert!(
        made.len() >= 3,
        "a few mounts fit under 256 descriptors: {}",
        made.len()
    );
    assert!(
        err.contains("descriptors") && err.contains("ulimit -n"),
        "the refusal says why and what to do: {err}"
    );
    // Nothing half-made: not mounted, no session, no registry entry.
    assert!(!is_mounted(&dir), "{} is left mounted", dir.display());
    let sessions = tf_ok(&m.store, &["sessions", "--json"]);
    assert!(!sessions.contains(&format!("\"{name}\"")), "{sessions}");
    let o = tf(&m.store, &["umount", dir.to_str().unwrap()]);
    assert!(
        !o.status.success(),
        "nothing to unmount at the refused fork"
    );
    // The daemon still serves everything it mounted, and unmounts it.
    for d in &made {
        assert_eq!(std::fs::read(d.join("f")).unwrap(), b"base\n");
    }
    assert!(nofile(pid).0 == 256);
    for d in &made {
        umount_ok(&m.store, d);
    }
    // With room again, the same fork mounts.
    let o = fork_at(&m, &name, &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    umount_ok(&m.store, &dir);
    m.umount();
}

/// `treefork fork NAME --mount DIR` from the workspace of `m`.
fn fork_at(m: &Mount, name: &str, dir: &Path) -> std::process::Output {
    ws(m, &["fork", name, "--mount", dir.to_str().unwrap()])
}
