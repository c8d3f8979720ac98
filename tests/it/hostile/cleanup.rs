//! Defect 9 of issue 38: experiment and bisect cleanup removed directories by path.
//!
//! The forks of a bisect or an experiment are mounted in a directory beside the
//! workspace. When that workspace's parent is the agent's, the agent renames the
//! forks' directory away and puts a symlink in its place, to a directory holding a
//! root-owned empty directory named like a fork. The cleanup after unmounting the
//! forks removed their mountpoints by path, through the symlink.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::Agent;
use crate::harness::daemon_log;

/// One request on the session socket of the session mounted at `mp`, as the
/// user; the final answer.
fn request(mp: &Path, req: Value) -> Value {
    let rec = treefork::control::find_mount(mp).expect("mount registered");
    let mut s = UnixStream::connect(rec.socket.expect("session socket")).unwrap();
    s.write_all(format!("{req}\n").as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    loop {
        let mut l = String::new();
        assert!(r.read_line(&mut l).unwrap() > 0, "connection closed");
        let v: Value = serde_json::from_str(&l).unwrap();
        if v.get("event").is_none() {
            return v;
        }
    }
}

/// The agent's fork `f` mounted at `home/ws` (its parent the agent's), and its
/// starting checkpoint.
fn agent_fork(a: &Agent) -> (PathBuf, String) {
    let ws = a.home.join("ws");
    a.sh_ok(&format!("mkdir '{}'", ws.display()));
    let v = a.cli_ok(&["fork", "f", "--mount", ws.to_str().unwrap()]);
    (ws, v["checkpoint"].as_str().unwrap().to_string())
}

/// The agent moves `dir` away and puts a symlink to a root-owned directory in
/// its place, which holds a root-owned empty directory named like `fork_mp`.
/// Returns that decoy directory.
fn swap(a: &Agent, dir: &Path, fork_mp: &Path) -> PathBuf {
    let vault = a.m.tmp.path().join("vault");
    let decoy = vault.join(fork_mp.file_name().unwrap());
    fs::create_dir_all(&decoy).unwrap();
    a.sh_ok(&format!(
        "mv '{d}' '{d}.moved' && ln -s '{}' '{d}'",
        vault.display(),
        d = dir.display()
    ));
    decoy
}

#[test]
fn bisect_cleanup_does_not_follow_a_swapped_parent() {
    let a = Agent::new();
    let (ws, cp) = agent_fork(&a);
    let b = request(
        &ws,
        json!({"v": 1, "op": "bisect_begin", "checkpoints": [cp]}),
    );
    assert_eq!(b["ok"], true, "{b:#}");
    let fork_mp = PathBuf::from(b["forks"][0]["mountpoint"].as_str().unwrap());
    let dir = fork_mp.parent().unwrap().to_path_buf();
    assert_eq!(dir.parent(), Some(a.home.as_path()));
    let decoy = swap(&a, &dir, &fork_mp);
    let r = request(
        &ws,
        json!({"v": 1, "op": "bisect_end", "id": b["id"], "remove": "all"}),
    );
    assert_eq!(r["ok"], true, "{r:#}");
    assert!(
        decoy.is_dir(),
        "bisect cleanup removed a root-owned directory through the agent's symlink\n{}",
        daemon_log(&a.m.store)
    );
    // The fork's own mountpoint went, where its directory was moved to.
    let moved = PathBuf::from(format!("{}.moved", dir.display()));
    assert!(!moved.join(fork_mp.file_name().unwrap()).exists());
    a.assert_daemon_answers();
}

#[test]
fn experiment_cleanup_does_not_follow_a_swapped_parent() {
    let a = Agent::new();
    let (ws, _) = agent_fork(&a);
    let b = request(
        &ws,
        json!({"v": 1, "op": "experiment_begin", "runs": [{"command": "true"}]}),
    );
    assert_eq!(b["ok"], true, "{b:#}");
    let fork_mp = PathBuf::from(b["forks"][0]["mountpoint"].as_str().unwrap());
    let dir = fork_mp.parent().unwrap().to_path_buf();
    let decoy = swap(&a, &dir, &fork_mp);
    let r = request(
        &ws,
        json!({"v": 1, "op": "experiment_end", "id": b["id"], "abort": true}),
    );
    assert_eq!(r["ok"], true, "{r:#}");
    assert!(
        decoy.is_dir(),
        "experiment cleanup removed a root-owned directory through the agent's symlink\n{}",
        daemon_log(&a.m.store)
    );
    let moved = PathBuf::from(format!("{}.moved", dir.display()));
    assert!(!moved.join(fork_mp.file_name().unwrap()).exists());
    a.assert_daemon_answers();
}
