//! `store_trim`: the request to a [`crate::remote::trim`] call.

use serde_json::{Value, json};

use crate::control::Op;
use crate::error::{Error, Result};
use crate::gc::Live;
use crate::remote::trim::{TrimRequest, trim};
use crate::store::Packs;

/// The trim `op` (an `Op::StoreTrim`) asks for; `older_than` is checked here.
pub fn request(op: &Op) -> Result<TrimRequest> {
    let Op::StoreTrim {
        older_than,
        keep_sessions,
        dry_run,
    } = op
    else {
        return Err(Error::Invalid(format!("{} is not store_trim", op.name())));
    };
    let older_than = match older_than {
        Some(d) => Some(crate::lifecycle::parse_duration(d)?),
        None => None,
    };
    Ok(TrimRequest {
        older_than,
        keep_sessions: *keep_sessions,
        dry_run: *dry_run,
    })
}

/// Serve `store_trim` on `store` (`live`: the mounted sessions, or
/// [`crate::gc::Offline`]); progress events go to `events`. The caller holds
/// whatever serializes gc on this store (the daemon's maintenance lock, or the
/// store lock offline).
pub fn run(
    store: &dyn Packs,
    live: &dyn Live,
    op: &Op,
    events: &mut dyn FnMut(Value),
) -> Result<Value> {
    let req = request(op)?;
    let now = crate::clock::unix_secs();
    let mut last = std::time::Instant::now();
    let mut progress = |phase: &str, done: u64, total: u64| {
        if done == total || last.elapsed() > std::time::Duration::from_millis(100) {
            last = std::time::Instant::now();
            events(json!({"event": "progress", "phase": phase, "done": done, "total": total}));
        }
    };
    Ok(json!(trim(store, live, &req, now, &mut progress)?))
}
