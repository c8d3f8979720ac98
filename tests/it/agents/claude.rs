//! Claude Code (the real CLI, headless) in a treefork mount with the hooks of
//! `treefork agent install claude --user`.

use std::path::Path;

use serde_json::json;

use super::server::{ModelServer, check_turn, cli, run_ok, seed, timed, tool_records};
use crate::harness::{Mount, bin};

/// `claude -p PROMPT` in `dir` with HOME at `home`, against `server`.
fn claude(dir: &Path, home: &Path, server: &ModelServer, prompt: &str) -> std::process::Command {
    let mut c = timed(&cli("claude"));
    c.args([
        "-p",
        prompt,
        "--output-format",
        "json",
        "--dangerously-skip-permissions",
    ])
    .current_dir(dir)
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .env("HOME", home)
    .env("IS_SANDBOX", "1")
    .env(
        "ANTHROPIC_BASE_URL",
        format!("http://127.0.0.1:{}", server.port),
    )
    .env("ANTHROPIC_API_KEY", "test-key")
    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    .env("DISABLE_TELEMETRY", "1")
    .env("DISABLE_AUTOUPDATER", "1")
    .env("TREEFORK_HOOK_LOG", dir.parent().unwrap().join("hook.log"));
    c
}

/// HOME for Claude Code with treefork's hooks installed (`--user`).
fn home_with_hooks(m: &Mount) -> std::path::PathBuf {
    let home = m.tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let o = std::process::Command::new(bin())
        .args(["agent", "install", "claude", "--user"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    home
}

#[test]
fn claude_codes_bash_calls_are_recorded_undone_and_rewound() {
    let m = Mount::new();
    seed(&m);
    let home = home_with_hooks(&m);
    let script = json!({"turns": [{"match": "tidy", "steps": [
        {"tools": [{"name": "Bash", "input": {"command": "sed -i s/one/two/ a.txt", "description": "edit"}}]},
        {"tools": [{"name": "Bash", "input": {"command": "rm gone.txt", "description": "remove"}}]},
        {"text": "tidied up"}
    ]}]});
    let server = ModelServer::start(m.tmp.path(), &script);
    run_ok(
        claude(&m.mp, &home, &server, "tidy the files"),
        "claude -p",
        &server,
    );
    check_turn(
        &m,
        ("Bash", "sed -i"),
        ("Bash", "rm gone.txt"),
        "tidy the files",
        "tidied up",
    );
}

#[test]
fn claude_codes_write_and_parallel_subagents_are_recorded() {
    let m = Mount::new();
    seed(&m);
    let home = home_with_hooks(&m);
    // Two subagents at once (they share the working directory), each writing a
    // file through the shell; then a Write of the main agent.
    let agent = |d: &str, p: &str| json!({"name": "Agent", "input": {"description": d, "prompt": p, "subagent_type": "general-purpose"}});
    let script = json!({"turns": [
        {"match": "make x", "steps": [
            {"tools": [{"name": "Bash", "input": {"command": "sleep 1; echo x > x.txt", "description": "x"}}]},
            {"text": "x made"}]},
        {"match": "make y", "steps": [
            {"tools": [{"name": "Bash", "input": {"command": "sleep 1; echo y > y.txt", "description": "y"}}]},
            {"text": "y made"}]},
        {"match": "build", "steps": [
            {"tools": [agent("x", "make x"), agent("y", "make y")]},
            {"tools": [{"name": "Write", "input": {"file_path": m.p("w.txt").to_str().unwrap(), "content": "w\n"}}]},
            {"text": "built"}]}
    ]});
    let server = ModelServer::start(m.tmp.path(), &script);
    run_ok(
        claude(&m.mp, &home, &server, "build it"),
        "claude -p",
        &server,
    );
    for f in ["x.txt", "y.txt", "w.txt"] {
        assert!(
            m.p(f).exists(),
            "{f} was not written:\n{}",
            server.requests()
        );
    }
    let recs = tool_records(&m);
    // Every file is in a recorded call's changes; the Write is its own record.
    for f in ["x.txt", "y.txt", "w.txt"] {
        let line = format!("added {f}");
        assert!(
            recs.iter().any(|r| r.3.contains(&line)),
            "{f}: {recs:?}\n{}",
            server.requests()
        );
    }
    // The subagents ran in the background past the main agent's turn: their
    // calls ended after its Stop and are recorded with their outcome.
    assert_eq!(recs.len(), 3, "{recs:?}");
    assert!(recs.iter().all(|r| r.2 == Some(true)), "{recs:?}");
    let st = super::server::ws_json(&m, &["status"]);
    assert_eq!(
        st["changes"],
        serde_json::json!([]),
        "nothing left unrecorded"
    );
}

#[test]
fn agent_run_mounts_a_session_of_the_repository_and_unmounts_at_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = crate::lifecycle::git_repo(tmp.path());
    let store = tmp.path().join("store");
    let mp = tmp.path().join("repo.claude");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let script = json!({"turns": [{"match": "tidy", "steps": [
        {"tools": [{"name": "Bash", "input": {"command": "rm README", "description": "rm"}}]},
        {"text": "tidied"}
    ]}]});
    let server = ModelServer::start(tmp.path(), &script);
    let claude_dir = cli("claude").parent().unwrap().to_path_buf();
    // The environment of `claude()`, through `treefork agent run`.
    let c = claude(&repo, &home, &server, "unused");
    let mut run = std::process::Command::new("timeout");
    run.arg("120")
        .arg(bin())
        .arg("--store")
        .arg(&store)
        .args(["agent", "run", "claude", "--"])
        .args(["-p", "tidy up", "--dangerously-skip-permissions"])
        .current_dir(&repo)
        .env_clear()
        .envs(
            c.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env(
            "PATH",
            format!(
                "{}:{}",
                claude_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
    run_ok(run, "treefork agent run claude", &server);
    assert!(
        crate::harness::fuse_mounts_under(tmp.path()).is_empty(),
        "unmounted at exit"
    );
    assert!(
        repo.join("README").exists(),
        "the repository itself is untouched"
    );
    // The session keeps what the run did, recorded.
    let m = crate::harness::Mount::at(tempfile::tempdir().unwrap(), store, mp, "repo-claude");
    m.mount();
    assert!(!m.p("README").exists());
    let recs = tool_records(&m);
    assert!(
        recs.iter()
            .any(|r| r.1 == "rm README" && r.3 == vec!["deleted README".to_string()]),
        "{recs:?}"
    );
}

#[test]
fn a_subagents_isolated_worktree_is_a_fork_that_merges_back() {
    let m = Mount::new();
    seed(&m);
    let home = m.tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let o = std::process::Command::new(bin())
        .args(["agent", "install", "claude", "--user", "--worktrees"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = json!({"turns": [
        {"match": "make z", "steps": [
            {"tools": [{"name": "Bash", "input": {"command": "echo z > z.txt", "description": "z"}}]},
            {"text": "z made"}]},
        {"match": "isolate", "steps": [
            {"tools": [{"name": "Agent", "input": {"description": "z", "prompt": "make z",
                "subagent_type": "general-purpose", "isolation": "worktree"}}]},
            {"text": "isolated"}]}
    ]});
    let server = ModelServer::start(m.tmp.path(), &script);
    run_ok(
        claude(&m.mp, &home, &server, "isolate it"),
        "claude -p",
        &server,
    );
    assert!(
        !m.p("z.txt").exists(),
        "the subagent worked in its own worktree"
    );
    let sessions = super::server::ws_json(&m, &["sessions"]);
    let fork = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["name"].as_str().filter(|n| n.starts_with("s-")))
        .unwrap_or_else(|| panic!("no fork session: {sessions}\n{}", server.requests()))
        .to_string();
    let fork_mp = m.tmp.path().join(format!("mnt.{}", &fork[2..]));
    let z = std::fs::read_to_string(fork_mp.join("z.txt"));
    crate::harness::ws_ok(&m, &["merge", &fork]);
    crate::harness::umount_ok(&m.store, &fork_mp);
    assert_eq!(z.unwrap(), "z\n", "the fork holds the subagent's file");
    assert_eq!(
        std::fs::read_to_string(m.p("z.txt")).unwrap(),
        "z\n",
        "merged back"
    );
}
