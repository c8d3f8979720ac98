//! `bisect_begin`, `bisect_step`, `bisect_end`: the search of a bisect, its
//! forks, made and removed by the daemon, and its one record.
//!
//! A bisect's command is run by a client (the CLI's `bisect run`, the MCP
//! `bisect` tool, the Python client); the search is the daemon's: `bisect_begin`
//! with `search` finds the candidates, keeps the search state and makes the first
//! round's forks; the client runs its command in each and reports the outcomes
//! with `bisect_step`, which answers the next round's forks or the end; the final
//! `bisect_end` records the daemon's result as one inert `bisect` operation in
//! the source session's log. Nothing else is recorded: the forks add no
//! operation of their own. (`bisect_begin` without `search` and `bisect_end`
//! with a client's `result` are the older, client-driven form, still served.)
//!
//! Split: [`search`] (the pure k-ary search), [`state`] (its stored state, the
//! range), [`searching`] (search begin and `bisect_step`), [`begin`] (check,
//! build the records, write them in one commit, mount), [`end`] (remove the
//! named forks, record the result).
//!
//! Invariants:
//! - fork `n` of bisect `ID` of session `S` is the session `S-bID-n` (the part
//!   of `S` cut so the name fits), created at the candidate's checkpoint and
//!   mounted at `<parent of S's mountpoint>/.<its name>.bisect/S-bID-n`, under
//!   the agent ownership rule (`daemon::mountpoint`), as experiment forks are;
//!   its record's `origin` (`refs::origin::BisectCandidate`), so forks
//!   left by a crash are found, listed by `sessions` and removable by `session rm`;
//! - `bisect_end` removes only forks whose `origin` names that id and this
//!   session as the source; a bisect is recorded once;
//! - a search's state (`state`) is written in the same commit as the forks it
//!   names; a round's results are taken once (validated against the pending
//!   candidates); the result a search records is the daemon's, never a client's.

pub mod begin;
pub mod end;
pub mod search;
pub mod searching;
pub mod state;

pub use end::end;
pub use searching::step;

use std::sync::MutexGuard;

use crate::control::MountFor;
use crate::error::{Error, Result};
use crate::oplog::{self, Operation};
use crate::ops::{Host, Target};
use crate::session::{self, SessionRecord};
use crate::store::ObjectStore;

/// The operation kind of a recorded bisect.
pub const KIND: &str = "bisect";
/// Longest session name (`session::validate_session_name`).
const MAX_SESSION_NAME: usize = 64;
/// Highest fork number (the names leave room for six digits).
pub const MAX_N: u32 = 999_999;

/// `bisect_begin`: a search the daemon keeps (with `search`), or the forks
/// asked.
pub fn begin<H: Host>(
    h: &H,
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    who: MountFor,
    req: &begin::BisectBegin,
    by_agent: bool,
) -> Result<begin::BisectBegun> {
    match &req.search {
        Some(spec) => searching::begin(h, t, op_lock, who, req, spec, by_agent),
        None => begin::begin(h, t, op_lock, who, req, by_agent),
    }
}

/// The name of fork `n` of bisect `id` of `session`: `<session>-b<id>-<n>`, the
/// session part cut so that every fork name fits.
pub fn fork_name(session: &str, id: &str, n: u32) -> String {
    let room = MAX_SESSION_NAME.saturating_sub(id.len() + 3 + 6);
    let cut: String = session.chars().take(room).collect();
    format!("{cut}-b{id}-{n}")
}

/// Check a bisect id from a request (hex digits only, bounded).
fn check_id(id: &str) -> Result<()> {
    if !id.is_empty() && id.len() <= 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(Error::Invalid(format!("bad bisect id {id:?}")))
    }
}

/// The number of the candidate `rec` is in bisect `id` of `session`, if it is
/// one: its origin says so and its name is that candidate's (never the source
/// itself, nor a session whose record was copied from a fork's).
fn candidate_of(rec: &SessionRecord, session: &str, id: &str) -> Option<u32> {
    let m = rec.origin.as_ref()?.bisect()?;
    let ours = m.id == id && m.source == session && rec.name == fork_name(session, id, m.n);
    ours.then_some(m.n)
}

/// The forks of bisect `id` of `session` that exist, by number: records whose
/// `origin` names that id and session and whose name is that fork's.
fn forks(store: &dyn ObjectStore, session: &str, id: &str) -> Result<Vec<(u32, SessionRecord)>> {
    let mut out: Vec<(u32, SessionRecord)> = session::list_records(store)?
        .into_iter()
        .filter_map(|r| Some((candidate_of(&r, session, id)?, r)))
        .collect();
    out.sort_by_key(|(n, _)| *n);
    Ok(out)
}

/// The recorded bisect `id` of `session`, if there is one.
fn recorded(store: &dyn ObjectStore, session: &str, id: &str) -> Result<Option<Operation>> {
    oplog::walk::find_back(store, session, usize::MAX, &|o| {
        o.kind == KIND && o.meta.get("id").and_then(|v| v.as_str()) == Some(id)
    })
}
