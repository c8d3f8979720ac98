//! An agent without root runs experiments and bisects that see their forks at the
//! workspace's own path: its CLI unshares a user namespace (mapping its uid to
//! itself) with the mount namespace, so nothing runs with more than its rights
//! and the host's mounts stay as they were. (An agent's forks must be mounted on
//! directories it owns: the user points `forks_dir` at one.)

use std::fs;

use super::{AGENT_UID, Agent};
use crate::harness::daemon_log;

/// Mounts of the host under this test's own trees, as `(source, mountpoint)`
/// lines (other tests mount and unmount elsewhere meanwhile).
fn host_mounts(a: &Agent) -> Vec<String> {
    let roots = [a.m.tmp.path(), a.home.as_path()];
    let mut v: Vec<String> = fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .filter(|l| {
            let at = l.split(' ').nth(1).unwrap_or("");
            roots.iter().any(|r| at.starts_with(r.to_str().unwrap()))
        })
        .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    v.sort();
    v
}

#[test]
fn an_unprivileged_agents_runs_see_their_forks_at_the_workspace_path() {
    let a = Agent::new();
    let mp = a.m.mp.to_str().unwrap().to_string();
    a.sh_ok("echo base > f && mkdir sub && echo good > sub/g");
    a.cli_ok(&["checkpoint", "-m", "base"]);
    let forks = a.home.join("forks");
    a.sh_ok(&format!("mkdir '{}'", forks.display()));
    a.user_ok(&["config", &format!("forks_dir={}", forks.display())]);
    let before = host_mounts(&a);
    let cmd = format!("pwd; pwd -P; id -u; echo \"$PWD\"; echo run > {mp}/f");
    let o = a.cli(&["experiment", "-c", &cmd, "-c", &cmd]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}\n{}", daemon_log(&a.m.store));
    assert!(
        !err.contains("note: runs see their forks"),
        "fell back: {err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for r in doc["runs"].as_array().unwrap() {
        assert_eq!(
            r["stdout"].as_str().unwrap(),
            format!("{mp}\n{mp}\n{AGENT_UID}\n{mp}\n"),
            "{r:#}"
        );
        assert_eq!(r["exit"], 0, "{r:#}");
    }
    // Each run wrote its own fork, through the workspace's absolute path.
    assert_eq!(fs::read_to_string(a.m.p("f")).unwrap(), "base\n");
    assert_eq!(host_mounts(&a), before, "the host's mounts changed");
    // A bisect whose test only passes at the workspace's own path.
    a.sh_ok("echo bad > sub/g");
    a.cli_ok(&["checkpoint", "-m", "bad"]);
    let test = format!("[ \"$(pwd -P)\" = \"{mp}\" ] && grep -q good {mp}/sub/g");
    let o = a.cli(&["bisect", "run", "--good", "HEAD~1", "--", "sh", "-c", &test]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}\n{}", daemon_log(&a.m.store));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["first_bad"]["message"], "bad", "{doc:#}");
}
