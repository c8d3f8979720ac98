//! `treefork agent install`: install, reinstall and uninstall round-trip on
//! configurations that already hold other hooks and servers; `--dry-run` writes
//! nothing.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::bin;

fn install(args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut c = Command::new(bin());
    c.args(["agent", "install"]).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "install {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn claude_project_install_round_trips_beside_other_hooks() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    std::fs::create_dir_all(d.path().join(".claude")).unwrap();
    let settings = json!({
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}]}
    });
    let mcp = json!({"mcpServers": {"other": {"command": "other-server"}}});
    let sp = d.path().join(".claude/settings.json");
    let mp = d.path().join(".mcp.json");
    std::fs::write(&sp, settings.to_string()).unwrap();
    std::fs::write(&mp, mcp.to_string()).unwrap();

    let dry = install(&["claude", "--project", dir, "--dry-run"], &[]);
    assert!(dry.contains("would install into"), "{dry}");
    assert_eq!(read_json(&sp), settings, "a dry run writes nothing");

    install(&["claude", "--project", dir], &[]);
    let once = read_json(&sp);
    let pre = once["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "{once}");
    assert_eq!(pre[0], settings["hooks"]["PreToolUse"][0]);
    assert!(
        pre[1]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .ends_with("hook --runtime claude")
    );
    for e in [
        "UserPromptSubmit",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
        "SubagentStop",
    ] {
        assert_eq!(once["hooks"][e].as_array().unwrap().len(), 1, "{e}: {once}");
    }
    assert_eq!(
        read_json(&mp)["mcpServers"]["treefork"]["args"],
        json!(["mcp"])
    );
    assert_eq!(
        read_json(&mp)["mcpServers"]["other"],
        mcp["mcpServers"]["other"]
    );

    install(&["claude", "--project", dir], &[]);
    assert_eq!(read_json(&sp), once, "a reinstall changes nothing");

    install(&["claude", "--project", dir, "--uninstall"], &[]);
    assert_eq!(read_json(&sp), settings);
    assert_eq!(read_json(&mp), mcp);
}

#[test]
fn codex_install_round_trips_and_keeps_the_users_toml() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path();
    let hooks = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}]}});
    let config = "# mine\nmodel = \"gpt-5.5\"  # pinned\nnotify = [\"my-notifier\"]\n\n[hooks.state.\"KEEP:pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:theirs\"\n";
    std::fs::write(home.join("hooks.json"), hooks.to_string()).unwrap();
    std::fs::write(home.join("config.toml"), config).unwrap();
    let env = [("CODEX_HOME", home)];
    let out = install(&["codex", "--user"], &env);
    assert!(out.contains("notify program"), "{out}");
    let toml = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(toml.starts_with(config), "{toml}");
    assert!(toml.contains("[mcp_servers.treefork]"), "{toml}");
    let real = home.join("hooks.json").canonicalize().unwrap();
    let key = format!("\"{}:pre_tool_use:1:0\"", real.display());
    assert!(toml.contains(&key), "{toml}");
    let h = read_json(&home.join("hooks.json"));
    assert_eq!(h["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
    install(&["codex", "--user"], &env);
    assert_eq!(
        std::fs::read_to_string(home.join("config.toml")).unwrap(),
        toml
    );
    install(&["codex", "--user", "--uninstall"], &env);
    assert_eq!(read_json(&home.join("hooks.json")), hooks);
    assert_eq!(
        std::fs::read_to_string(home.join("config.toml")).unwrap(),
        config
    );
}

#[test]
fn gemini_install_round_trips() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    install(&["gemini", "--project", dir], &[]);
    let s = read_json(&d.path().join(".gemini/settings.json"));
    assert!(
        s["hooks"]["BeforeTool"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .ends_with("hook --runtime gemini")
    );
    assert_eq!(s["mcpServers"]["treefork"]["args"], json!(["mcp"]));
    install(&["gemini", "--project", dir, "--uninstall"], &[]);
    assert_eq!(
        read_json(&d.path().join(".gemini/settings.json")),
        json!({})
    );
}
