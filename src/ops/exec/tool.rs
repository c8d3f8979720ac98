//! Tool calls of an agent runtime (Claude Code, Codex, Gemini CLI, through
//! `treefork hook`), recorded as exec records: `tool_begin` when the runtime is
//! about to run a tool that can write, `tool_end` when it ran, `tool_settle` when
//! the turn ends. The record is an ordinary `exec` record (so `history`, `diff`,
//! `undo`, `revert exec@N` treat a Bash `rm` as any command) whose `meta.exec.tools`
//! lists the calls with their outcomes.
//!
//! Invariants:
//! - Overlapping calls share one record. A call begun while another call of the
//!   same runtime is open joins its group: both run in one working directory at
//!   once, so their writes cannot be told apart, and undo of the record undoes the
//!   group. The record is written when the group's last open call ends (or the
//!   turn ends: `tool_settle`, or the group is found abandoned).
//! - A group is alive while its runtime's process is (the pid the hook reports,
//!   checked with its start time); without one, for an hour (`calls::STALE_AFTER`);
//!   never past six hours (`calls::MAX_OPEN`: the pid is the caller's word). A
//!   dead group is finalized as abandoned by the next begin.
//! - Everything the runtime sends is bounded: names, ids and summaries are cut or
//!   refused at the limits in `calls`; a group holds at most `calls::MAX_CALLS`
//!   calls.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::answers::Ended;
use super::begin::{clear_stale, start};
pub use super::calls::ToolCall;
use super::calls::{
    Group, MAX_CALL_ID, MAX_CALLS, MAX_RUNTIME, MAX_SUMMARY, MAX_TOOL, NO_END, check_name, cut,
};
use super::end::{Ending, finish};
use super::slot::{self, start_time};
use crate::error::{Error, Result};
use crate::oplog::Actor;
use crate::ops::Target;

/// What `tool_begin` is told.
pub(crate) struct Start {
    pub runtime: String,
    pub call: String,
    pub tool: String,
    pub summary: String,
    /// The subagent making the call (none: the main agent).
    pub agent: Option<String>,
    /// Relative to the workspace root.
    pub cwd: String,
    pub client_pid: Option<u32>,
}

/// The answer to `tool_begin`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolBegun {
    /// The exec number recording the call.
    pub exec: u64,
    /// Whether it joined a group of calls already open (they share one record).
    pub joined: bool,
    /// The checkpoint before the group (hex).
    pub before: String,
}

/// The answer to `tool_end` and `tool_settle`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolEnded {
    /// The exec number recording the call (`null`: nothing was open).
    pub exec: Option<u64>,
    /// Calls of its group still open.
    pub open: u64,
    /// The record, when this ended the group.
    pub recorded: Option<Ended>,
}

/// Begin recording tool call `st.call`: join the open group of the same runtime,
/// or start a new exec for it.
pub(crate) fn begin(
    t: &Target,
    actor: &Actor,
    st: Start,
    explanation: Option<String>,
) -> Result<ToolBegun> {
    check_name("runtime", &st.runtime, MAX_RUNTIME)?;
    check_name("tool", &st.tool, MAX_TOOL)?;
    check_name("call", &st.call, MAX_CALL_ID)?;
    if let Some(a) = &st.agent {
        check_name("agent", a, MAX_CALL_ID)?;
    }
    let call = ToolCall {
        runtime: st.runtime.clone(),
        id: st.call.clone(),
        tool: st.tool.clone(),
        summary: cut(st.summary, MAX_SUMMARY),
        agent: st.agent.clone(),
        ok: None,
        error: None,
    };
    let s = &t.session;
    let joined = slot::with(s, |sl| -> Result<Option<ToolBegun>> {
        let Some(r) = sl.running.as_mut() else {
            return Ok(None);
        };
        let started = r.started;
        let Some(g) = r.group.as_mut().filter(|g| g.runtime == st.runtime) else {
            return Ok(None);
        };
        if !g.alive(started) {
            return Ok(None);
        }
        let answer = ToolBegun {
            exec: r.n,
            joined: true,
            before: r.before_ckpt.clone(),
        };
        if g.calls.iter().any(|c| c.id == call.id) {
            return Ok(Some(answer)); // a repeated begin
        }
        if g.calls.len() >= MAX_CALLS {
            return Err(Error::Busy(format!(
                "exec {} already records {MAX_CALLS} overlapping tool calls",
                r.n
            )));
        }
        g.open.push(call.id.clone());
        g.calls.push(call.clone());
        Ok(Some(answer))
    })?;
    if let Some(b) = joined {
        return Ok(b);
    }
    clear_stale(t)?;
    let client = st.client_pid.map(|p| (p, start_time(p)));
    let group = Group {
        runtime: st.runtime,
        client,
        open: vec![call.id.clone()],
        calls: vec![call.clone()],
    };
    let argv = vec![call.tool, call.summary];
    let b = start(t, actor, argv, st.cwd, explanation, Some(group))?;
    Ok(ToolBegun {
        exec: b.exec,
        joined: false,
        before: b.before,
    })
}

/// End tool call `call` with its outcome; the last open call of its group writes
/// the record.
pub(crate) fn end(t: &Target, call: &str, ok: bool, error: Option<String>) -> Result<ToolEnded> {
    let s = &t.session;
    let done = slot::with(s, |sl| {
        let r = sl.running.as_mut()?;
        let g = r.group.as_mut()?;
        let i = g.open.iter().position(|c| c == call)?;
        g.open.remove(i);
        if let Some(c) = g.calls.iter_mut().find(|c| c.id == call) {
            c.ok = Some(ok);
            c.error = error.map(|e| cut(e, MAX_SUMMARY));
        }
        let (n, open) = (r.n, g.open.len() as u64);
        Some(if open == 0 {
            (n, open, sl.running.take())
        } else {
            (n, open, None)
        })
    });
    let Some((n, open, finished)) = done else {
        return Err(Error::NotFound(format!(
            "no tool call {call:?} is being recorded in this session (it ended, was settled, or began before the hooks were installed)"
        )));
    };
    answer(t, n, open, finished)
}

/// The answer for exec `n` with `open` calls left, writing the record of the
/// group taken from the slot when it `finished`.
fn answer(t: &Target, n: u64, open: u64, finished: Option<slot::Running>) -> Result<ToolEnded> {
    let recorded = match finished {
        Some(r) => Some(finish(t, r, Ending::default())?),
        None => None,
    };
    Ok(ToolEnded {
        exec: Some(n),
        open,
        recorded,
    })
}

/// The turn of `agent` (none: the main agent) ended: its calls still open get no
/// end. When no other agent's call is open, the group's record is written;
/// otherwise the last of those calls to end writes it (a subagent may run on in
/// the background after the main agent's turn).
pub(crate) fn settle(t: &Target, runtime: Option<&str>, agent: Option<&str>) -> Result<ToolEnded> {
    let s = &t.session;
    let taken = slot::with(s, |sl| {
        let r = sl.running.as_mut()?;
        let g = r.group.as_mut()?;
        if runtime.is_some_and(|rt| rt != g.runtime) {
            return None;
        }
        let ours = |id: &String| {
            g.calls
                .iter()
                .find(|c| &c.id == id)
                .is_some_and(|c| c.agent.as_deref() == agent)
        };
        let (mine, others): (Vec<String>, Vec<String>) = g.open.drain(..).partition(ours);
        for c in g.calls.iter_mut().filter(|c| mine.contains(&c.id)) {
            c.error.get_or_insert_with(|| NO_END.to_string());
        }
        g.open = others;
        let (n, open) = (r.n, g.open.len() as u64);
        Some(if open == 0 {
            (n, open, sl.running.take())
        } else {
            (n, open, None)
        })
    });
    let Some((n, open, finished)) = taken else {
        return Ok(ToolEnded {
            exec: None,
            open: 0,
            recorded: None,
        });
    };
    answer(t, n, open, finished)
}
