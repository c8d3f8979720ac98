//! Issue 21, defects 2 and 6: records an agent can grow past what a flush can
//! store (extended attributes of one file, the hard-link table), and a root peer on
//! an agent socket (a container's root) asking for user mount rights.

use std::fs;
use std::process::{Command, Output};

use super::{AGENT_UID, Agent, host_mounts};
use crate::harness::{bin, daemon_log};

/// Run `script` with `/usr/bin/python3 -c` as the agent in its workspace; its
/// standard output (it must succeed).
fn py(agent: &Agent, script: &str) -> String {
    agent.sh_ok(&format!("/usr/bin/python3 -c '{script}'"))
}

/// The user checkpoints, the agent checkpoints, the session unmounts and mounts
/// again (its flushed state read back from the store): every step must succeed.
fn saveable(agent: &Agent) {
    agent.cli_ok(&["checkpoint", "-m", "agent after the attack"]);
    agent.user_ok(&["checkpoint", "-m", "user after the attack"]);
    agent.m.remount();
}

/// Defect 2: `setxattr` beyond the per-inode budget is refused (`ENOSPC`, as ext4
/// with a full xattr block), so the file's record never outgrows the store's
/// object limit and the session stays saveable. Before the fix every value of up to
/// 64 KiB was accepted: 1,100 of them made the node over 64 MiB and every later
/// flush (checkpoint, umount) failed.
#[test]
fn xattrs_past_the_inode_budget_are_refused_and_the_session_stays_saveable() {
    let agent = Agent::new();
    let out = py(
        &agent,
        r#"
import os, errno
open("big", "w").write("payload\n")
n, err = 0, None
for i in range(1100):
    try:
        os.setxattr("big", "user.a%04d" % i, bytes([i % 251]) * 65536)
        n += 1
    except OSError as e:
        err = e.errno
        break
# Small attributes too: the count and byte budget hold for them.
m, err2 = 0, None
open("small", "w").write("x")
for i in range(5000):
    try:
        os.setxattr("small", "user.s%05d" % i, b"v" * 8)
        m += 1
    except OSError as e:
        err2 = e.errno
        break
# Replacing a value by a smaller one is always possible.
os.setxattr("big", "user.a0000", b"tiny")
print(n, err, m, err2)
"#,
    );
    let f: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(f.len(), 4, "{out}");
    let (n, err): (usize, &str) = (f[0].parse().unwrap(), f[1]);
    assert!(
        n < 1100 && err == libc::ENOSPC.to_string(),
        "{n} xattrs of 64 KiB accepted on one file (refusal errno {err}): unbounded"
    );
    let (m, err2): (usize, &str) = (f[2].parse().unwrap(), f[3]);
    assert!(
        m < 5000 && err2 == libc::ENOSPC.to_string(),
        "{m} small xattrs accepted on one file (refusal errno {err2})"
    );
    // Another agent write after the refusals, then everything is saved.
    fs::write(agent.m.p("after.txt"), "written after the attack\n").unwrap();
    saveable(&agent);
    assert_eq!(
        fs::read_to_string(agent.m.p("after.txt")).unwrap(),
        "written after the attack\n"
    );
    let got = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(r#"import os,sys; print(len(os.listxattr(sys.argv[1])), os.getxattr(sys.argv[1], "user.a0000"))"#)
        .arg(agent.m.p("big"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got.stdout).trim(),
        format!("{n} b'tiny'"),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    agent.assert_daemon_answers();
}

/// Defect 2, the root node: records of hard-linked inodes live in the root's link
/// table, so many hard-linked files each carrying a full attribute budget would
/// make the root node outgrow the object limit. A `link` (or `setxattr`) past the
/// link table's budget is refused with `ENOSPC`; the session stays saveable.
#[test]
fn hard_links_past_the_link_table_budget_are_refused_and_the_session_stays_saveable() {
    let agent = Agent::new();
    let out = py(
        &agent,
        r#"
import os
os.mkdir("d")
n, err = 0, None
for i in range(800):
    p = "d/f%04d" % i
    open(p, "w").write(str(i))
    # 94 KiB of attributes: within the budget of one inode (and accepted before).
    os.setxattr(p, "user.a", b"a" * 65536)
    os.setxattr(p, "user.b", b"b" * 30000)
    try:
        os.link(p, p + ".link")
        n += 1
    except OSError as e:
        err = e.errno
        break
print(n, err)
"#,
    );
    let f: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(f.len(), 2, "{out}");
    let (n, err): (usize, &str) = (f[0].parse().unwrap(), f[1]);
    assert!(
        n < 800 && err == libc::ENOSPC.to_string(),
        "{n} hard-linked files of 94 KiB of xattrs accepted (refusal errno {err}): the root node outgrows the object limit"
    );
    fs::write(agent.m.p("after.txt"), "written after the attack\n").unwrap();
    saveable(&agent);
    assert_eq!(
        fs::read_to_string(agent.m.p("after.txt")).unwrap(),
        "written after the attack\n"
    );
    let last = format!("d/f{:04}.link", n - 1);
    assert_eq!(
        fs::read_to_string(agent.m.p(&last)).unwrap(),
        (n - 1).to_string()
    );
    agent.assert_daemon_answers();
}

/// The CLI run as root (the test's uid) on the agent socket.
fn as_root_on_agent_socket(agent: &Agent, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("--json")
        .arg("--socket")
        .arg(&agent.sock)
        .args(args)
        .current_dir(&agent.m.mp)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .expect("run treefork")
}

/// Defect 6: a peer with uid 0 on an agent socket (a container's root) is an agent:
/// it may fork only onto a directory the socket's agent uid owns. Before the fix it
/// got user mount rights and mounted a fork over any directory (`/root/.ssh`).
#[test]
fn a_root_peer_on_an_agent_socket_forks_only_onto_the_agents_directories() {
    let agent = Agent::new();
    let before = host_mounts();
    let victim = agent.m.tmp.path().join("root-secrets");
    fs::create_dir(&victim).unwrap();
    fs::write(victim.join("id_ed25519"), "secret").unwrap();
    // The mountpoint must be empty: the attack aims at an empty root-owned
    // directory (an empty one is enough to shadow what lives below it later).
    let empty = victim.join("sub");
    fs::create_dir(&empty).unwrap();
    for target in [&empty, &agent.m.tmp.path().join("root-owned-new")] {
        let o =
            as_root_on_agent_socket(&agent, &["fork", "f", "--mount", target.to_str().unwrap()]);
        let mounted = treefork::daemon::is_mountpoint(target);
        if mounted {
            treefork::daemon::detach(target);
        }
        assert!(
            !o.status.success() && !mounted,
            "a root peer on the agent socket forked onto {} (mounted: {mounted}): {}{}",
            target.display(),
            String::from_utf8_lossy(&o.stdout),
            daemon_log(&agent.m.store)
        );
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains(&format!("must be a directory owned by uid {AGENT_UID}")),
            "{e}"
        );
    }
    assert_eq!(
        fs::read_to_string(victim.join("id_ed25519")).unwrap(),
        "secret"
    );
    // The agent rule, not a refusal of every fork: a directory the agent owns works.
    let own = agent.home.join("fork");
    let o = as_root_on_agent_socket(&agent, &["fork", "g", "--mount", own.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(treefork::daemon::is_mountpoint(&own));
    agent.user_ok(&["umount", own.to_str().unwrap()]);
    assert_eq!(host_mounts(), before);
    agent.assert_daemon_answers();
}
