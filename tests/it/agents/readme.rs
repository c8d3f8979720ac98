//! README "Use with Claude Code / Codex": its commands, run as written (with `~`
//! a fresh HOME, `claude` the pinned CLI against the scripted model server).

use std::path::Path;
use std::process::Command;

use serde_json::json;

use super::server::{ModelServer, agents_dir};
use crate::harness::bin;

/// The section's shell block, a command per line.
fn readme_commands() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let sec = readme
        .split("## Use with Claude Code / Codex")
        .nth(1)
        .expect("the README has the section");
    let block = sec
        .split("```sh\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    block.lines().map(str::to_string).collect()
}

#[test]
fn the_readme_recipe_for_claude_code_works_as_written() {
    let cmds = readme_commands();
    assert!(cmds.len() >= 5, "{cmds:?}");
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join("src")).unwrap();
    let repo = crate::lifecycle::git_repo(&home.join("src"));
    assert_eq!(repo, home.join("src/repo"));
    std::fs::write(repo.join("junk.txt"), "junk\n").unwrap();
    std::fs::create_dir_all(home.join("ws")).unwrap();
    let script = json!({"turns": [{"match": "failing test", "steps": [
        {"tools": [{"name": "Bash", "input": {"command": "echo fixed >> README", "description": "fix"}}]},
        {"tools": [{"name": "Bash", "input": {"command": "rm junk.txt", "description": "tidy"}}]},
        {"text": "fixed"}
    ]}]});
    let server = ModelServer::start(tmp.path(), &script);
    let store = tmp.path().join("store");
    let tf_dir = Path::new(bin()).parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}:{}",
        tf_dir.display(),
        agents_dir().join("node_modules/.bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |line: &str| -> String {
        let o = Command::new("bash")
            .args(["-c", line])
            .current_dir(&home)
            .env("HOME", &home)
            .env("PATH", &path)
            .env("TREEFORK_STORE", &store)
            .env_remove("TREEFORK_SOCKET")
            .env("IS_SANDBOX", "1")
            .env(
                "ANTHROPIC_BASE_URL",
                format!("http://127.0.0.1:{}", server.port),
            )
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("TREEFORK_HOOK_LOG", tmp.path().join("hook.log"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{line}: {}\n{out}\n{}",
            String::from_utf8_lossy(&o.stderr),
            server.requests()
        );
        out
    };
    let ws = home.join("ws");
    let _unmount = Unmount(store.clone(), ws.clone());
    // One shell, as a user types them (the `cd` holds for what follows); after
    // each command a line marks where its output ends.
    let script: String = cmds
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{l}\necho '--- {i}'\n"))
        .collect();
    let out = run(&format!("set -euo pipefail\n{script}"));
    let history = out
        .split("--- ")
        .find(|o| o.contains("rm junk.txt"))
        .unwrap_or_else(|| panic!("history lists the rm: {out}\n{}", server.requests()));
    assert!(history.contains("echo fixed"), "{out}");
    assert!(out.contains("undid"), "{out}");
    assert_eq!(
        std::fs::read_to_string(ws.join("README")).unwrap(),
        "hello\n"
    );
    assert!(ws.join("junk.txt").exists());
}

/// Unmounts the README's workspace whatever the test did.
struct Unmount(std::path::PathBuf, std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new(bin())
            .arg("--store")
            .arg(&self.0)
            .arg("umount")
            .arg(&self.1)
            .output();
    }
}
