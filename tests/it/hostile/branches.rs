//! Defect 5 of issue 21: an agent must not move a branch another session stands
//! on. Branch names are per session (the user's session `u`'s `main` is `u/main`
//! to the agent); a checkout of another session's branch detaches HEAD, so the
//! agent's checkpoints never move it, and an agent socket may not delete it. Only
//! the user (the store's owner) can still change a session's branch from outside
//! it: undo and op restore then move it only by compare-and-swap on the value the
//! reverted operation left; a session whose branch was changed so (while it was
//! not mounted) is told in every answer; and a checkout that flips `.git/HEAD` in
//! the tree is no `git commit`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{AGENT_UID, Agent};
use crate::harness::{daemon_log, tf, tf_ok};

/// The user's own session `u`, mounted beside the agent's in the same store.
struct User<'a> {
    a: &'a Agent,
    mp: PathBuf,
}

impl<'a> User<'a> {
    fn mount(a: &'a Agent) -> User<'a> {
        let mp = a.m.tmp.path().join("user-ws");
        std::fs::create_dir_all(&mp).unwrap();
        tf_ok(
            &a.m.store,
            &["mount", mp.to_str().unwrap(), "--session", "u"],
        );
        // Owned by the agent's uid, so a checkout of the user's tree by the agent
        // leaves it a workspace it can write in.
        std::os::unix::fs::chown(&mp, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
        User { a, mp }
    }

    fn remount(&self) {
        tf_ok(
            &self.a.m.store,
            &["mount", self.mp.to_str().unwrap(), "--session", "u"],
        );
    }

    fn umount(&self) {
        tf_ok(&self.a.m.store, &["umount", self.mp.to_str().unwrap()]);
    }

    /// The user's CLI (`--json`) in its workspace: the JSON answer and stderr.
    fn run(&self, args: &[&str]) -> (Value, String) {
        let mut full = vec!["--json", "-C", self.mp.to_str().unwrap()];
        full.extend_from_slice(args);
        let o = tf(&self.a.m.store, &full);
        assert!(
            o.status.success(),
            "user: treefork {args:?}: {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            daemon_log(&self.a.m.store)
        );
        (
            serde_json::from_slice(&o.stdout).unwrap(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> Value {
        self.run(args).0
    }

    fn write(&self, name: &str, data: &str) {
        let p = self.mp.join(name);
        crate::harness::write_synced(&p, data.as_bytes());
        std::os::unix::fs::chown(&p, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    }
}

/// The checkpoint branch `name` names (through the user's view of the store, in
/// the agent's session: the user's session's branches are `u/NAME`).
fn branch_at(a: &Agent, name: &str) -> Option<String> {
    let v = a.user_ok(&["branches", "--all"]);
    v["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .map(|b| b["checkpoint"].as_str().unwrap().to_string())
}

fn id(v: &Value) -> String {
    v["checkpoint"]["id"].as_str().unwrap().to_string()
}

#[test]
fn undo_does_not_move_a_branch_the_user_advanced() {
    // (Branches are per session, so the user cannot advance the agent's branch
    // from a session of their own; what they can do to it is delete it. The
    // compare-and-swap is the same.)
    let a = Agent::new();
    a.sh_ok("echo one > f");
    let c1 = id(&a.cli_ok(&["checkpoint", "-m", "one"]));
    // The agent starts `main` and moves it (operations of its session that moved
    // a branch).
    a.cli_ok(&["checkout", "-b", "main"]);
    a.sh_ok("echo two > f");
    let c2 = id(&a.cli_ok(&["checkpoint", "-m", "two"]));
    assert_eq!(branch_at(&a, "main").as_deref(), Some(c2.as_str()));
    // The user, in a session of their own, deletes the agent's main (`s/main`).
    let u = User::mount(&a);
    u.ok(&["branch", "-d", "s/main"]);
    assert_eq!(branch_at(&a, "main"), None);
    // The agent undoes its checkpoint: main no longer holds what that operation
    // left, so the undo is refused and main is not made again.
    let (code, err) = a.cli_err(&["undo"]);
    assert_eq!(code, 5, "conflict exit status: {err}");
    assert!(
        err.contains("branch main") && err.contains(&c2[..12]),
        "the refusal names the branch and the value it left: {err}"
    );
    assert!(!err.contains("s:main"), "no stored name: {err}");
    assert_eq!(branch_at(&a, "main"), None);
    // op restore of the state the checkout left (main at c1) is refused the
    // same way.
    let ops = a.cli_ok(&["op", "log"]);
    let checkout_op = ops["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "checkout")
        .map(|o| o["seq"].as_u64().unwrap())
        .unwrap();
    let (code, err) = a.cli_err(&["op", "restore", &checkout_op.to_string()]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains(&c1[..12]) || err.contains(&c2[..12]), "{err}");
    assert_eq!(branch_at(&a, "main"), None);
    // And the agent cannot do the same to the user's branch it was given.
    u.write("g", "user's work");
    let uc = id(&u.ok(&["checkpoint", "-m", "user"]));
    u.ok(&["checkout", "-b", "main"]);
    u.ok(&["branch", "main", "--share", "s"]);
    let (_, err) = a.cli_err(&["branch", "-d", "u/main"]);
    assert!(err.contains("not allowed"), "{err}");
    assert_eq!(branch_at(&a, "u/main").as_deref(), Some(uc.as_str()));
    let st = u.ok(&["status"]);
    assert_eq!(st["branch"], "main", "{st}");
    assert!(st.get("branch_moved").is_none(), "{st}");
    a.assert_daemon_answers();
}

#[test]
fn checkout_of_a_branch_another_session_is_on_detaches_the_agent() {
    let a = Agent::new();
    let u = User::mount(&a);
    u.write("g", "user's work");
    u.ok(&["checkpoint", "-m", "user"]);
    let c = u.ok(&["checkout", "-b", "main"]);
    assert_eq!(c["branch"], "main", "{c}");
    // The user gives the branch to the agent (else it does not see it at all).
    u.ok(&["branch", "main", "--share", "s"]);
    let head = branch_at(&a, "u/main").unwrap();
    // The agent's own `main` is not the user's: there is none.
    let (code, _) = a.cli_err(&["checkout", "main"]);
    assert_eq!(code, 4);
    // The agent checks out the user's branch: it sees the tree, detached.
    let v = a.cli_ok(&["checkout", "u/main"]);
    assert_eq!(v["detached"], true, "{v}");
    assert_eq!(v["branch"], Value::Null, "{v}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("session u"), "{v}");
    assert_eq!(a.sh_ok("cat g"), "user's work");
    // Its checkpoints do not move main.
    a.sh_ok("echo agent > g");
    let mine = id(&a.cli_ok(&["checkpoint", "-m", "agent"]));
    assert_ne!(mine, head);
    assert_eq!(branch_at(&a, "u/main"), Some(head.clone()));
    // The user's session stays on main, untold of anything (nothing happened).
    let st = u.ok(&["status"]);
    assert_eq!(st["branch"], "main", "{st}");
    assert!(st.get("branch_moved").is_none(), "{st}");
    u.write("g", "user 2");
    let (v, err) = u.run(&["checkpoint", "-m", "user 2"]);
    assert_eq!(v["branch"], "main", "{v}");
    assert!(!err.contains("warning"), "{err}");
    a.assert_daemon_answers();
}

#[test]
fn a_session_whose_branch_was_moved_is_told() {
    let a = Agent::new();
    let u = User::mount(&a);
    u.write("g", "user's work");
    u.ok(&["checkpoint", "-m", "user"]);
    u.ok(&["checkout", "-b", "main"]);
    u.ok(&["branch", "main", "--share", "s"]);
    let user_head = branch_at(&a, "u/main").unwrap();
    // While the user's session is not mounted, the agent tries to take main: its
    // checkout detaches (main is session u's to move), so its checkpoint leaves
    // main where it was...
    u.umount();
    let v = a.cli_ok(&["checkout", "u/main"]);
    assert_eq!(v["branch"], Value::Null, "{v}");
    a.sh_ok("echo agent > g");
    let mine = id(&a.cli_ok(&["checkpoint", "-m", "agent"]));
    assert_ne!(mine, user_head);
    assert_eq!(branch_at(&a, "u/main"), Some(user_head.clone()));
    // ...and it may not delete it.
    let (_, err) = a.cli_err(&["branch", "-d", "u/main"]);
    assert!(err.contains("not allowed"), "{err}");
    assert_eq!(branch_at(&a, "u/main"), Some(user_head.clone()));
    // The store's owner deletes it from outside session u (here from the agent's
    // workspace, as root).
    a.user_ok(&["branch", "-d", "u/main"]);
    assert_eq!(branch_at(&a, "u/main"), None);
    // Back in the user's session: status says main was deleted under it.
    u.remount();
    let st = u.ok(&["status"]);
    let n = &st["branch_moved"];
    assert_eq!(n["branch"], "main", "{st}");
    assert_eq!(n["to"], Value::Null, "{st}");
    assert_eq!(n["head"], user_head.as_str(), "{st}");
    assert_eq!(n["detached"], false, "{st}");
    // The user's next checkpoint detaches HEAD (main is not made again behind the
    // user's back) and says so, in its answer and on standard error.
    u.write("g", "user 2");
    let (v, err) = u.run(&["checkpoint", "-m", "user 2"]);
    assert_eq!(v["branch"], Value::Null, "{v}");
    assert_eq!(v["branch_moved"]["detached"], true, "{v}");
    assert!(
        err.contains("warning") && err.contains("branch main"),
        "stderr: {err}"
    );
    assert_eq!(branch_at(&a, "u/main"), None);
    // And every later answer, until the user sets HEAD again.
    let (v, err) = u.run(&["log"]);
    assert_eq!(v["branch_moved"]["branch"], "main", "{v}");
    assert!(err.contains("branch main"), "{err}");
    let human = tf(&a.m.store, &["-C", u.mp.to_str().unwrap(), "status"]);
    let out = String::from_utf8_lossy(&human.stdout);
    assert!(out.contains("detached from branch main"), "{out}");
    let (v, _) = u.run(&["checkout", "-b", "mine"]);
    assert!(v.get("branch_moved").is_none(), "{v}");
    let st = u.ok(&["status"]);
    assert!(st.get("branch_moved").is_none(), "{st}");
    a.assert_daemon_answers();
}

#[test]
fn checkout_that_flips_git_head_is_no_git_commit() {
    let a = Agent::new();
    let git = |args: &str| {
        a.sh_ok(&format!(
            "git -c user.name=t -c user.email=t@example.com -c init.defaultBranch=main {args}"
        ))
    };
    // Every git-commit checkpoint of the session, wherever HEAD is now: the
    // daemon's checkpoint operations with that trigger.
    let commits = || {
        a.cli_ok(&["op", "log", "-n", "1000"])["operations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["kind"] == "checkpoint" && o["request"]["trigger"] == "git-commit")
            .count()
    };
    let wait_for = |n: usize| {
        let t0 = Instant::now();
        while commits() < n {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "no git-commit checkpoint\n{}",
                daemon_log(&a.m.store)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // The daemon's baseline look comes within 50 ms of the mount.
    std::thread::sleep(Duration::from_millis(300));
    git("init -q");
    a.sh_ok("echo 1 > a");
    git("add a");
    git("commit -qm one");
    wait_for(1);
    // Branch `one` names this state (the session stays detached, so the
    // git-commit checkpoint below does not move it).
    a.cli_ok(&["branch", "one"]);
    a.sh_ok("echo 2 > a");
    git("commit -qam two");
    wait_for(2);
    // Back to `one`: the tree's .git/HEAD names commit one again, but nobody
    // committed. A write afterwards makes the trigger look.
    a.cli_ok(&["checkout", "one"]);
    a.sh_ok("echo x > unrelated");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(commits(), 2, "a checkout made a git-commit checkpoint");
    // A real commit after it still counts.
    a.sh_ok("echo 3 > a");
    git("commit -qam three");
    wait_for(3);
    a.assert_daemon_answers();
}
