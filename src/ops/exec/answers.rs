//! What the exec verbs answer: the exec record's `meta.exec` ([`ExecMeta`], also
//! what is stored in the operation record), a history line ([`ExecSummary`]) and
//! the answers of `exec_begin`, `exec_output`, `exec_end`, `history` and
//! `history_show`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::oplog::{Actor, Operation};
use crate::ops::views::PathChange;

/// An outside process that wrote to the workspace while a command ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WriterView {
    /// Its pid (the thread id the write carried).
    pub pid: u32,
    /// Its command name (`/proc/<pid>/comm`).
    pub comm: String,
}

/// A recorded command: the `exec` entry of its operation record's `meta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExecMeta {
    /// The exec number (from 1 per session).
    pub n: u64,
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// Its working directory, relative to the workspace root.
    pub cwd: String,
    /// Exit code, when it exited.
    pub exit: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// Why it could not run, or why it was abandoned.
    pub error: Option<String>,
    /// Its pid, when it started.
    pub pid: Option<u32>,
    /// Wall time, ms.
    pub duration_ms: u64,
    /// A timeout stopped it.
    pub timed_out: bool,
    /// Its client never reported its end (finalized by the daemon).
    pub abandoned: bool,
    /// The checkpoint before it (hex).
    pub before: String,
    /// The checkpoint it made (hex); `null` when it changed nothing.
    pub after: Option<String>,
    /// The changed paths, listed up to a cap (absent from history lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<Vec<PathChange>>,
    /// How many paths changed (exact).
    pub changed_count: u64,
    /// Whether `changed` lists fewer than `changed_count`.
    pub changed_truncated: bool,
    /// Outside writers seen while it ran (up to a cap).
    pub others: Vec<WriterView>,
    /// Outside writers beyond the cap.
    pub others_overflow: u64,
    /// Whether the change set may include writes of other processes.
    pub may_include_others: bool,
    /// Captured stdout bytes kept.
    pub stdout_bytes: u64,
    /// Captured stderr bytes kept.
    pub stderr_bytes: u64,
    /// Stdout was cut at the capture limit.
    pub stdout_truncated: bool,
    /// Stderr was cut at the capture limit.
    pub stderr_truncated: bool,
    /// The agent runtime's tool calls it records (absent for a command run by
    /// `exec`); several when they overlapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<super::calls::ToolCall>>,
}

/// A history line: the exec meta (without the changed paths) with its record's
/// sequence number, time, explanation and actor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExecSummary {
    /// The exec.
    #[serde(flatten)]
    pub exec: ExecMeta,
    /// Its operation's sequence number.
    pub seq: u64,
    /// Unix time in nanoseconds, as a decimal string.
    pub time_ns: String,
    /// Unix time in seconds.
    pub time: i64,
    /// Why it was run (`--explanation`), if given.
    pub explanation: Option<String>,
    /// Who ran it.
    pub actor: Actor,
    /// Its operation was undone (and not redone since).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undone: bool,
    /// A later `revert exec@N` took its changes back out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reverted: bool,
}

/// The answer to `exec_begin`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Begun {
    /// The exec number (send it with `exec_output` and `exec_end`).
    pub exec: u64,
    /// The checkpoint before the command (hex).
    pub before: String,
}

/// The answer to `exec_output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutputTaken {
    /// The exec number.
    pub exec: u64,
    /// Bytes of that stream kept so far.
    pub bytes: u64,
}

/// The answer to `exec_end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ended {
    /// The record's exec meta.
    pub exec: ExecMeta,
    /// The operation's sequence number.
    pub seq: u64,
    /// The checkpoint the command made (hex); `null` when it changed nothing.
    pub checkpoint: Option<String>,
}

/// The answer to `history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryAnswer {
    /// The newest execs, newest first.
    pub execs: Vec<ExecSummary>,
    /// Present when the walk back stopped after this many records before finding
    /// `limit` execs (older ones may exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_limited: Option<u64>,
}

/// The answer to `history_show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryShown {
    /// The whole operation record.
    pub record: Operation,
    /// Its history line.
    pub summary: ExecSummary,
    /// Captured stdout, base64.
    pub stdout: String,
    /// Captured stderr, base64.
    pub stderr: String,
}
