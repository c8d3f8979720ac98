//! `experiment_begin`, `experiment_end`, `experiment_show`, `experiment_adopt`: try
//! N commands at once, each in its own fork of the session, and keep the best.
//!
//! Split by concern: [`begin`] (save the state, create and mount one fork per run),
//! [`end`] (take each fork's final state, rank, compare, record one `experiment`
//! operation, remove the forks), [`adopt`] (graft a run's final state into the
//! source session, recorded as an `adopt` operation), [`compare`] (the pure
//! ranking, statistics and output comparison), [`answer`] (the stored experiment
//! document and the answer of `experiment_end`/`experiment_show`). Each request
//! struct is defined beside the function that takes it (the verb files re-export
//! it). The run types the requests carry
//! (`RunSpec`, `RunResult`) are `crate::command::wire`'s, below the protocol.
//!
//! The daemon never runs the commands: the CLI does, as its caller, in the forks'
//! mountpoints. What the CLI reports is checked and bounded before it is stored.
//!
//! Invariants:
//! - fork `i` (from 1) of experiment `ID` of session `S` is the session
//!   `S-xID-i`, created from one checkpoint of S (the experiment's base) and mounted
//!   at `<parent of S's mountpoint>/.<its name>.experiments/S-xID-i`, a directory the
//!   daemon creates (for an agent of another uid: under the rule of
//!   `daemon::mountpoint`, owned by the agent); its session record carries
//!   `origin` (`refs::origin::ExperimentRun`: id, source, run, label, ...), so forks left by a daemon
//!   crash are found, listed by `sessions` and removable by `session rm`;
//! - an experiment is recorded once (`experiment_end` refuses an id already
//!   recorded); its record's `meta` holds every run's result, the ranking, the
//!   statistics, each run's final checkpoint and the file-tree diffs between runs;
//! - a run's final state is a checkpoint of its fork: it stays reachable while
//!   the fork exists (the winner's fork is kept, unmounted, until it is adopted;
//!   every fork with `keep`), and after an adopt as the source session's HEAD;
//! - a fork left in the store goes with its source: removed with it (`session
//!   rm`, `session discard`) and by the sweep once the source is gone, discarded
//!   or expired ([`left`]), unless it is mounted.

pub mod adopt;
pub mod answer;
pub mod begin;
pub mod compare;
pub mod end;
pub mod left;

pub use adopt::adopt;
pub(crate) use begin::begin;
pub use end::end;

use self::answer::{Comparison, Recorded};
use crate::error::{Error, Result};
use crate::oplog::{self, Operation};
use crate::session::{self, SessionRecord};
use crate::store::ObjectStore;

/// The operation kind of a recorded experiment.
pub const KIND: &str = "experiment";
/// The operation kind of an adopt.
pub const ADOPT_KIND: &str = "adopt";

/// The name of fork `run` of experiment `id` of `session`.
pub fn fork_name(session: &str, id: &str, run: u32) -> String {
    format!("{session}-x{id}-{run}")
}

/// A fresh experiment id: six hex digits.
pub(crate) fn new_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let mut h = blake3::Hasher::new();
    h.update(&crate::clock::unix_ms().to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(&N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let nanos = crate::clock::since_epoch().subsec_nanos();
    h.update(&nanos.to_le_bytes());
    crate::id::hex(&h.finalize().as_bytes()[..3])
}

/// Check an experiment id from a request (hex digits only, bounded).
fn check_id(id: &str) -> Result<()> {
    if !id.is_empty() && id.len() <= 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(Error::Invalid(format!("bad experiment id {id:?}")))
    }
}

/// The run whose fork `rec` is in experiment `id` of `session`, if it is one: its
/// origin says so and its name is that run's fork name.
fn run_of_fork(rec: &SessionRecord, session: &str, id: &str) -> Option<u32> {
    let m = rec.origin.as_ref()?.experiment()?;
    let ours = m.id == id && m.source == session && rec.name == fork_name(session, id, m.run);
    ours.then_some(m.run)
}

/// The forks of experiment `id` of `session` that still exist, by run number.
fn forks(store: &dyn ObjectStore, session: &str, id: &str) -> Result<Vec<(u32, SessionRecord)>> {
    let mut out: Vec<(u32, SessionRecord)> = session::list_records(store)?
        .into_iter()
        .filter_map(|r| Some((run_of_fork(&r, session, id)?, r)))
        .collect();
    out.sort_by_key(|(run, _)| *run);
    Ok(out)
}

/// The recorded experiment `id` of `session` (the newest one when `id` is `None`).
fn recorded(store: &dyn ObjectStore, session: &str, id: Option<&str>) -> Result<Option<Operation>> {
    if let Some(id) = id {
        check_id(id)?;
    }
    oplog::walk::find_back(store, session, usize::MAX, &|o| {
        o.kind == KIND && id.is_none_or(|id| o.meta["id"].as_str() == Some(id))
    })
}

/// The recorded experiment, or `NotFound` naming it.
fn recorded_or_err(store: &dyn ObjectStore, session: &str, id: Option<&str>) -> Result<Operation> {
    recorded(store, session, id)?.ok_or_else(|| {
        Error::NotFound(match id {
            Some(id) => format!("session {session} has no recorded experiment {id}"),
            None => format!("session {session} has no recorded experiment"),
        })
    })
}

/// `experiment_show`: a recorded experiment, with its runs' output diffs.
pub fn show(store: &dyn ObjectStore, session: &str, id: Option<&str>) -> Result<Comparison> {
    let op = recorded_or_err(store, session, id)?;
    let doc: Recorded = serde_json::from_value(serde_json::Value::Object(op.meta))
        .map_err(|e| Error::corrupt(format!("experiment operation {}", op.seq), e.to_string()))?;
    Ok(doc.answer(op.seq))
}
