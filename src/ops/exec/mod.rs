//! `exec`: recording a command the client runs in the workspace — the state before
//! and after it, the paths it changed, the writers outside it, its outcome and its
//! captured output — as one operation of kind `exec` in the session's log.
//!
//! Protocol (docs/protocol.md): `exec_begin` → `exec_output`* → `exec_end`; read
//! with `history` and `history_show`. Layout: `begin` (the before checkpoint, the
//! watch, output chunks), `end` (the after checkpoint, the record), `history`
//! (reading records; [`exec_state`] for `exec@N`), `slot` (per-session state),
//! `answers` (what the verbs answer, and the record's `meta.exec`), `tool` (an
//! agent runtime's tool calls, `tool_begin` → `tool_end`, recorded as execs;
//! `calls`: the calls and groups it records).
//!
//! Invariants:
//! - Exec numbers count from 1 per session; at most one exec runs per session at a
//!   time (one command, or one group of overlapping tool calls). One that never
//!   ends (its client died) is finalized as `abandoned` at the
//!   next `exec_begin` or at unmount ([`unmounting`]).
//! - The before state is a checkpoint (pending changes are saved first, trigger
//!   `before-exec`); the after state is a checkpoint with trigger `exec` whose
//!   parent is the before checkpoint, taken only when something changed. Both are
//!   taken under the session's write gate, so the record's before/after views are
//!   exactly the trees compared, and an undo of the record restores the before.
//! - Writers: every write between the two saves is in the change set, whoever made
//!   it; the writer watch (`session::watch`) names outside writers it could
//!   attribute (`others`, `may_include_others`). Writes after `exec_end` (a
//!   background process the command left) belong to the next operation.

pub mod answers;
mod begin;
mod calls;
mod end;
pub(crate) mod history;
mod slot;
pub mod tool;

pub use crate::control::{b64_decode, b64_encode};
pub(crate) use begin::{begin, output};
pub(crate) use end::{Ending, end};
pub use history::{exec_state, find};
pub(crate) use history::{list, show};

use super::Target;
use crate::session::Session;

/// The operation kind of exec records.
pub const KIND: &str = "exec";

/// Most bytes kept of each stream of an exec, whatever the client sends (more sets
/// the record's truncated flag). The CLI (`--capture-limit`) and the MCP server
/// refuse a larger capture limit with this constant; the Python client keeps a copy
/// (`MAX_CAPTURE_LIMIT`), which a test holds equal to it.
pub const MAX_CAPTURE: usize = 4 << 20;

/// Finalize the running exec of `t`'s session, if any, as abandoned: the workspace
/// is being unmounted. Errors are logged.
pub fn unmounting(t: &Target) {
    let s = &t.session;
    let _pins = s.pin_roots();
    let _g = s.op_lock.lock().unwrap_or_else(|p| p.into_inner());
    let Some(r) = slot::with(s, |sl| sl.running.take()) else {
        return;
    };
    let why = "abandoned: the workspace was unmounted while the command ran".to_string();
    if let Err(e) = end::finish(t, r, Ending::abandoned(why)) {
        ::log::error!("session {}: finalizing exec at unmount: {e}", s.name());
    }
}

/// Execs recorded since the last automatic checkpoint of `s`.
pub(super) fn commands_since_auto(s: &Session) -> u64 {
    slot::with(s, |sl| sl.since_auto)
}

/// Restart the count of [`commands_since_auto`].
pub(super) fn reset_commands(s: &Session) {
    slot::with(s, |sl| sl.since_auto = 0);
}

/// Whether a recorded command is running in `s`.
pub(super) fn running(s: &Session) -> bool {
    s.watch.active()
}
