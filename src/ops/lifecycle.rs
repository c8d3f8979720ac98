//! What the daemon's lifecycle code (`daemon::sweep`) needs from the session ops:
//! the eviction checkpoint (recorded as an operation of kind `evict`) and
//! whether a recorded command runs.

use super::record::Call;
use crate::error::Result;
use crate::refs::Checkpoint;
use crate::session::Session;

/// The eviction checkpoint of `s` (call with its op lock held, after `syncfs`):
/// trigger `evict`, message `evicted: WHY` (the sweep's real reason), recorded in
/// the same commit as an operation of kind `evict` by the daemon.
pub fn evict_checkpoint(s: &Session, why: &str) -> Result<Checkpoint> {
    let actor = crate::oplog::Actor::daemon();
    let call = Call {
        actor: &actor,
        explanation: None,
        request: serde_json::json!({"op": "evict"}),
    };
    let (c, _) = super::checkpoint::take(
        s,
        &call,
        &super::checkpoint::Taking::new(&format!("evicted: {why}"), "evict").recorded_as("evict"),
    )?;
    Ok(c)
}

/// Whether a recorded command runs in `s` (its changes belong to its record: the
/// session is busy).
pub fn command_running(s: &Session) -> bool {
    super::exec::running(s)
}
