//! Eviction to a remote: a session whose policy names a remote
//! (`policy.evict_to`, set by `mount --evict-to` / `session extend --evict-to`)
//! is pushed before the eviction sweep unmounts it, so `mount --from-remote
//! REMOTE/NAME` elsewhere resumes it exactly (files, HEAD, branch, operation log,
//! messages: what a session push carries).
//!
//! Owns: the push around the unmount. Order (in `Daemon::evict`): checkpoint
//! (operation `evict`), [`push_before_evict`] (a plain `push SESSION`: flush,
//! objects, records, log segment, session ref by compare-and-swap), unmount,
//! [`push_after_unmount`].
//!
//! Invariants: a push that fails (remote unreachable, non-fast-forward, remote
//! no longer configured, ...) fails the eviction: the session stays mounted,
//! `evict_blocked` says `push to REMOTE failed: ...`, the next sweep retries.
//! Anything the session changed between that push and the unmount (an idle
//! session rarely does) is pushed once more after the unmount; a failure then
//! is logged (the session is unmounted and its data is safe locally; a later
//! `push SESSION` sends it).

use crate::error::{Error, Result};
use crate::host::Host;
use crate::session::Session;

/// What a push sent: the session's workspace root and HEAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    root: crate::id::NodeId,
    head: Option<crate::id::CheckpointId>,
}

fn failed(remote: &str, e: Error) -> Error {
    Error::Conflict(format!("push to {remote} failed: {e}"))
}

/// Push the live session `s` to `remote` (its upstream there, else the same
/// name). An error says `push to REMOTE failed: ...`.
pub fn push_before_evict<H: Host>(h: &H, s: &Session, remote: &str) -> Result<Pushed> {
    let store = h.store();
    let r = super::open(&*store, remote).map_err(|e| failed(remote, e))?;
    let rep = super::push::push_session(h, &r, s.name(), false, &mut |_| {})
        .map_err(|e| failed(remote, e))?;
    log::info!(
        "session {}: pushed to {remote} before eviction ({} objects, {} bytes)",
        s.name(),
        rep.objects,
        rep.bytes
    );
    let rec = s.record();
    Ok(Pushed {
        root: rec.root,
        head: rec.head,
    })
}

/// After the unmount: push session `name` again if its record moved since
/// `before` (logged, never an error: the session is already unmounted).
pub fn push_after_unmount<H: Host>(h: &H, name: &str, remote: &str, before: Pushed) {
    let store = h.store();
    let now = match crate::session::load_record(&*store, name) {
        Ok(Some(r)) => Pushed {
            root: r.root,
            head: r.head,
        },
        Ok(None) => return,
        Err(e) => {
            log::warn!("session {name}: evicted; cannot read its record: {e}");
            return;
        }
    };
    if now == before {
        return;
    }
    let r = super::open(&*store, remote)
        .and_then(|r| super::push::push_session(h, &r, name, false, &mut |_| {}));
    if let Err(e) = r {
        log::warn!(
            "session {name}: changed between its eviction push and the unmount; pushing that to {remote} failed: {e} (run `treefork push {name}`)"
        );
    }
}
