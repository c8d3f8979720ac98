//! What an agent runtime's hook says, read from its JSON on stdin: Claude Code,
//! Codex and Gemini CLI send the same kind of document under different event and
//! field names; [`parse`] turns each into one [`Event`].
//!
//! Invariants: pure (no I/O); a tool is [`Event::PreTool`]/[`Event::PostTool`] only
//! when it can write ([`writes`]): read-only calls cost nothing; a call without an
//! id from the runtime gets one from its tool name and input, the same for its
//! begin and its end.

use std::path::PathBuf;

use serde_json::Value;

/// The runtimes `treefork hook` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    Claude,
    Codex,
    Gemini,
}

impl Runtime {
    /// Its name in records (`claude`, `codex`, `gemini`).
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Claude => "claude",
            Runtime::Codex => "codex",
            Runtime::Gemini => "gemini",
        }
    }
}

/// One hook invocation, normalized.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    /// The runtime's own session id.
    pub session_id: Option<String>,
    /// The runtime's working directory.
    pub cwd: Option<PathBuf>,
    /// The subagent the event is of (Claude Code's `agent_id`); none: the main
    /// agent.
    pub agent: Option<String>,
    pub event: Event,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A session started (or resumed).
    SessionStart,
    /// The user submitted a prompt.
    Prompt(String),
    /// A tool that can write is about to run.
    PreTool {
        call: String,
        tool: String,
        summary: String,
    },
    /// That tool ran.
    PostTool {
        call: String,
        ok: bool,
        error: Option<String>,
    },
    /// The turn ended, with the assistant's last message if the runtime sent it.
    Stop(Option<String>),
    /// A subagent's turn ended.
    SubagentStop,
    /// Claude Code asks for an isolated worktree named `name`.
    WorktreeCreate(String),
    /// Claude Code removes the worktree at `path`.
    WorktreeRemove(PathBuf),
    /// Anything else (a read-only tool, an event treefork has nothing to do for).
    Ignored(String),
}

/// Tools that only read (by name, any runtime), and other tools whose own calls
/// are recorded separately (a subagent's tool calls fire their own hooks).
const READ_ONLY: &[&str] = &[
    // Claude Code
    "Read",
    "Grep",
    "Glob",
    "LS",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "TodoRead",
    "Task",
    "Agent",
    "ToolSearch",
    "NotebookRead",
    "BashOutput",
    "KillShell",
    "KillBash",
    "ExitPlanMode",
    "EnterPlanMode",
    "AskUserQuestion",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
    "Skill",
    "SlashCommand",
    // Codex
    "view_image",
    "update_plan",
    "tool_search",
    // Gemini CLI (packages/core/src/tools/definitions/base-declarations.ts)
    "read_file",
    "read_many_files",
    "glob",
    "search_file_content",
    "grep",
    "grep_search",
    "list_directory",
    "google_web_search",
    "web_fetch",
    "save_memory",
    "write_todos",
    "get_internal_docs",
    "activate_skill",
    "ask_user",
    "enter_plan_mode",
    "exit_plan_mode",
    "update_topic",
    "complete_task",
    "read_mcp_resource",
    "list_mcp_resources",
    "invoke_agent",
];

/// Whether a call of `tool` can change the workspace. treefork's own MCP tools
/// record themselves (Claude Code and Codex name them `mcp__treefork__TOOL`,
/// Gemini CLI `mcp_treefork_TOOL`).
pub fn writes(tool: &str) -> bool {
    !READ_ONLY.contains(&tool)
        && !tool.starts_with("mcp__treefork__")
        && !tool.starts_with("mcp_treefork_")
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Read one hook document of `rt`.
pub fn parse(rt: Runtime, v: &Value) -> Result<Payload, String> {
    let name = str_of(v, "hook_event_name")
        .ok_or("the hook's JSON has no hook_event_name: is this a hook of the runtime named?")?;
    let event = match name.as_str() {
        "SessionStart" => Event::SessionStart,
        "UserPromptSubmit" | "BeforeAgent" => prompt(str_of(v, "prompt").unwrap_or_default()),
        "PreToolUse" | "BeforeTool" => pre_tool(v),
        "PostToolUse" | "AfterTool" => post_tool(rt, v, false),
        "PostToolUseFailure" => post_tool(rt, v, true),
        "Stop" => Event::Stop(str_of(v, "last_assistant_message")),
        "AfterAgent" => Event::Stop(str_of(v, "prompt_response")),
        "SubagentStop" => Event::SubagentStop,
        "WorktreeCreate" => match str_of(v, "name") {
            Some(n) => Event::WorktreeCreate(n),
            None => return Err("WorktreeCreate without a name".into()),
        },
        "WorktreeRemove" => match str_of(v, "worktree_path").or_else(|| str_of(v, "path")) {
            Some(p) => Event::WorktreeRemove(PathBuf::from(p)),
            None => return Err("WorktreeRemove without a worktree_path".into()),
        },
        other => Event::Ignored(other.to_string()),
    };
    Ok(Payload {
        session_id: str_of(v, "session_id"),
        cwd: str_of(v, "cwd").map(PathBuf::from),
        agent: str_of(v, "agent_id"),
        event,
    })
}

/// A prompt, unless the runtime wrote it itself (Claude Code tells the main
/// agent that a background task ended through a `<task-notification>` prompt).
fn prompt(text: String) -> Event {
    if text.trim_start().starts_with("<task-notification>") {
        return Event::Ignored("a runtime's task notification".into());
    }
    Event::Prompt(text)
}

fn tool_name(v: &Value) -> String {
    str_of(v, "tool_name").unwrap_or_else(|| "tool".into())
}

/// The runtime's id of the call, else one made of the tool and its input (a
/// Gemini call has none; its begin and end carry the same input).
fn call_id(v: &Value) -> String {
    if let Some(id) = str_of(v, "tool_use_id").or_else(|| str_of(v, "tool_call_id")) {
        return id;
    }
    let input = v
        .get("tool_input")
        .map(Value::to_string)
        .unwrap_or_default();
    let h = blake3::hash(format!("{}\0{input}", tool_name(v)).as_bytes());
    format!("input-{}", &h.to_hex()[..16])
}

fn pre_tool(v: &Value) -> Event {
    let tool = tool_name(v);
    if !writes(&tool) {
        return Event::Ignored(format!("read-only tool {tool}"));
    }
    let input = v.get("tool_input").cloned().unwrap_or(Value::Null);
    Event::PreTool {
        call: call_id(v),
        summary: summary(&tool, &input),
        tool,
    }
}

/// What a call was asked to do, in a line: the command, the file, the files a
/// patch touches; else the input as JSON.
pub fn summary(tool: &str, input: &Value) -> String {
    let field = |k: &str| input.get(k).and_then(Value::as_str);
    let patch = field("command")
        .or_else(|| field("patch"))
        .or_else(|| field("input"))
        .filter(|c| c.trim_start().starts_with("*** Begin Patch"));
    if let Some(p) = patch {
        let files: Vec<&str> = p
            .lines()
            .filter_map(|l| {
                ["*** Update File: ", "*** Add File: ", "*** Delete File: "]
                    .iter()
                    .find_map(|pre| l.strip_prefix(pre))
            })
            .collect();
        return format!("patch {}", files.join(" "));
    }
    if let Some(c) = field("command") {
        return c.to_string();
    }
    for k in ["file_path", "notebook_path", "path", "absolute_path"] {
        if let Some(p) = field(k) {
            return p.to_string();
        }
    }
    let _ = tool;
    input.to_string()
}

fn post_tool(rt: Runtime, v: &Value, failed: bool) -> Event {
    let tool = tool_name(v);
    if !writes(&tool) {
        return Event::Ignored(format!("read-only tool {tool}"));
    }
    let resp = v.get("tool_response").unwrap_or(&Value::Null);
    let error = if failed {
        Some(
            str_of(v, "error")
                .or_else(|| resp.as_str().map(str::to_string))
                .unwrap_or_else(|| "the tool failed".into()),
        )
    } else {
        response_error(rt, resp)
    };
    Event::PostTool {
        call: call_id(v),
        ok: error.is_none(),
        error,
    }
}

/// The error a tool's response reports, if any: Claude Code's `interrupted` or
/// `error`, Codex's `Exit code: N` (N ≠ 0), Gemini's `error`.
fn response_error(rt: Runtime, resp: &Value) -> Option<String> {
    if let Some(s) = resp.as_str() {
        let code = s
            .lines()
            .take(4)
            .find_map(|l| l.trim().strip_prefix("Exit code: "))
            .and_then(|c| c.trim().parse::<i64>().ok());
        return match code {
            Some(c) if c != 0 => Some(format!("exit code {c}")),
            _ => None,
        };
    }
    if resp.get("interrupted").and_then(Value::as_bool) == Some(true) {
        return Some("interrupted".into());
    }
    match resp.get("error") {
        Some(Value::String(e)) if !e.is_empty() => Some(e.clone()),
        Some(Value::Object(o)) => Some(
            o.get("message")
                .and_then(Value::as_str)
                .unwrap_or("the tool failed")
                .to_string(),
        ),
        _ => {
            let _ = rt;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ev(rt: Runtime, v: Value) -> Event {
        parse(rt, &v).unwrap().event
    }

    #[test]
    fn claude_bash_begin_and_end() {
        let pre = json!({"session_id":"s1","cwd":"/w","hook_event_name":"PreToolUse",
            "tool_name":"Bash","tool_input":{"command":"rm f"},"tool_use_id":"toolu_1"});
        let p = parse(Runtime::Claude, &pre).unwrap();
        assert_eq!(p.session_id.as_deref(), Some("s1"));
        assert_eq!(p.cwd, Some(PathBuf::from("/w")));
        assert_eq!(
            p.event,
            Event::PreTool {
                call: "toolu_1".into(),
                tool: "Bash".into(),
                summary: "rm f".into()
            }
        );
        let post = json!({"hook_event_name":"PostToolUse","tool_name":"Bash","tool_use_id":"toolu_1",
            "tool_response":{"stdout":"","stderr":"","interrupted":false}});
        assert_eq!(
            ev(Runtime::Claude, post),
            Event::PostTool {
                call: "toolu_1".into(),
                ok: true,
                error: None
            }
        );
        let failed = json!({"hook_event_name":"PostToolUseFailure","tool_name":"Bash",
            "tool_use_id":"toolu_1","error":"Exit code 1"});
        assert_eq!(
            ev(Runtime::Claude, failed),
            Event::PostTool {
                call: "toolu_1".into(),
                ok: false,
                error: Some("Exit code 1".into())
            }
        );
    }

    #[test]
    fn read_only_tools_cost_nothing() {
        for t in [
            "Read",
            "Grep",
            "Agent",
            "mcp__treefork__checkpoint",
            "read_file",
        ] {
            let v = json!({"hook_event_name":"PreToolUse","tool_name":t,"tool_input":{}});
            assert!(matches!(ev(Runtime::Claude, v), Event::Ignored(_)), "{t}");
        }
        assert!(writes("Write") && writes("apply_patch") && writes("mcp__other__x"));
    }

    #[test]
    fn codex_patch_and_exit_code() {
        let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** Add File: b\n+z\n*** End Patch";
        let v = json!({"hook_event_name":"PreToolUse","tool_name":"apply_patch",
            "tool_input":{"command":patch},"tool_use_id":"call_1"});
        let Event::PreTool { summary, .. } = ev(Runtime::Codex, v) else {
            panic!()
        };
        assert_eq!(summary, "patch a.txt b");
        let v = json!({"hook_event_name":"PostToolUse","tool_name":"Bash","tool_use_id":"call_2",
            "tool_response":"Exit code: 2\nWall time: 0.1 seconds\nOutput:\n"});
        assert_eq!(
            ev(Runtime::Codex, v),
            Event::PostTool {
                call: "call_2".into(),
                ok: false,
                error: Some("exit code 2".into())
            }
        );
    }

    #[test]
    fn gemini_calls_without_ids_match_by_input() {
        let input = json!({"file_path":"/w/a","content":"x"});
        let pre =
            json!({"hook_event_name":"BeforeTool","tool_name":"write_file","tool_input":input});
        let post = json!({"hook_event_name":"AfterTool","tool_name":"write_file","tool_input":input,
            "tool_response":{"llmContent":"ok","returnDisplay":"ok"}});
        let (
            Event::PreTool {
                call: a, summary, ..
            },
            Event::PostTool { call: b, ok, .. },
        ) = (ev(Runtime::Gemini, pre), ev(Runtime::Gemini, post))
        else {
            panic!()
        };
        assert_eq!(a, b);
        assert!(ok);
        assert_eq!(summary, "/w/a");
        let v = json!({"hook_event_name":"BeforeAgent","prompt":"hi"});
        assert_eq!(ev(Runtime::Gemini, v), Event::Prompt("hi".into()));
        let v = json!({"hook_event_name":"AfterAgent","prompt_response":"done"});
        assert_eq!(ev(Runtime::Gemini, v), Event::Stop(Some("done".into())));
    }

    #[test]
    fn a_document_without_an_event_is_an_error() {
        assert!(parse(Runtime::Claude, &json!({"x":1})).is_err());
        let v = json!({"hook_event_name":"UserPromptSubmit","prompt":"<task-notification>\n<task-id>a</task-id>"});
        assert!(matches!(ev(Runtime::Claude, v), Event::Ignored(_)));
        let v = json!({"hook_event_name":"SubagentStop","agent_id":"a1"});
        let p = parse(Runtime::Claude, &v).unwrap();
        assert_eq!(
            (p.event, p.agent.as_deref()),
            (Event::SubagentStop, Some("a1"))
        );
        let v = json!({"hook_event_name":"Notification"});
        assert!(matches!(ev(Runtime::Claude, v), Event::Ignored(_)));
    }
}
