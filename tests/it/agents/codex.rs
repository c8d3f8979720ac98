//! Codex (the real CLI, `codex exec`) in a treefork mount with the hooks of
//! `treefork agent install codex --user`: trusted by the install (the run does
//! not pass `--dangerously-bypass-hook-trust`; untrusted hooks are skipped
//! silently, and the checks below would fail).

use std::path::{Path, PathBuf};

use serde_json::json;

use super::server::{ModelServer, check_turn, cli, run_ok, seed, timed};
use crate::harness::{Mount, bin};

/// CODEX_HOME pointing Codex at `server`, with treefork installed (`--user`).
fn codex_home(m: &Mount, server: &ModelServer) -> PathBuf {
    let home = m.tmp.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    let config = format!(
        "# the test's provider\nmodel = \"gpt-5.5\"\nmodel_provider = \"fake\"\napproval_policy = \"never\"\ncheck_for_update_on_startup = false\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n[analytics]\nenabled = false\n",
        server.port
    );
    std::fs::write(home.join("config.toml"), &config).unwrap();
    let o = std::process::Command::new(bin())
        .args(["agent", "install", "codex", "--user"])
        .env("CODEX_HOME", &home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = std::fs::read_to_string(home.join("config.toml")).unwrap();
    for line in config.lines() {
        assert!(
            after.contains(line),
            "the user's line {line:?} is kept:\n{after}"
        );
    }
    assert!(after.contains("trusted_hash = \"sha256:"), "{after}");
    home
}

fn codex(dir: &Path, home: &Path, prompt: &str) -> std::process::Command {
    let mut c = timed(&cli("codex"));
    c.args([
        "exec",
        "--skip-git-repo-check",
        "-s",
        "workspace-write",
        prompt,
    ])
    .current_dir(dir)
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .env("HOME", home)
    .env("CODEX_HOME", home)
    .env("FAKE_KEY", "test-key")
    .env("TREEFORK_HOOK_LOG", dir.parent().unwrap().join("hook.log"));
    c
}

#[test]
fn codex_patch_and_shell_calls_are_recorded_undone_and_rewound() {
    let m = Mount::new();
    seed(&m);
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n*** End Patch\n";
    let script = json!({"turns": [{"match": "tidy", "steps": [
        {"tools": [{"name": "apply_patch", "input": patch}]},
        {"tools": [{"name": "exec_command", "input": {"cmd": "rm gone.txt"}}]},
        {"text": "tidied up"}
    ]}]});
    let server = ModelServer::start(m.tmp.path(), &script);
    let home = codex_home(&m, &server);
    run_ok(codex(&m.mp, &home, "tidy the files"), "codex exec", &server);
    check_turn(
        &m,
        ("apply_patch", "patch a.txt"),
        ("Bash", "rm gone.txt"),
        "tidy the files",
        "tidied up",
    );
}
