//! Schemas of the tools: input schemas derived from the types that parse the
//! arguments (a verb's request type, or, for a tool with arguments of its own,
//! its input type here), so schema and parser cannot drift apart; output schemas
//! derived from the verb's response type ([`typed_output`]), or hand-written
//! ([`object`]: loose, the fields a client can rely on, `additionalProperties`
//! allowed) for a tool that answers more than its verb, or whose verb answers a
//! choice of shapes (MCP wants one object schema).
//!
//! Invariant: every schema here is a JSON Schema object (`"type": "object"`), as
//! MCP requires of `inputSchema` and `outputSchema`.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::JsonObject;
use rmcp::schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The input schema of `T`.
pub fn input<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let s = rmcp::handler::server::common::schema_for_input::<T>()
        .unwrap_or_else(|e| panic!("input schema of {}: {e}", std::any::type_name::<T>()));
    if s.contains_key("properties") {
        return s;
    }
    // Clients expect `properties` even when there are none.
    let mut o = (*s).clone();
    o.insert("properties".into(), json!({}));
    Arc::new(o)
}

/// The output schema of a verb's response type `R` when it is one object schema;
/// `None` for a choice of shapes (`anyOf`) or an untyped (`Value`) one.
pub fn typed_output<R: JsonSchema + 'static>() -> Option<Arc<JsonObject>> {
    let s = rmcp::handler::server::common::schema_for_output::<R>();
    (s.get("type") == Some(&json!("object"))).then_some(s)
}

/// An object schema with these properties (`required` among them), other
/// properties allowed.
pub fn object(props: Value, required: &[&str]) -> JsonObject {
    let v = json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": true,
    });
    match v {
        Value::Object(o) => o,
        _ => unreachable!(),
    }
}

/// `{"type": [t, "null"]}`.
pub fn nullable(t: &str) -> Value {
    json!({"type": [t, "null"]})
}

/// `diff`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// Old side (default HEAD).
    pub a: Option<String>,
    /// New side (default WORKING, the live files).
    pub b: Option<String>,
    /// `name-status` (default), `stat` or `patch`.
    pub mode: Option<DiffMode>,
    /// Most bytes of patch text returned (default 65536); the rest is cut and
    /// `truncated` set.
    pub max_bytes: Option<usize>,
    /// List paths the workspace's .gitignore files ignore too (marked
    /// `ignored`); default false: left out.
    pub ignored: Option<bool>,
    /// Only these workspace-relative paths (files or directories); default: all.
    pub paths: Option<Vec<String>>,
}

/// A diff mode.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[schemars(crate = "rmcp::schemars")]
#[serde(rename_all = "kebab-case")]
pub enum DiffMode {
    /// Paths and how each changed.
    NameStatus,
    /// Plus added/removed line counts.
    Stat,
    /// Plus unified diffs.
    Patch,
}

impl DiffMode {
    /// The protocol's name.
    pub fn wire(self) -> &'static str {
        match self {
            DiffMode::NameStatus => "name-status",
            DiffMode::Stat => "stat",
            DiffMode::Patch => "patch",
        }
    }
}

/// `show_file`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ShowFileArgs {
    /// The state to read from (default HEAD).
    #[serde(rename = "ref")]
    pub target: Option<String>,
    /// Workspace-relative path (`""`: the root directory).
    pub path: String,
    /// Most bytes returned (default 262144).
    pub max_bytes: Option<usize>,
}

/// `checkpoint`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct CheckpointArgs {
    /// What the checkpoint is.
    #[serde(default)]
    pub message: String,
    /// Why it was taken (kept in the operation log).
    pub explanation: Option<String>,
    /// `manual` (default), `milestone`, `before-risky`, or another name.
    pub trigger: Option<String>,
    /// Caller-defined data kept in the record.
    pub meta: Option<serde_json::Map<String, Value>>,
}

/// `fork`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ForkArgs {
    /// The new session's name.
    pub name: String,
    /// Where to mount it (absolute; created when missing, else an empty directory).
    pub mountpoint: String,
    /// Ref to start from (default: a fresh checkpoint of the current state).
    pub from: Option<String>,
    /// Start from this message instead: files as they were then, the
    /// conversation up to it.
    pub from_message: Option<String>,
}

/// `restore`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct RestoreArgs {
    /// The ref to take the files from.
    #[serde(rename = "ref")]
    pub target: String,
    /// Workspace-relative paths (empty: everything).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Only report what would change (default true: pass false to restore).
    pub dry_run: Option<bool>,
}

/// `undo` / `redo`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct UndoArgs {
    /// `files` or `refs` to limit it to the workspace or to HEAD and branches.
    pub what: Option<UndoWhat>,
}

/// What an undo reaches.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[schemars(crate = "rmcp::schemars")]
#[serde(rename_all = "lowercase")]
pub enum UndoWhat {
    /// The workspace only.
    Files,
    /// HEAD and branches only.
    Refs,
}

impl UndoWhat {
    /// The protocol's name.
    pub fn wire(self) -> String {
        match self {
            UndoWhat::Files => "files".into(),
            UndoWhat::Refs => "refs".into(),
        }
    }
}

/// `exec`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// The program and its arguments (no shell: use `["sh", "-c", "..."]` for one).
    pub argv: Vec<String>,
    /// Working directory relative to the workspace root (default: the root).
    #[serde(default)]
    pub cwd: String,
    /// Stop the command (its whole process group) after this many seconds.
    pub timeout_s: Option<f64>,
    /// Bytes of each of stdout and stderr kept (default 262144, at most 4 MiB).
    pub capture_limit: Option<usize>,
    /// Why it runs (kept in the operation log).
    pub explanation: Option<String>,
}

/// `experiment`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ExperimentArgs {
    /// The commands to try (each `sh -c`), one run each, in its own fork.
    pub commands: Vec<String>,
    /// Environment variables per run (same order as `commands`; optional).
    #[serde(default)]
    pub env: Vec<BTreeMap<String, String>>,
    /// Start every fork from this ref (default: the current state, saved first).
    pub from: Option<String>,
    /// `exit` (default: exit 0 first, then duration), `duration` or `output`.
    pub rank_by: Option<String>,
    /// Stop a run after this many seconds (give one when a command may never
    /// exit: it would block the experiment forever).
    pub timeout_s: Option<f64>,
    /// Where each run sees its fork: `workspace` (default: at the workspace's own
    /// path, in a private mount namespace) or `fork` (at the fork's mountpoint).
    pub run_at: Option<String>,
    /// Working directory relative to the workspace root, in each fork.
    #[serde(default)]
    pub cwd: String,
    /// Leave every fork mounted afterwards.
    #[serde(default)]
    pub keep: bool,
}

/// `bisect`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct BisectArgs {
    /// The test, run by `sh -c` in each fork (give this or `argv`): exit 0 = good.
    pub command: Option<String>,
    /// The test as an argument vector, run directly (instead of `command`).
    pub argv: Option<Vec<String>>,
    /// Checkpoints tested at once, each in its own fork (default 1).
    pub jobs: Option<usize>,
    /// Where the test passes (default: the oldest checkpoint on bad's first parents).
    pub good: Option<String>,
    /// Where the test fails (default: HEAD).
    pub bad: Option<String>,
    /// Stop a run after this many seconds (counts as a failure; give one when
    /// the command may never exit: it would block the bisect forever).
    pub timeout_s: Option<f64>,
    /// Where each run sees its fork: `workspace` (default: at the workspace's own
    /// path, in a private mount namespace) or `fork` (at the fork's mountpoint).
    pub run_at: Option<String>,
    /// Working directory relative to the workspace root, in each fork.
    #[serde(default)]
    pub cwd: String,
}

/// A message's role.
#[derive(Deserialize, JsonSchema, serde::Serialize, Clone, Copy)]
#[schemars(crate = "rmcp::schemars")]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool's answer.
    Tool,
    /// Instructions.
    System,
}

/// A message stream.
#[derive(Deserialize, JsonSchema, serde::Serialize, Clone, Copy)]
#[schemars(crate = "rmcp::schemars")]
#[serde(rename_all = "lowercase")]
pub enum MessageStream {
    /// The conversation (default).
    Messages,
    /// Raw SDK messages.
    Transcript,
}

/// `messages_append`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct AppendArgs {
    /// Who speaks.
    pub role: MessageRole,
    /// The message (any JSON).
    pub content: Value,
    /// The tool calls it makes.
    pub tool_calls: Option<Value>,
    /// The call a `tool` message answers.
    pub tool_call_id: Option<String>,
    /// Caller data.
    pub meta: Option<serde_json::Map<String, Value>>,
    /// A client-chosen uuid (a repeated id is idempotent).
    pub id: Option<String>,
    /// `messages` (default) or `transcript`.
    pub stream: Option<MessageStream>,
    /// Wait until it is durable (`message_flush`) before answering.
    #[serde(default)]
    pub flush: bool,
}

/// `messages_list`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// `messages` (default) or `transcript`.
    pub stream: Option<MessageStream>,
    /// Only the newest this many.
    pub limit: Option<usize>,
    /// Up to and including this message id.
    pub upto: Option<String>,
    /// After this message id.
    pub after: Option<String>,
}

/// What a rewind reaches.
#[derive(Deserialize, JsonSchema, serde::Serialize, Clone, Copy)]
#[schemars(crate = "rmcp::schemars")]
#[serde(rename_all = "lowercase")]
pub enum RewindWhat {
    /// The workspace only.
    Files,
    /// The messages only.
    Conversation,
    /// Both (default).
    Both,
}

/// `rewind`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct RewindArgs {
    /// The message to go back to.
    pub to: String,
    /// `files`, `conversation` or `both` (default).
    pub what: Option<RewindWhat>,
    /// Only report what would change.
    #[serde(default)]
    pub dry_run: bool,
}

/// `promote`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct PromoteArgs {
    /// Workspace-relative paths (empty: the touched files).
    #[serde(default)]
    pub paths: Vec<String>,
    /// `commit` (default), `branch` or `patch`.
    pub strategy: Option<String>,
    /// Commit message.
    pub message: Option<String>,
    /// Only report what would happen (default true: pass false to promote).
    pub dry_run: Option<bool>,
    /// `branch`: the new branch's name.
    pub branch: Option<String>,
    /// `branch`: base the commit on the durable branch's head.
    #[serde(default)]
    pub onto_head: bool,
    /// Accept files over the size limit.
    #[serde(default)]
    pub allow_large: bool,
}
