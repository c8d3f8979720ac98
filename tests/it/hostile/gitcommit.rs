//! Defect 8 of issue 38: the git-commit trigger was neither counted nor bounded.
//!
//! The agent rewrites `.git/HEAD` every 100 ms; each new commit it names made the
//! daemon take a checkpoint (30 in 10 s), none counted against `op_records`, so
//! the op log and the metadata journal grew without bound.

use std::time::Duration;

use serde_json::Value;

use super::Agent;
use crate::harness::daemon_log;

/// Rewrite `.git/HEAD` (a new commit id each time) every 100 ms for `secs`, as
/// the agent, inside its workspace; `first` numbers the first id.
fn flood(a: &Agent, first: u32, secs: u32) {
    a.sh_ok(&format!(
        "/usr/bin/python3 -c '
import os, time
os.makedirs(\".git\", exist_ok=True)
t = time.time(); i = {first}
while time.time() - t < {secs}:
    with open(\".git/HEAD\", \"w\") as f:
        f.write(\"%040x\\n\" % i)
    i += 1
    time.sleep(0.1)
'"
    ));
}

/// The session's git-commit checkpoints: their op sequence numbers.
fn git_commits(a: &Agent) -> Vec<u64> {
    a.user_ok(&["op", "log", "-n", "1000"])["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "checkpoint" && o["request"]["trigger"] == "git-commit")
        .map(|o| o["seq"].as_u64().unwrap())
        .collect()
}

fn last_seq(a: &Agent) -> u64 {
    let v: Value = a.user_ok(&["op", "log", "-n", "1"]);
    v["operations"][0]["seq"].as_u64().unwrap_or(0)
}

#[test]
fn git_commit_checkpoints_are_rate_limited_and_counted() {
    let a = Agent::new();
    // The daemon's baseline look (no repository yet).
    std::thread::sleep(Duration::from_millis(500));

    // A small op_records quota: the trigger stops there.
    let limit = last_seq(&a) + 2;
    a.user_ok(&["limits", &format!("op_records={limit}")]);
    flood(&a, 1, 10);
    std::thread::sleep(Duration::from_secs(1));
    let n = git_commits(&a);
    assert!(
        !n.is_empty(),
        "no git-commit checkpoint\n{}",
        daemon_log(&a.m.store)
    );
    assert!(
        n.len() <= 2 && n.iter().all(|&s| s <= limit),
        "git-commit checkpoints past op_records={limit}: {n:?}"
    );
    assert!(daemon_log(&a.m.store).contains("no git-commit checkpoint"));
    eprintln!("with op_records={limit}: git-commit checkpoints at seqs {n:?}");

    // Without the quota: at most the burst (4) and one per 5 s in 10 s.
    a.user_ok(&["limits", "op_records=100000"]);
    let before = git_commits(&a).len();
    flood(&a, 1000, 10);
    std::thread::sleep(Duration::from_secs(1));
    let made = git_commits(&a).len() - before;
    assert!(
        made >= 1,
        "no git-commit checkpoint\n{}",
        daemon_log(&a.m.store)
    );
    assert!(made <= 7, "{made} git-commit checkpoints in 10 s");
    eprintln!("{made} git-commit checkpoints in 10 s of .git/HEAD rewrites every 100 ms");
    a.assert_daemon_answers();
}
