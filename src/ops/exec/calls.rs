//! The tool calls an exec record of an agent runtime holds (`meta.exec.tools`)
//! and the group of overlapping calls a running exec records, with the bounds on
//! what a runtime sends (see `tool` for the verbs).
//!
//! Invariants: a group's `open` ids are ids of its `calls`; a call's text fields
//! are within the bounds below; pure data (no session access), so the recorder's
//! other parts (`slot`, `begin`, `end`, `answers`) use it without a cycle.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Longest runtime name (`claude`, `codex`, `gemini`, ...).
pub const MAX_RUNTIME: usize = 32;
/// Longest tool name.
pub const MAX_TOOL: usize = 128;
/// Longest tool call id.
pub const MAX_CALL_ID: usize = 256;
/// Most bytes of a call's input summary or error kept.
pub const MAX_SUMMARY: usize = 1024;
/// Most calls in one group.
pub const MAX_CALLS: usize = 64;
/// How long a group whose runtime pid is unknown counts as alive.
pub const STALE_AFTER: Duration = Duration::from_secs(3600);
/// The longest a group counts as alive whatever its pid says: the pid comes from
/// the caller (an agent may name one that never ends), and while a group is open
/// no other command is recorded on its own.
pub const MAX_OPEN: Duration = Duration::from_secs(6 * 3600);

/// One tool call in a record's `meta.exec.tools`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// The runtime (`claude`, `codex`, `gemini`).
    pub runtime: String,
    /// The runtime's id of the call.
    pub id: String,
    /// The tool (`Bash`, `Write`, `Edit`, `apply_patch`, ...).
    pub tool: String,
    /// What it was asked to do (a command, a file path; cut at 1 KiB).
    pub summary: String,
    /// The subagent that made the call (the runtime's id; absent: the main
    /// agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Whether the runtime reported success (`null`: no end was reported).
    pub ok: Option<bool>,
    /// The error the runtime reported, or why no end came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The tool calls a running exec records.
pub(crate) struct Group {
    pub runtime: String,
    /// The runtime's pid and start time.
    pub client: Option<(u32, Option<u64>)>,
    pub calls: Vec<ToolCall>,
    /// Ids of the calls not ended yet.
    pub open: Vec<String>,
}

impl Group {
    /// Whether the runtime that began it still runs (and it has been open less
    /// than [`MAX_OPEN`]).
    pub fn alive(&self, started: Instant) -> bool {
        if started.elapsed() >= MAX_OPEN {
            return false;
        }
        match self.client {
            Some((pid, Some(t))) => start_time(pid) == Some(t),
            Some((pid, None)) => std::path::Path::new(&format!("/proc/{pid}")).exists(),
            None => started.elapsed() < STALE_AFTER,
        }
    }

    /// The runtime's pid, when the hook reported it.
    pub fn client_pid(&self) -> Option<u32> {
        self.client.map(|(p, _)| p)
    }

    /// "claude Bash: rm f" (and how many more calls).
    pub fn title(&self) -> String {
        let Some(c) = self.calls.first() else {
            return format!("a {} tool call", self.runtime);
        };
        let mut t = format!("{} {}: {}", c.runtime, c.tool, c.summary);
        if self.calls.len() > 1 {
            t.push_str(&format!(" (and {} more calls)", self.calls.len() - 1));
        }
        t
    }

    /// Why an abandoned group ended.
    pub fn abandoned_why(&self) -> String {
        let who = match self.client {
            Some((pid, _)) => format!("{} (pid {pid})", self.runtime),
            None => self.runtime.clone(),
        };
        format!("abandoned: {who} ended before it reported the tool calls' end")
    }

    /// The calls, those still open marked as never ended (`why`).
    pub fn calls_closed(&self, why: &str) -> Vec<ToolCall> {
        let mut v = self.calls.clone();
        for c in v.iter_mut().filter(|c| self.open.contains(&c.id)) {
            c.ok = None;
            c.error.get_or_insert_with(|| why.to_string());
        }
        v
    }
}

/// Cut `s` to at most `max` bytes (at a char boundary).
pub(super) fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut i = max;
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        s.truncate(i);
        s.push('…');
    }
    s
}

pub(super) fn check_name(what: &str, v: &str, max: usize) -> Result<()> {
    if v.is_empty() || v.len() > max || v.chars().any(char::is_control) {
        return Err(Error::Invalid(format!(
            "tool_begin: {what} must be 1 to {max} bytes without control characters"
        )));
    }
    Ok(())
}

/// A process's start time (clock ticks after boot).
pub(super) fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.get(s.rfind(')')? + 1..)?;
    // Field 22 overall; the 20th after the comm.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The message of a group's calls that never reported an end.
pub(crate) const NO_END: &str =
    "the runtime reported no end of this call (denied, interrupted, or the turn ended first)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_char_boundaries() {
        assert_eq!(cut("abc".into(), 5), "abc");
        assert_eq!(cut("ééé".into(), 3), "é…");
    }

    #[test]
    fn title_counts_more_calls() {
        let c = |id: &str| ToolCall {
            runtime: "claude".into(),
            id: id.into(),
            tool: "Bash".into(),
            summary: "rm f".into(),
            agent: None,
            ok: None,
            error: None,
        };
        let g = Group {
            runtime: "claude".into(),
            client: None,
            calls: vec![c("a"), c("b")],
            open: vec!["b".into()],
        };
        assert_eq!(g.title(), "claude Bash: rm f (and 1 more calls)");
        let closed = g.calls_closed(NO_END);
        assert_eq!(closed[0].error, None);
        assert_eq!(closed[1].error.as_deref(), Some(NO_END));
        assert!(g.alive(Instant::now()));
    }
}
