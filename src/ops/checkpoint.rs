//! `checkpoint`: save the live tree as a checkpoint of the session (moving the
//! branch HEAD is attached to), recorded as an operation in the same commit.

use serde_json::{Value, json};

use super::record::Call;
use super::{Target, ckpt_json, syncfs};
use crate::error::Result;
use crate::refs;

pub(crate) fn run(
    t: &Target,
    call: &Call,
    message: &str,
    trigger: &str,
    meta: serde_json::Map<String, Value>,
) -> Result<Value> {
    refs::validate_requested_trigger(trigger)?;
    syncfs(&t.mount)?;
    refs::validate_meta(&meta)?;
    let store = t.session.store().clone();
    let mut hook = call.checkpoint_hook(&*store, "checkpoint");
    let c = t
        .session
        .checkpoint_logged(message, trigger, None, meta, Some(&mut hook))?;
    let rec = t.session.record();
    Ok(json!({"checkpoint": ckpt_json(&c), "branch": rec.branch}))
}
