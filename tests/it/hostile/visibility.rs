//! Defect 4 of issue 21: a store is not a trust boundary. An agent socket sees its
//! own session's history (and its forks'), the branches it created or was given,
//! and nothing else: another session's checkpoints and branches answer
//! `not_found` exactly like ids and names that do not exist, through every op that
//! takes a ref, and `branches` does not list them.

use std::fs;
use std::path::PathBuf;

use serde_json::Value;

use super::Agent;
use crate::harness::tf_ok;

/// What the other session holds; no output the agent gets may contain it.
const SECRET: &str = "SECRET-of-the-user-3f9a1c";

/// A second session `u` of the agent's store, mounted by the user, with the secret
/// checkpointed twice and branch `private` on it.
struct Other {
    mp: PathBuf,
    /// Its checkpoint ids, oldest first.
    ids: Vec<String>,
}

fn user_on(a: &Agent, mp: &std::path::Path, args: &[&str]) -> Value {
    let mut full = vec!["--json", "-C", mp.to_str().unwrap()];
    full.extend_from_slice(args);
    serde_json::from_str(&tf_ok(&a.m.store, &full)).unwrap()
}

fn other_session(a: &Agent) -> Other {
    let mp = a.m.tmp.path().join("user-ws");
    fs::create_dir(&mp).unwrap();
    tf_ok(
        &a.m.store,
        &["mount", mp.to_str().unwrap(), "--session", "u"],
    );
    let mut ids = Vec::new();
    for i in 0..2 {
        fs::write(mp.join("secret.txt"), format!("{SECRET} {i}\n")).unwrap();
        let v = user_on(a, &mp, &["checkpoint", "-m", &format!("{SECRET} msg {i}")]);
        ids.push(v["checkpoint"]["id"].as_str().unwrap().to_string());
    }
    user_on(a, &mp, &["branch", "private"]);
    Other { mp, ids }
}

/// The agent's CLI must fail with `not_found` (exit status and code as for an id
/// that does not exist) and reveal nothing of the other session.
fn hidden(a: &Agent, o: &Other, args: &[&str]) -> (i32, String) {
    let out = a.cli(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "agent: {args:?} succeeded: {stdout}");
    for text in [&stdout, &stderr] {
        assert!(
            !text.contains(SECRET),
            "{args:?} revealed the secret: {text}"
        );
        for id in &o.ids {
            assert!(
                !text.contains(&id[..12]) || args.iter().any(|x| x.contains(&id[..12])),
                "{args:?} named checkpoint {id}: {text}"
            );
        }
    }
    // Exit status 4 and code `not_found`, as for a name nobody has.
    assert_eq!(out.status.code(), Some(4), "{args:?}: {stderr}");
    let doc: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    assert_eq!(doc["error"]["code"], "not_found", "{args:?}: {stdout}");
    (out.status.code().unwrap_or(-1), stderr.into_owned())
}

/// The branch names `branches` lists to the agent.
fn agent_branches(a: &Agent) -> Vec<String> {
    // Every session's it may see (another session's as SESSION/BRANCH), with the
    // automatic `auto/...` refs.
    a.cli_ok(&["branches", "--all", "--auto"])["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn another_sessions_history_answers_not_found() {
    let a = Agent::new();
    let o = other_session(&a);
    let mine = a.cli_ok(&["checkpoint", "-m", "the agent's own"])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The reference answer: an id nobody has.
    let nobody = if o.ids[1].starts_with("0000") || mine.starts_with("0000") {
        "1111".repeat(16)
    } else {
        "0000".repeat(16)
    };
    let (missing_status, missing_err) = hidden(&a, &o, &["show", &nobody]);
    let secret_id = &o.ids[1];
    let (status, err) = hidden(&a, &o, &["show", secret_id]);
    assert_eq!(status, missing_status);
    assert_eq!(err.replace(secret_id.as_str(), &nobody), missing_err);

    hidden(
        &a,
        &o,
        &["show", &format!("{}:secret.txt", &secret_id[..8])],
    );
    hidden(&a, &o, &["show", "u/private"]);
    hidden(&a, &o, &["show", "u/private:secret.txt"]);
    hidden(&a, &o, &["log", "u/private"]);
    hidden(&a, &o, &["log", &o.ids[0]]);
    hidden(&a, &o, &["diff", &o.ids[0], &o.ids[1], "-p"]);
    hidden(&a, &o, &["diff", "HEAD", "u/private", "-p"]);
    hidden(&a, &o, &["checkout", "u/private"]);
    hidden(&a, &o, &["checkout", &secret_id[..10]]);
    hidden(&a, &o, &["restore", "u/private", "secret.txt"]);
    hidden(&a, &o, &["branch", "stolen", "u/private"]);
    hidden(&a, &o, &["branch", "stolen2", secret_id]);
    let fork_mp = a.home.join("fork");
    hidden(
        &a,
        &o,
        &[
            "fork",
            "f1",
            "--from",
            "u/private",
            "--mount",
            fork_mp.to_str().unwrap(),
        ],
    );
    hidden(
        &a,
        &o,
        &[
            "fork",
            "f2",
            "--from",
            &secret_id[..8],
            "--mount",
            fork_mp.to_str().unwrap(),
        ],
    );
    hidden(
        &a,
        &o,
        &[
            "experiment",
            "--from",
            "u/private",
            "-c",
            "true",
            "-c",
            "false",
        ],
    );

    // Scanning id prefixes: those of the other session's ids (4 to 12 digits) and
    // random ones, in one script as the agent; none shows anything of it.
    let mut prefixes: Vec<String> = Vec::new();
    for id in &o.ids {
        for n in 4..=12 {
            prefixes.push(id[..n].to_string());
        }
    }
    let mut x: u32 = 0x9e37_79b9;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        prefixes.push(format!("{:04x}", x & 0xffff));
    }
    prefixes.retain(|p| !mine.starts_with(p.as_str()));
    let script = format!(
        "for p in {}; do \"$TF\" --json show \"$p:secret.txt\" && echo FOUND $p; \
         \"$TF\" --json log \"$p\" && echo FOUND $p; done 2>&1; true",
        prefixes.join(" ")
    );
    let out = a.sh_ok(&script);
    assert!(!out.contains(SECRET), "prefix scan revealed the secret");
    assert!(!out.contains("FOUND"), "a prefix resolved: {out}");
    for id in &o.ids {
        assert!(!out.contains(&id[12..]), "prefix scan named {id}");
    }

    // Listing shows only what is the agent's.
    let listed = agent_branches(&a);
    assert!(!listed.contains(&"u/private".to_string()), "{listed:?}");

    // Nothing moved, nothing leaked into the agent's workspace; the user's session
    // is whole and the daemon answers.
    assert!(!a.m.mp.join("secret.txt").exists());
    let head = user_on(&a, &o.mp, &["status"]);
    assert_eq!(head["head"].as_str(), Some(o.ids[1].as_str()), "{head}");
    let log = user_on(&a, &o.mp, &["log", "private"]);
    assert_eq!(
        log["checkpoints"][0]["id"].as_str(),
        Some(o.ids[1].as_str())
    );
    assert_eq!(
        fs::read_to_string(o.mp.join("secret.txt")).unwrap(),
        format!("{SECRET} 1\n")
    );
    a.assert_daemon_answers();
}

#[test]
fn the_agents_own_history_fully_works() {
    let a = Agent::new();
    let _o = other_session(&a);
    a.sh_ok("echo one > f.txt");
    let c1 = a.cli_ok(&["checkpoint", "-m", "one"])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    a.cli_ok(&["branch", "mine"]);
    a.sh_ok("echo two > f.txt");
    let c2 = a.cli_ok(&["checkpoint", "-m", "two"])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = a.cli_ok(&["show", &format!("{}:f.txt", &c1[..6])]);
    assert!(shown.to_string().contains("one"), "{shown}");
    a.cli_ok(&["show", &c2]);
    let log = a.cli_ok(&["log", "mine"]);
    assert_eq!(log["checkpoints"][0]["id"].as_str(), Some(c1.as_str()));
    a.cli_ok(&["diff", &c1[..8], &c2[..8]]);
    a.cli_ok(&["diff", "mine", "HEAD"]);
    a.cli_ok(&["restore", "mine", "f.txt"]);
    assert_eq!(fs::read_to_string(a.m.mp.join("f.txt")).unwrap(), "one\n");
    let out = a.cli_ok(&["checkout", "mine"]);
    assert_eq!(out["branch"].as_str(), Some("mine"), "{out}");
    a.cli_ok(&["checkout", &c2[..8]]);
    a.cli_ok(&["checkout", "@{-1}"]);
    a.cli_ok(&["log", &format!("{}~1", &c2[..8])]);
    // Its branches: the one it made and the ones saving its pending changes.
    let listed = agent_branches(&a);
    assert!(listed.contains(&"mine".to_string()), "{listed:?}");
    assert!(!listed.contains(&"u/private".to_string()), "{listed:?}");
    assert!(listed.iter().any(|b| b.starts_with("auto/")), "{listed:?}");
    for b in listed.iter().filter(|b| b.starts_with("auto/")) {
        a.cli_ok(&["show", b]);
    }
    // A fork of its own history, and the fork's history is its too.
    let fork_mp = a.home.join("myfork");
    a.cli_ok(&[
        "fork",
        "mine-fork",
        "--from",
        "mine",
        "--mount",
        fork_mp.to_str().unwrap(),
    ]);
    a.sh_ok(&format!("echo 'in the fork' > {}/g.txt", fork_mp.display()));
    let fc = user_on(&a, &fork_mp, &["checkpoint", "-m", "fork work"])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = a.cli_ok(&["show", &format!("{}:g.txt", &fc[..8])]);
    assert!(shown.to_string().contains("in the fork"), "{shown}");
    a.cli_ok(&["branch", "from-fork", &fc[..8]]);
    tf_ok(&a.m.store, &["umount", fork_mp.to_str().unwrap()]);
    a.assert_daemon_answers();
}

#[test]
fn a_branch_the_user_shares_is_seen_and_nothing_else() {
    let a = Agent::new();
    let o = other_session(&a);
    fs::write(o.mp.join("shared.txt"), "for the agent\n").unwrap();
    user_on(&a, &o.mp, &["branch", "handoff"]);
    fs::write(o.mp.join("later.txt"), SECRET).unwrap();
    let v = user_on(&a, &o.mp, &["checkpoint", "-m", "later, private"]);
    let later = v["checkpoint"]["id"].as_str().unwrap().to_string();
    // `handoff` names the checkpoint taken for it (the pending shared.txt).
    let handoff = user_on(&a, &o.mp, &["branches"])["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "handoff")
        .unwrap()["checkpoint"]
        .as_str()
        .unwrap()
        .to_string();
    // The user's session u's branch: the agent names it `u/handoff`.
    hidden(&a, &o, &["show", "u/handoff"]);
    // Shared by the user from outside session u (here the agent's workspace, as
    // root): it names u's branch the same way.
    let shared = user_on(&a, &a.m.mp, &["branch", "u/handoff", "--share", "s"]);
    assert_eq!(shared["shared_with"].as_str(), Some("s"), "{shared}");

    let listed = agent_branches(&a);
    assert!(listed.contains(&"u/handoff".to_string()), "{listed:?}");
    assert!(!listed.contains(&"u/private".to_string()), "{listed:?}");
    let shown = a.cli_ok(&["show", "u/handoff:shared.txt"]);
    assert!(shown.to_string().contains("for the agent"), "{shown}");
    a.cli_ok(&["show", &handoff[..8]]);
    // Its ancestors come with it (the user's earlier checkpoints)...
    a.cli_ok(&["log", "u/handoff"]);
    a.cli_ok(&[
        "fork",
        "from-shared",
        "--from",
        "u/handoff",
        "--mount",
        a.home.join("fs").to_str().unwrap(),
    ]);
    // ...but not what the user did after it, nor the other branch.
    hidden(&a, &o, &["show", &later]);
    hidden(&a, &o, &["show", &later[..8]]);
    hidden(&a, &o, &["log", "u/private"]);
    // Sharing is the user's.
    let (_, err) = a.cli_err(&["branch", "u/private", "--share", "s"]);
    assert!(
        err.contains("forbidden") || err.contains("not allowed"),
        "{err}"
    );
    hidden(&a, &o, &["show", "u/private"]);
    tf_ok(&a.m.store, &["umount", a.home.join("fs").to_str().unwrap()]);
    a.assert_daemon_answers();
}

/// `branch --share` and `limits` with bad input: a clear refusal naming what is
/// wrong, and nothing shared or changed.
#[test]
fn share_and_limits_refuse_bad_input() {
    let a = Agent::new();
    let user_err = |args: &[&str]| {
        let mut full = vec!["-C", a.m.mp.to_str().unwrap()];
        full.extend_from_slice(args);
        let o = crate::harness::tf(&a.m.store, &full);
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = user_err(&["branch", "no-such-branch", "--share", "s"]);
    assert!(e.contains("no-such-branch"), "{e}");
    user_on(&a, &a.m.mp, &["branch", "mine"]);
    let e = user_err(&["branch", "mine", "--share", "no-such-session"]);
    assert!(e.contains("no-such-session"), "{e}");
    let e = user_err(&["limits", "no_such_limit=1"]);
    assert!(e.contains("no_such_limit"), "{e}");
    let e = user_err(&["limits", "message_count=lots"]);
    assert!(e.contains("message_count"), "{e}");
    let v = user_on(&a, &a.m.mp, &["limits"]);
    assert_eq!(v["limits"]["message_count"], serde_json::json!(100_000));
    a.assert_daemon_answers();
}

/// One request sent on the agent socket by a process of the agent (uid 65534):
/// the final answer.
fn agent_request(a: &Agent, req: &Value) -> Value {
    let script = "import json, socket, sys\n\
        s = socket.socket(socket.AF_UNIX)\n\
        s.connect(sys.argv[1])\n\
        s.sendall(sys.argv[2].encode() + b'\\n')\n\
        for line in s.makefile():\n\
        \x20   if 'event' not in json.loads(line):\n\
        \x20       print(line, end='')\n\
        \x20       break\n";
    let mut c = std::process::Command::new("/usr/bin/python3");
    c.arg("-c").arg(script).arg(&a.sock).arg(req.to_string());
    super::as_agent(&mut c);
    let o = c.output().unwrap();
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no answer to {req} ({e}): {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Issue 38, defect 6: visibility comes before names. A session the agent does
/// not see, named where a ref (or a session's name) is taken, answers exactly as
/// a name nobody has: same exit status, same message. Before the fix `merge
/// --dry-run SESSION` answered `unknown checkpoint <its HEAD>`, a missing name
/// `unknown ref`; and `bisect_end` accepted a result naming a hidden checkpoint.
#[test]
fn a_hidden_session_name_answers_as_a_missing_one() {
    let a = Agent::new();
    // The hidden session `secret`, with a HEAD; `absent` (as long) is nobody's.
    let mp = a.m.tmp.path().join("secret-ws");
    fs::create_dir(&mp).unwrap();
    tf_ok(
        &a.m.store,
        &["mount", mp.to_str().unwrap(), "--session", "secret"],
    );
    fs::write(mp.join("secret.txt"), SECRET).unwrap();
    let hidden_head = user_on(&a, &mp, &["checkpoint", "-m", SECRET])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    a.sh_ok("echo mine > f.txt");
    a.cli_ok(&["checkpoint", "-m", "the agent's own"]);
    let fork_mp = a.home.join("fork");
    fs::create_dir(&fork_mp).unwrap();
    std::os::unix::fs::chown(&fork_mp, Some(super::AGENT_UID), Some(super::AGENT_UID)).unwrap();
    let verbs: &[&[&str]] = &[
        &["merge", "--dry-run", "NAME"],
        &["merge", "NAME"],
        &["merge", "--dry-run", "HEAD", "NAME"],
        &["cherry-pick", "--dry-run", "NAME"],
        &["cherry-pick", "NAME"],
        &["revert", "--dry-run", "NAME"],
        &["revert", "NAME"],
        &["checkout", "NAME"],
        &["restore", "NAME", "f.txt"],
        &["show", "NAME"],
        &["show", "NAME:secret.txt"],
        &["log", "NAME"],
        &["diff", "NAME", "HEAD"],
        &["branch", "taken", "NAME"],
        &[
            "fork",
            "f1",
            "--from",
            "NAME",
            "--mount",
            fork_mp.to_str().unwrap(),
        ],
        &["experiment", "--from", "NAME", "-c", "true", "-c", "false"],
        &["bisect", "run", "--good", "NAME", "--", "true"],
        &["session", "show", "NAME"],
    ];
    for v in verbs {
        let with =
            |name: &str| -> Vec<String> { v.iter().map(|x| x.replace("NAME", name)).collect() };
        let run = |name: &str| {
            let args = with(name);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = a.cli(&args);
            assert!(!o.status.success(), "agent: {args:?} succeeded");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(!text.contains(SECRET), "{args:?}: {text}");
            assert!(!text.contains(&hidden_head[..12]), "{args:?}: {text}");
            (o.status.code(), text.replace(name, "NAME"))
        };
        assert_eq!(run("secret"), run("absent"), "{v:?}");
    }

    // `bisect_end` checks the checkpoints of the result it records in the
    // agent's view: a hidden one is refused as a missing one is.
    let missing = "ab".repeat(32);
    let end = |good: &str| {
        let point =
            |id: &str| serde_json::json!({"id": id, "short": &id[..12], "message": "", "time": 0});
        let req = serde_json::json!({"v": 1, "op": "bisect_end", "id": "abc123",
            "result": {"command": ["true"], "first_bad": null, "last_good": null,
                "good": point(good), "bad": point(good), "candidates": 1, "jobs": 1,
                "rounds": 1, "wall_ms": 1, "steps": []}});
        let r = agent_request(&a, &req);
        assert_eq!(r["ok"], false, "{r}");
        r.to_string().replace(good, "ID")
    };
    assert_eq!(end(&hidden_head), end(&missing));

    // A session of the agent's own lineage still merges by name.
    a.cli_ok(&["fork", "mine", "--mount", fork_mp.to_str().unwrap()]);
    fs::write(fork_mp.join("g.txt"), "from the fork\n").unwrap();
    user_on(&a, &fork_mp, &["checkpoint", "-m", "fork work"]);
    let plan = a.cli_ok(&["merge", "--dry-run", "mine"]);
    assert_eq!(plan["status"], "planned", "{plan}");
    tf_ok(&a.m.store, &["umount", fork_mp.to_str().unwrap()]);
    a.assert_daemon_answers();
}
