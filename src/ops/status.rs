//! `status`: paths changed since the last checkpoint (ignored ones left out, as
//! `diff` leaves them: [`super::diff::filter`]). A read-only question: on a full
//! store, where the live state cannot be saved to be compared, it answers from the
//! state last saved and says so ([`StatusAnswer::store_full`]). And what a session is told
//! about its branch when someone else moved it ([`branch_notice`], in every answer
//! to a session op, status included).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::views::{BranchMoved, PathChange};
use super::{Target, working_root_or_saved};
use crate::diff;
use crate::error::Result;
use crate::id::CheckpointId;
use crate::session::Session;

fn short(v: &Option<CheckpointId>) -> String {
    v.map_or_else(|| "-".into(), |h| h.short())
}

fn hex(v: Option<CheckpointId>) -> Option<String> {
    v.map(|h| h.to_hex())
}

/// The session's branch as someone else left it, if they did: HEAD is attached
/// to a branch that no longer names HEAD (the next checkpoint will detach it), or
/// a checkpoint already detached HEAD for that reason (`SessionRecord::branch_moved`,
/// until the session next sets HEAD itself). `None` when nothing is amiss or the
/// branch cannot be read (a read error is the op's own business, not the notice's).
pub(crate) fn branch_notice(s: &Session) -> Option<Value> {
    serde_json::to_value(branch_moved(s)?).ok()
}

/// The typed form of [`branch_notice`].
pub(crate) fn branch_moved(s: &Session) -> Option<BranchMoved> {
    let rec = s.record();
    if let Some(b) = &rec.branch {
        let now = crate::refs::get_ref(&**s.store(), b)
            .ok()?
            .map(|r| r.checkpoint);
        if now == rec.head {
            return None;
        }
        let b = &crate::refs::names::display(b, Some(s.name()));
        let message = format!(
            "branch {b} was {} by someone else (HEAD is {}): your next checkpoint \
             detaches HEAD; `treefork checkout {b}` follows the branch",
            match &now {
                Some(_) => format!("moved to {}", short(&now)),
                None => "deleted".into(),
            },
            short(&rec.head)
        );
        return Some(BranchMoved {
            branch: b.clone(),
            to: hex(now),
            head: hex(rec.head),
            detached: false,
            message,
        });
    }
    let mut m = rec.branch_moved?;
    m.branch = crate::refs::names::display(&m.branch, Some(s.name()));
    let message = format!(
        "HEAD was detached from branch {}, which someone else {} while HEAD was at {}; \
         `treefork checkout -b NAME` keeps your work on a branch of its own",
        m.branch,
        match &m.to {
            Some(_) => format!("moved to {}", short(&m.to)),
            None => "deleted".into(),
        },
        short(&m.head)
    );
    Some(BranchMoved {
        branch: m.branch,
        to: hex(m.to),
        head: hex(m.head),
        detached: true,
        message,
    })
}

/// The answer to `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusAnswer {
    /// HEAD's checkpoint (hex); `null` before the session's first.
    pub head: Option<String>,
    /// The branch HEAD is attached to; `null` when detached.
    pub branch: Option<String>,
    /// Paths changed since HEAD (since the session's start without one), ignored
    /// ones left out unless asked for (then marked).
    pub changes: Vec<PathChange>,
    /// The store is full: the writes not yet saved could not be, so `changes`
    /// is as of the last save (the message says so and what to do). Absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_full: Option<String>,
    /// Someone else moved the session's branch (added by the daemon to every
    /// session op's answer while it is so; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_moved: Option<BranchMoved>,
}

/// `status`: ignored paths left out, or (`ignored`) listed and marked.
pub(crate) fn run(t: &Target, ignored: bool) -> Result<StatusAnswer> {
    let s = &t.session;
    let (root, store_full) = working_root_or_saved(t)?;
    let filter = super::diff::filter(ignored, &[])?;
    let mut changes = Vec::new();
    diff::diff_walk_filtered(&**s.store(), s.base_root(), root, &filter, &mut |e| {
        changes.push(PathChange::from(&e));
        true
    })?;
    let rec = s.record();
    Ok(StatusAnswer {
        head: hex(rec.head),
        branch: rec
            .branch
            .map(|b| crate::refs::names::display(&b, Some(s.name()))),
        changes,
        store_full,
        branch_moved: None,
    })
}
