//! `log`: the session's checkpoints, newest first.

use serde_json::{Value, json};

use super::{DEFAULT_LOG_LIMIT, Target, ckpt_json};
use crate::error::Result;
use crate::id::CheckpointId;
use crate::refs;

pub(super) fn run(t: &Target, limit: Option<usize>) -> Result<Value> {
    let limit = limit.unwrap_or(DEFAULT_LOG_LIMIT);
    let store = t.session.store();
    let mut out = Vec::new();
    let mut cur = t.session.record().head;
    while let Some(id) = cur.as_deref().and_then(CheckpointId::from_hex) {
        if out.len() >= limit {
            break;
        }
        let c = refs::load(&**store, &id)?;
        cur = c.parent().map(str::to_string);
        out.push(ckpt_json(&c));
    }
    Ok(json!({"checkpoints": out}))
}
