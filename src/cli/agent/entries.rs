//! treefork's hook entries in a runtime's JSON configuration (Claude Code's
//! `settings.json`, Codex's `hooks.json`, Gemini CLI's `settings.json`, which share
//! one shape: `{"hooks": {EVENT: [{"matcher"?, "hooks": [{"type": "command",
//! "command", ...}]}]}}`), and its MCP server entry (`mcpServers.treefork`).
//!
//! Invariants: pure (values in, values out); [`merge`] replaces treefork's own
//! groups in place and appends missing ones, never touching another group;
//! [`remove`] takes out only treefork's groups (and what that leaves empty);
//! a group is treefork's when one of its commands runs `treefork hook`
//! ([`is_ours`]).

use serde_json::{Map, Value, json};

use super::payload::Runtime;

/// One event's group: the event, its matcher (none: every call).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub event: &'static str,
    pub matcher: Option<&'static str>,
}

/// The events treefork hooks in `rt`, with their matchers.
pub fn entries(rt: Runtime) -> Vec<Entry> {
    let e = |event, matcher| Entry { event, matcher };
    match rt {
        Runtime::Claude => {
            let tools = Some("Bash|Write|Edit|MultiEdit|NotebookEdit");
            vec![
                e("SessionStart", None),
                e("UserPromptSubmit", None),
                e("PreToolUse", tools),
                e("PostToolUse", tools),
                e("PostToolUseFailure", tools),
                e("Stop", None),
                e("SubagentStop", None),
            ]
        }
        Runtime::Codex => {
            let tools = Some("Bash|apply_patch");
            vec![
                e("SessionStart", None),
                e("UserPromptSubmit", None),
                e("PreToolUse", tools),
                e("PostToolUse", tools),
                e("Stop", None),
            ]
        }
        Runtime::Gemini => {
            let tools = Some("run_shell_command|write_file|replace");
            vec![
                e("SessionStart", None),
                e("BeforeAgent", None),
                e("BeforeTool", tools),
                e("AfterTool", tools),
                e("AfterAgent", None),
            ]
        }
    }
}

/// Claude Code's worktree events: with these, a subagent's isolated worktree (and
/// `claude --worktree`) is a treefork fork. Opt-in (`agent install --worktrees`,
/// and `agent run`): outside a workspace the hook cannot make one, and the runtime
/// then has no worktree at all.
pub fn worktree_entries() -> Vec<Entry> {
    vec![
        Entry {
            event: "WorktreeCreate",
            matcher: None,
        },
        Entry {
            event: "WorktreeRemove",
            matcher: None,
        },
    ]
}

/// The hook command of `rt`: `EXE hook --runtime RT [--strict]`.
pub fn command(exe: &str, rt: Runtime, strict: bool) -> String {
    let mut c = format!("{} hook --runtime {}", shell_word(exe), rt.name());
    if strict {
        c.push_str(" --strict");
    }
    c
}

/// `s` as one shell word.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Whether hook command `c` is treefork's: its first word names a `treefork`
/// binary and its second is `hook`.
pub fn is_ours(c: &str) -> bool {
    let Some(w) = shlex::split(c) else {
        return false;
    };
    let name = w.first().and_then(|e| e.rsplit('/').next()).unwrap_or("");
    name.starts_with("treefork") && w.get(1).map(String::as_str) == Some("hook")
}

fn group_is_ours(g: &Value) -> bool {
    g.get("hooks").and_then(Value::as_array).is_some_and(|hs| {
        hs.iter().any(|h| {
            h.get("command")
                .and_then(Value::as_str)
                .is_some_and(is_ours)
        })
    })
}

/// The group treefork puts under `e`.
pub fn group(e: &Entry, command: &str, timeout: Option<u64>) -> Value {
    let mut h = json!({"type": "command", "command": command});
    if let Some(t) = timeout {
        h["timeout"] = json!(t);
    }
    let mut g = Map::new();
    if let Some(m) = e.matcher {
        g.insert("matcher".into(), json!(m));
    }
    g.insert("hooks".into(), json!([h]));
    Value::Object(g)
}

/// Where each event's group went: `(event, index in its array)`.
pub type Placed = Vec<(&'static str, usize)>;

/// Put treefork's `groups` (one per entry) into `doc`: an existing treefork
/// group of an event is replaced in place, else the group is appended; treefork's
/// groups of other events (an earlier install's) go.
pub fn merge(doc: &mut Value, groups: &[(Entry, Value)]) -> Result<Placed, String> {
    let hooks = object_at(doc, "hooks")?;
    let mut emptied = Vec::new();
    for (event, arr) in hooks.iter_mut() {
        if groups.iter().any(|(e, _)| e.event == event) {
            continue;
        }
        if let Some(arr) = arr.as_array_mut() {
            let had = arr.len();
            arr.retain(|g| !group_is_ours(g));
            if arr.is_empty() && had > 0 {
                emptied.push(event.clone());
            }
        }
    }
    for e in emptied {
        hooks.remove(&e);
    }
    let mut placed = Vec::new();
    for (e, g) in groups {
        let arr = hooks
            .entry(e.event)
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(arr) = arr.as_array_mut() else {
            return Err(format!("hooks.{} is not a list", e.event));
        };
        match arr.iter().position(group_is_ours) {
            Some(i) => {
                arr[i] = g.clone();
                // A second treefork group of the event (an older install) goes.
                let mut j = arr.len();
                while j > i + 1 {
                    j -= 1;
                    if group_is_ours(&arr[j]) {
                        arr.remove(j);
                    }
                }
                placed.push((e.event, i));
            }
            None => {
                arr.push(g.clone());
                placed.push((e.event, arr.len() - 1));
            }
        }
    }
    Ok(placed)
}

/// Per event, the indices of the groups removed (before removal).
pub type Removed = Vec<(String, Vec<usize>)>;

/// Take treefork's groups out of `doc`; returns what went, for a runtime that
/// keys state by index (Codex's trust).
pub fn remove(doc: &mut Value) -> Removed {
    let mut gone = Vec::new();
    let Some(hooks) = doc.get_mut("hooks").and_then(Value::as_object_mut) else {
        return gone;
    };
    let mut emptied = Vec::new();
    for (event, arr) in hooks.iter_mut() {
        let Some(arr) = arr.as_array_mut() else {
            continue;
        };
        let idx: Vec<usize> = (0..arr.len()).filter(|&i| group_is_ours(&arr[i])).collect();
        if idx.is_empty() {
            continue;
        }
        for &i in idx.iter().rev() {
            arr.remove(i);
        }
        if arr.is_empty() {
            emptied.push(event.clone());
        }
        gone.push((event.clone(), idx));
    }
    for e in emptied {
        hooks.remove(&e);
    }
    if hooks.is_empty()
        && let Some(o) = doc.as_object_mut()
    {
        o.remove("hooks");
    }
    gone
}

/// Set `mcpServers.treefork` in `doc` (or remove it, with `None`).
pub fn mcp(doc: &mut Value, server: Option<Value>) -> Result<(), String> {
    match server {
        Some(s) => {
            object_at(doc, "mcpServers")?.insert("treefork".into(), s);
        }
        None => {
            if let Some(o) = doc.get_mut("mcpServers").and_then(Value::as_object_mut) {
                o.remove("treefork");
                if o.is_empty() {
                    doc.as_object_mut().map(|d| d.remove("mcpServers"));
                }
            }
        }
    }
    Ok(())
}

/// The object under `key` of `doc` (made when absent).
fn object_at<'a>(doc: &'a mut Value, key: &str) -> Result<&'a mut Map<String, Value>, String> {
    let Some(o) = doc.as_object_mut() else {
        return Err("the configuration is not a JSON object".into());
    };
    o.entry(key)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| format!("{key} is not an object"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(rt: Runtime, exe: &str) -> Vec<(Entry, Value)> {
        let c = command(exe, rt, false);
        entries(rt)
            .into_iter()
            .map(|e| {
                let g = group(&e, &c, None);
                (e, g)
            })
            .collect()
    }

    #[test]
    fn install_reinstall_uninstall_keep_other_hooks() {
        let theirs = json!({
            "model": "x",
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}],
                "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]
            }
        });
        let mut doc = theirs.clone();
        let placed = merge(&mut doc, &ours(Runtime::Claude, "/usr/bin/treefork")).unwrap();
        assert!(placed.contains(&("PreToolUse", 1)));
        assert!(placed.contains(&("Stop", 0)));
        let once = doc.clone();
        // An install with an extra event, then one without it: it goes again.
        let mut more = ours(Runtime::Claude, "/usr/bin/treefork");
        more.extend(worktree_entries().into_iter().map(|e| {
            let g = group(&e, "/usr/bin/treefork hook --runtime claude", None);
            (e, g)
        }));
        merge(&mut doc, &more).unwrap();
        assert!(doc["hooks"]["WorktreeCreate"].is_array());
        merge(&mut doc, &ours(Runtime::Claude, "/usr/bin/treefork")).unwrap();
        assert_eq!(doc, once);
        // Reinstall (another binary path): in place, nothing doubled.
        merge(&mut doc, &ours(Runtime::Claude, "/opt/tf dir/treefork")).unwrap();
        assert_eq!(doc["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(
            doc["hooks"]["PreToolUse"][1]["hooks"][0]["command"],
            "'/opt/tf dir/treefork' hook --runtime claude"
        );
        assert_ne!(doc, once);
        let gone = remove(&mut doc);
        assert!(gone.contains(&("PreToolUse".to_string(), vec![1])));
        assert_eq!(doc, theirs);
    }

    #[test]
    fn recognizes_only_its_own_commands() {
        assert!(is_ours("/usr/local/bin/treefork hook --runtime codex"));
        assert!(is_ours("'/a b/treefork' hook --runtime claude --strict"));
        assert!(!is_ours("treefork-audit.sh"));
        assert!(!is_ours("/usr/bin/treefork checkpoint"));
        assert!(!is_ours("echo treefork hook"));
    }

    #[test]
    fn mcp_entry_round_trips() {
        let mut doc = json!({"mcpServers": {"other": {"command": "x"}}});
        let before = doc.clone();
        mcp(&mut doc, Some(json!({"command": "/t", "args": ["mcp"]}))).unwrap();
        assert_eq!(doc["mcpServers"]["treefork"]["args"][0], "mcp");
        mcp(&mut doc, None).unwrap();
        assert_eq!(doc, before);
        let mut empty = json!({});
        mcp(&mut empty, Some(json!({}))).unwrap();
        mcp(&mut empty, None).unwrap();
        assert_eq!(empty, json!({}));
    }

    #[test]
    fn a_malformed_configuration_is_an_error() {
        let mut doc = json!({"hooks": {"PreToolUse": {"not": "a list"}}});
        assert!(merge(&mut doc, &ours(Runtime::Codex, "/t")).is_err());
        let mut doc = json!([1]);
        assert!(merge(&mut doc, &ours(Runtime::Codex, "/t")).is_err());
    }
}
