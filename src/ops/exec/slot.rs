//! The recorder's per-session state, kept in the session's writer-watch slot
//! (`Session::watch.slot`): the last exec number, the running exec (at most one
//! per session: one command, or one group of an agent runtime's overlapping tool
//! calls), and the count of execs since the last automatic checkpoint.
//!
//! Not durable: after a daemon crash a running exec is lost (its changes are
//! pending changes of the next operation) and the number continues from the
//! newest exec record in the operation log.

use std::time::Instant;

pub(super) use super::calls::start_time;
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::oplog::{self, Actor, View};
use crate::session::Session;

/// An exec between `exec_begin` and `exec_end`.
pub(super) struct Running {
    pub n: u64,
    pub argv: Vec<String>,
    pub cwd: String,
    pub explanation: Option<String>,
    pub actor: Actor,
    /// The client's start time (`/proc/<pid>/stat` field 22), to tell it from a
    /// later process with the same pid.
    pub client_start: Option<u64>,
    pub started: Instant,
    pub before_ckpt: String,
    pub before_root: NodeId,
    pub before: View,
    /// Captured stdout and stderr, and whether the daemon cut them.
    pub out: [Vec<u8>; 2],
    pub cut: [bool; 2],
    /// The agent runtime's tool calls it records (`tool_begin`), if it is a
    /// tool-call record rather than one command.
    pub group: Option<super::calls::Group>,
}

impl Running {
    /// Whether the client that began it still runs (for tool calls: the runtime).
    pub fn client_alive(&self) -> bool {
        if let Some(g) = &self.group {
            return g.alive(self.started);
        }
        match (self.actor.pid, self.client_start) {
            (Some(pid), Some(t)) => start_time(pid) == Some(t),
            (Some(pid), None) => std::path::Path::new(&format!("/proc/{pid}")).exists(),
            _ => false,
        }
    }
}

#[derive(Default)]
pub(super) struct Slot {
    /// The newest exec number handed out (`None`: not read from the log yet).
    pub last_n: Option<u64>,
    pub running: Option<Running>,
    /// Execs recorded since the last automatic checkpoint.
    pub since_auto: u64,
}

/// Run `f` on `s`'s slot (created on first use).
pub(super) fn with<R>(s: &Session, f: impl FnOnce(&mut Slot) -> R) -> R {
    let mut g = s.watch.slot.lock().unwrap_or_else(|p| p.into_inner());
    if g.as_ref().is_none_or(|b| !b.is::<Slot>()) {
        *g = Some(Box::new(Slot::default()));
    }
    let slot = g
        .as_mut()
        .and_then(|b| b.downcast_mut::<Slot>())
        .expect("slot just set");
    f(slot)
}

/// The next exec number of `s` (reads the newest exec record the first time).
pub(super) fn next_number(s: &Session) -> Result<u64> {
    let known = with(s, |sl| sl.last_n);
    let last = match known {
        Some(n) => n,
        None => newest_number(s)?,
    };
    Ok(with(s, |sl| {
        let n = sl.last_n.unwrap_or(last).max(last) + 1;
        sl.last_n = Some(n);
        n
    }))
}

fn newest_number(s: &Session) -> Result<u64> {
    let newest = oplog::walk::find_back(&**s.store(), s.name(), usize::MAX, &|o| {
        o.kind == super::KIND
    })?;
    Ok(newest
        .and_then(|o| o.meta.get("exec")?.get("n")?.as_u64())
        .unwrap_or(0))
}

/// The error for exec `n` when it is not this session's running exec.
pub(super) fn not_running(n: u64) -> Error {
    Error::NotFound(format!(
        "no exec {n} is running in this session (it ended, was abandoned, or never began)"
    ))
}
