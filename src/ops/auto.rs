//! Automatic checkpoints, where a session's settings ask for them (called from the
//! daemon's service loop).

use std::sync::atomic::Ordering;

use super::{Host, syncfs};
use crate::session::now_ms;

/// Take automatic checkpoints where a session's settings ask for them. A session
/// whose op lock is held (an op runs) is skipped until the next call.
pub fn auto_checkpoints<H: Host>(h: &H) {
    let now = now_ms();
    for t in h.live() {
        let s = &t.session;
        let cfg = s.record().config;
        let (muts, last) = s.activity();
        let min_gap = cfg.auto_checkpoint_min_interval_secs * 1000;
        let by_ops = cfg.auto_checkpoint_ops > 0 && muts >= cfg.auto_checkpoint_ops;
        let by_idle = cfg.auto_checkpoint_idle_secs > 0
            && muts > 0
            && now.saturating_sub(last) >= cfg.auto_checkpoint_idle_secs * 1000;
        let last_auto = t.last_auto_ms.load(Ordering::Relaxed);
        if !((by_ops || by_idle) && now.saturating_sub(last_auto) >= min_gap) {
            continue;
        }
        let Ok(_g) = s.op_lock.try_lock() else {
            continue;
        };
        let r = syncfs(&t.mountpoint).and_then(|_| {
            let (muts, _) = s.activity();
            let actor = crate::oplog::Actor::daemon();
            let call = super::record::Call {
                actor: &actor,
                explanation: None,
                request: serde_json::json!({"op": "checkpoint", "trigger": "auto", "changes": muts}),
            };
            let store = s.store().clone();
            let mut hook = call.checkpoint_hook(&*store, "checkpoint");
            s.checkpoint_logged(
                &format!("auto: {muts} changes"),
                "auto",
                None,
                serde_json::Map::new(),
                Some(&mut hook),
            )
        });
        match r {
            Ok(c) => log::info!("session {}: automatic checkpoint {}", s.name(), &c.id[..12]),
            Err(e) => log::error!("session {}: automatic checkpoint failed: {e}", s.name()),
        }
        t.last_auto_ms.store(now, Ordering::Relaxed);
    }
}
