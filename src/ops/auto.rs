//! Automatic checkpoints, where a session's settings ask for them (called from the
//! daemon's service loop): after N mutating operations (`auto_checkpoint_ops`),
//! after idle seconds following a change (`auto_checkpoint_idle_secs`), after N
//! recorded commands (`auto_checkpoint_commands`: of what changed outside them, e.g.
//! writes of processes a command left in the background), and after each `git
//! commit` in the workspace (trigger `git-commit`, see [`git`]).
//!
//! Invariants: a session whose op lock is held (an op runs) is skipped until the
//! next call; so is one with a recorded command running (its changes belong to its
//! exec record). `auto_checkpoint_min_interval_secs` spaces the count and idle
//! triggers; a git commit is always recorded.

mod git;

pub(super) use git::rebaseline as git_rebaseline;
pub(super) use git::ref_target as git_ref_target;

use std::sync::atomic::Ordering;

use super::{Host, Target, exec, syncfs};

/// Take automatic checkpoints where a session's settings ask for them.
pub fn auto_checkpoints<H: Host>(h: &H) {
    let now = crate::clock::unix_ms();
    for t in h.live() {
        if exec::running(&t.session) {
            continue;
        }
        git::check(&t, now);
        by_settings(&t, now);
    }
}

/// Take an automatic checkpoint, recorded (in the same commit) as a `checkpoint`
/// operation of the daemon.
fn logged_checkpoint(
    s: &crate::session::Session,
    msg: &str,
    trigger: &str,
) -> crate::error::Result<crate::refs::Checkpoint> {
    let actor = crate::oplog::Actor::daemon();
    let call = super::record::Call {
        actor: &actor,
        explanation: None,
        request: serde_json::json!({"op": "checkpoint", "trigger": trigger, "message": msg}),
    };
    let (c, _) = super::checkpoint::take(s, &call, &super::checkpoint::Taking::new(msg, trigger))?;
    Ok(c)
}

/// The count and idle triggers.
fn by_settings(t: &Target, now: u64) {
    let s = &t.session;
    let cfg = s.record().config;
    let (muts, last) = s.activity();
    let min_gap = cfg.auto_checkpoint_min_interval_secs * 1000;
    let by_ops = cfg.auto_checkpoint_ops > 0 && muts >= cfg.auto_checkpoint_ops;
    let by_idle = cfg.auto_checkpoint_idle_secs > 0
        && muts > 0
        && now.saturating_sub(last) >= cfg.auto_checkpoint_idle_secs * 1000;
    let commands = exec::commands_since_auto(s);
    let by_commands =
        cfg.auto_checkpoint_commands > 0 && commands >= cfg.auto_checkpoint_commands && muts > 0;
    let last_auto = t.last_auto_ms.load(Ordering::Relaxed);
    if !((by_ops || by_idle || by_commands) && now.saturating_sub(last_auto) >= min_gap) {
        return;
    }
    let Ok(_g) = s.op_lock.try_lock() else {
        return;
    };
    let r = syncfs(&t.mount).and_then(|_| {
        let (muts, _) = s.activity();
        let msg = if by_commands {
            format!("auto: {muts} changes after {commands} commands")
        } else {
            format!("auto: {muts} changes")
        };
        logged_checkpoint(s, &msg, "auto")
    });
    match r {
        Ok(c) => log::info!(
            "session {}: automatic checkpoint {}",
            s.name(),
            c.id.short()
        ),
        Err(e) => log::error!("session {}: automatic checkpoint failed: {e}", s.name()),
    }
    exec::reset_commands(s);
    t.last_auto_ms.store(now, Ordering::Relaxed);
}
