//! Defect 5 of issue 21: an agent must not move a branch another session stands
//! on. Undo and op restore move branches by compare-and-swap on the value the
//! reverted operation left; a branch another live session has checked out is not
//! attached by a checkout (HEAD is detached at it, with a note); a session whose
//! branch was moved anyway (while it was not mounted) is told in every answer; and
//! a checkout that flips `.git/HEAD` in the tree is no `git commit`.

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

/// The checkpoint branch `name` names (through the user's view of the store).
fn branch_at(a: &Agent, name: &str) -> Option<String> {
    let v = a.user_ok(&["branches"]);
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
    let a = Agent::new();
    a.sh_ok("echo one > f");
    let c1 = id(&a.cli_ok(&["checkpoint", "-m", "one"]));
    // The agent creates `main` (an operation of its session that moved a branch).
    a.cli_ok(&["branch", "main"]);
    assert_eq!(branch_at(&a, "main").as_deref(), Some(c1.as_str()));
    // The user works on main in a session of their own and advances it.
    let u = User::mount(&a);
    u.ok(&["checkout", "main"]);
    u.write("g", "user's work");
    let c2 = id(&u.ok(&["checkpoint", "-m", "user"]));
    assert_eq!(branch_at(&a, "main").as_deref(), Some(c2.as_str()));
    // The agent undoes its branch creation: main no longer holds what that
    // operation left, so the undo is refused and main stays the user's.
    let (code, err) = a.cli_err(&["undo"]);
    assert_eq!(code, 5, "conflict exit status: {err}");
    assert!(
        err.contains("branch main") && err.contains(&c2[..12]) && err.contains(&c1[..12]),
        "the refusal names the branch and both values: {err}"
    );
    assert_eq!(branch_at(&a, "main").as_deref(), Some(c2.as_str()));
    // op restore of the state the branch operation left (main at c1) is
    // refused the same way.
    let ops = a.cli_ok(&["op", "log"]);
    let branch_op = ops["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "branch")
        .map(|o| o["seq"].as_u64().unwrap())
        .unwrap();
    let (code, err) = a.cli_err(&["op", "restore", &branch_op.to_string()]);
    assert_eq!(code, 5, "{err}");
    assert_eq!(branch_at(&a, "main").as_deref(), Some(c2.as_str()));
    // The user's session is still on main and its next checkpoint moves it.
    let st = u.ok(&["status"]);
    assert_eq!(st["branch"], "main", "{st}");
    assert!(st.get("branch_moved").is_none(), "{st}");
    u.write("g", "more");
    let c3 = id(&u.ok(&["checkpoint", "-m", "user 2"]));
    assert_eq!(branch_at(&a, "main").as_deref(), Some(c3.as_str()));
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
    let head = branch_at(&a, "main").unwrap();
    // The agent checks out the user's branch: it sees the tree, detached.
    let v = a.cli_ok(&["checkout", "main"]);
    assert_eq!(v["detached"], true, "{v}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("session u"), "{v}");
    assert_eq!(a.sh_ok("cat g"), "user's work");
    // Its checkpoints do not move main.
    a.sh_ok("echo agent > g");
    let mine = id(&a.cli_ok(&["checkpoint", "-m", "agent"]));
    assert_ne!(mine, head);
    assert_eq!(branch_at(&a, "main"), Some(head.clone()));
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
    let user_head = branch_at(&a, "main").unwrap();
    // While the user's session is not mounted, the agent takes main and moves it.
    u.umount();
    let v = a.cli_ok(&["checkout", "main"]);
    assert_eq!(v["branch"], "main", "{v}");
    a.sh_ok("echo agent > g");
    let moved = id(&a.cli_ok(&["checkpoint", "-m", "agent"]));
    assert_eq!(branch_at(&a, "main"), Some(moved.clone()));
    a.cli_ok(&["checkout", &moved]);
    // Back in the user's session: status says main moved under it.
    u.remount();
    let st = u.ok(&["status"]);
    let n = &st["branch_moved"];
    assert_eq!(n["branch"], "main", "{st}");
    assert_eq!(n["to"], moved.as_str(), "{st}");
    assert_eq!(n["head"], user_head.as_str(), "{st}");
    assert_eq!(n["detached"], false, "{st}");
    // The user's next checkpoint detaches HEAD (main stays the agent's) and says so,
    // in its answer and on standard error.
    u.write("g", "user 2");
    let (v, err) = u.run(&["checkpoint", "-m", "user 2"]);
    assert_eq!(v["branch"], Value::Null, "{v}");
    assert_eq!(v["branch_moved"]["detached"], true, "{v}");
    assert!(
        err.contains("warning") && err.contains("branch main"),
        "stderr: {err}"
    );
    assert_eq!(branch_at(&a, "main"), Some(moved.clone()));
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
