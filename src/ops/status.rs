//! `status`: paths changed since the last checkpoint.

use serde_json::{Value, json};

use super::{Target, working_root};
use crate::diff;
use crate::error::Result;

pub(super) fn run(t: &Target) -> Result<Value> {
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
