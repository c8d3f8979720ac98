//! `store_trim`: the request to a [`crate::remote::trim`] call.

use serde_json::{Value, json};

use crate::error::Result;
use crate::gc::Live;
use crate::remote::trim::{TrimReport, TrimRequest, trim};
use crate::store::Packs;

/// The trim a `store_trim` request asks for; `older_than` is checked here.
pub fn request(
    older_than: Option<&str>,
    keep_sessions: bool,
    dry_run: bool,
) -> Result<TrimRequest> {
    let older_than = match older_than {
        Some(d) => Some(crate::lifecycle::parse_duration(d)?),
        None => None,
    };
    Ok(TrimRequest {
        older_than,
        keep_sessions,
        dry_run,
    })
}

/// Serve `store_trim` on `store` (`live`: the mounted sessions, or
/// [`crate::gc::Offline`]); progress events go to `events`. The caller holds
/// whatever serializes gc on this store (the daemon's maintenance lock, or the
/// store lock offline).
pub fn run(
    store: &dyn Packs,
    live: &dyn Live,
    req: TrimRequest,
    events: &mut dyn FnMut(Value),
) -> Result<TrimReport> {
    let now = crate::clock::unix_secs();
    let mut last = std::time::Instant::now();
    let mut progress = |phase: &str, done: u64, total: u64| {
        if done == total || last.elapsed() > std::time::Duration::from_millis(100) {
            last = std::time::Instant::now();
            events(json!({"event": "progress", "phase": phase, "done": done, "total": total}));
        }
    };
    trim(store, live, &req, now, &mut progress)
}
