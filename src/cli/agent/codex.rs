//! Codex's side of `treefork agent install`: its `config.toml` (edited with
//! `toml_edit`, so the user's comments and layout stay) takes treefork's MCP
//! server, its `notify` program when none is set, and the trust of treefork's
//! hooks.
//!
//! Codex runs a hook from `hooks.json` only when `config.toml` holds
//! `[hooks.state."<hooks.json realpath>:<event>:<group>:<hook>"]` with
//! `trusted_hash = "sha256:<hex>"`, the SHA-256 of the hook's group as compact
//! JSON with sorted keys: `{"event_name", "hooks": [{"async", "command",
//! "timeout", "type"}], "matcher"}` (event in snake case, the timeout's default
//! 600 written out, no matcher for events that take none). Untrusted hooks are
//! skipped silently, so the install writes these entries and the CLI test runs
//! Codex without `--dangerously-bypass-hook-trust`.
//!
//! Invariants: pure (text in, text out); only keys treefork owns are written or
//! removed (`mcp_servers.treefork`, `notify` when it is treefork's, the
//! `hooks.state` keys of the hooks it placed, moved when a removal shifts another
//! group's index).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toml_edit::{DocumentMut, Item, Table, value};

use super::entries::is_ours;

/// Codex's name of `event` in trust keys (`PreToolUse` → `pre_tool_use`).
pub fn snake(event: &str) -> String {
    let mut s = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

/// Events whose groups Codex matches without a matcher.
fn takes_matcher(event: &str) -> bool {
    !matches!(event, "UserPromptSubmit" | "Stop")
}

/// The `trusted_hash` of the hook group `g` under `event`.
pub fn trust_hash(event: &str, g: &Value) -> String {
    let hooks: Vec<Value> = g
        .get("hooks")
        .and_then(Value::as_array)
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    json!({
                        "type": h.get("type").cloned().unwrap_or(json!("command")),
                        "command": h.get("command").cloned().unwrap_or(json!("")),
                        "timeout": h.get("timeout").cloned().unwrap_or(json!(600)),
                        "async": h.get("async").cloned().unwrap_or(json!(false)),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let mut id = json!({"event_name": snake(event), "hooks": hooks});
    if takes_matcher(event)
        && let Some(m) = g.get("matcher")
    {
        id["matcher"] = m.clone();
    }
    // serde_json's map is sorted: this is the compact sorted-key form.
    let bytes = serde_json::to_vec(&id).unwrap_or_default();
    format!("sha256:{:x}", Sha256::digest(&bytes))
}

/// The trust key of hook `h` of group `gi` under `event` in `file`.
pub fn trust_key(file: &str, event: &str, gi: usize, hi: usize) -> String {
    format!("{file}:{}:{gi}:{hi}", snake(event))
}

/// The table at `key` of `t`, made (implicit) when absent or not a table.
fn table_at<'a>(t: &'a mut Table, key: &str) -> &'a mut Table {
    let item = t.entry(key).or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    if item.as_table().is_none() {
        *item = Item::Table(Table::new());
    }
    item.as_table_mut().expect("a table")
}

fn state(doc: &mut DocumentMut) -> &mut Table {
    table_at(table_at(doc.as_table_mut(), "hooks"), "state")
}

/// Record trust for the hooks placed: `(key, hash)` pairs.
pub fn trust(doc: &mut DocumentMut, keys: &[(String, String)]) {
    let st = state(doc);
    for (k, h) in keys {
        let mut t = Table::new();
        t.insert("trusted_hash", value(h.as_str()));
        st.insert(k, Item::Table(t));
    }
}

/// Forget trust of the groups removed from `file` (`gone`: per event, the old
/// indices) and move the keys of later groups down to their new index.
pub fn untrust(doc: &mut DocumentMut, file: &str, gone: &[(String, Vec<usize>)]) {
    let Some(st) = doc
        .get_mut("hooks")
        .and_then(|h| h.as_table_mut())
        .and_then(|h| h.get_mut("state"))
        .and_then(Item::as_table_mut)
    else {
        return;
    };
    for (event, idx) in gone {
        let prefix = format!("{file}:{}:", snake(event));
        let mut keys: Vec<(usize, String, String)> = st
            .iter()
            .filter_map(|(k, _)| {
                let rest = k.strip_prefix(&prefix)?;
                let (gi, hi) = rest.split_once(':')?;
                Some((gi.parse().ok()?, hi.to_string(), k.to_string()))
            })
            .collect();
        keys.sort();
        for (gi, hi, k) in keys {
            let item = st.remove(&k);
            if idx.contains(&gi) {
                continue;
            }
            let shift = idx.iter().filter(|&&i| i < gi).count();
            if let Some(item) = item {
                st.insert(&format!("{prefix}{}:{hi}", gi - shift), item);
            }
        }
    }
}

/// Set (or with `None` remove) `[mcp_servers.treefork]`.
pub fn mcp(doc: &mut DocumentMut, exe: Option<&str>) {
    match exe {
        Some(exe) => {
            let servers = table_at(doc.as_table_mut(), "mcp_servers");
            let mut t = Table::new();
            t.insert("command", value(exe));
            let mut args = toml_edit::Array::new();
            args.push("mcp");
            t.insert("args", value(args));
            // Codex asks before each MCP tool call otherwise, and headless
            // (`codex exec`) nobody answers.
            t.insert("default_tools_approval_mode", value("approve"));
            servers.insert("treefork", Item::Table(t));
        }
        None => {
            if let Some(t) = doc.get_mut("mcp_servers").and_then(Item::as_table_mut) {
                t.remove("treefork");
            }
        }
    }
}

/// treefork as Codex's `notify` program, unless another program is set (Codex
/// takes one); `None` removes it when it is treefork's. Whether it is treefork's
/// after the call.
pub fn notify(doc: &mut DocumentMut, argv: Option<Vec<String>>) -> bool {
    let current: Option<Vec<String>> = doc.get("notify").and_then(Item::as_array).map(|a| {
        a.iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    });
    let ours = current
        .as_ref()
        .is_some_and(|c| c.len() >= 2 && is_ours(&format!("{} {}", c[0], c[1])));
    match argv {
        Some(argv) if current.is_none() || ours => {
            let mut a = toml_edit::Array::new();
            for s in argv {
                a.push(s);
            }
            doc.insert("notify", value(a));
            true
        }
        Some(_) => false,
        None => {
            if ours {
                doc.remove("notify");
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_names() {
        assert_eq!(snake("PreToolUse"), "pre_tool_use");
        assert_eq!(snake("UserPromptSubmit"), "user_prompt_submit");
        assert_eq!(snake("Stop"), "stop");
    }

    #[test]
    fn hash_of_a_group_is_of_its_sorted_compact_form() {
        let g = json!({"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]});
        let id = br#"{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"x","timeout":600,"type":"command"}],"matcher":"Bash"}"#;
        assert_eq!(
            trust_hash("PreToolUse", &g),
            format!("sha256:{:x}", Sha256::digest(id))
        );
        // No matcher for an event that takes none.
        let stop = json!({"matcher": "ignored", "hooks": [{"type": "command", "command": "x"}]});
        let id = br#"{"event_name":"stop","hooks":[{"async":false,"command":"x","timeout":600,"type":"command"}]}"#;
        assert_eq!(
            trust_hash("Stop", &stop),
            format!("sha256:{:x}", Sha256::digest(id))
        );
    }

    #[test]
    fn config_edits_keep_the_users_text_and_round_trip() {
        let text = "# my settings\nmodel = \"gpt-5.5\" # pinned\n\n[hooks.state.\"/h.json:pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:theirs\"\n\n[hooks.state.\"/h.json:pre_tool_use:2:0\"]\ntrusted_hash = \"sha256:later\"\n";
        let mut doc: DocumentMut = text.parse().unwrap();
        mcp(&mut doc, Some("/usr/bin/treefork"));
        assert!(notify(
            &mut doc,
            Some(vec!["/usr/bin/treefork".into(), "hook".into()])
        ));
        trust(
            &mut doc,
            &[(
                trust_key("/h.json", "PreToolUse", 1, 0),
                "sha256:ours".into(),
            )],
        );
        let s = doc.to_string();
        assert!(
            s.starts_with("# my settings\nmodel = \"gpt-5.5\" # pinned\n"),
            "{s}"
        );
        assert!(s.contains("[mcp_servers.treefork]"), "{s}");
        // Uninstall: group 1 goes, group 2 becomes 1.
        mcp(&mut doc, None);
        notify(&mut doc, None);
        untrust(&mut doc, "/h.json", &[("PreToolUse".into(), vec![1])]);
        let s = doc.to_string();
        assert!(!s.contains("ours") && !s.contains("notify"), "{s}");
        assert!(s.contains("\"/h.json:pre_tool_use:0:0\""), "{s}");
        assert!(
            s.contains("\"/h.json:pre_tool_use:1:0\"]\ntrusted_hash = \"sha256:later\""),
            "{s}"
        );
    }

    #[test]
    fn another_notify_program_is_left_alone() {
        let mut doc: DocumentMut = "notify = [\"my-notifier\"]\n".parse().unwrap();
        assert!(!notify(
            &mut doc,
            Some(vec!["/t/treefork".into(), "hook".into()])
        ));
        notify(&mut doc, None);
        assert_eq!(doc.to_string(), "notify = [\"my-notifier\"]\n");
    }
}
