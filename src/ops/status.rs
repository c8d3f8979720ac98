//! `status`: paths changed since the last checkpoint; and what a session is told
//! about its branch when someone else moved it ([`branch_notice`], in every answer
//! to a session op, status included).

use serde_json::{Value, json};

use super::{Target, working_root};
use crate::diff;
use crate::error::Result;
use crate::session::Session;

fn short(v: &Option<String>) -> String {
    match v {
        Some(h) => h[..h.len().min(12)].to_string(),
        None => "-".into(),
    }
}

/// The session's branch as someone else left it, if they did: HEAD is attached
/// to a branch that no longer names HEAD (the next checkpoint will detach it), or
/// a checkpoint already detached HEAD for that reason (`SessionRecord::branch_moved`,
/// until the session next sets HEAD itself). `None` when nothing is amiss or the
/// branch cannot be read (a read error is the op's own business, not the notice's).
pub(crate) fn branch_notice(s: &Session) -> Option<Value> {
    let rec = s.record();
    if let Some(b) = &rec.branch {
        let now = crate::refs::get_ref(&**s.store(), b)
            .ok()?
            .map(|r| r.checkpoint);
        if now == rec.head {
            return None;
        }
        let message = format!(
            "branch {b} was {} by someone else (HEAD is {}): your next checkpoint \
             detaches HEAD; `treefork checkout {b}` follows the branch",
            match &now {
                Some(_) => format!("moved to {}", short(&now)),
                None => "deleted".into(),
            },
            short(&rec.head)
        );
        return Some(json!({
            "branch": b, "to": now, "head": rec.head, "detached": false, "message": message,
        }));
    }
    let m = rec.branch_moved?;
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
    Some(json!({
        "branch": m.branch, "to": m.to, "head": m.head, "detached": true, "message": message,
    }))
}

pub(crate) fn run(t: &Target) -> Result<Value> {
    let s = &t.session;
    let root = working_root(t)?;
    let entries = diff::diff_roots(&**s.store(), s.base_root()?, root)?;
    let list: Vec<Value> = entries
        .iter()
        .map(|e| json!({"path": e.path_str(), "change": e.change}))
        .collect();
    let rec = s.record();
    Ok(json!({"head": rec.head, "branch": rec.branch, "changes": list}))
}
