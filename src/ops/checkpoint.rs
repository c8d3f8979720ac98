//! `checkpoint`: save the live tree as a checkpoint of the session.

use serde_json::{Value, json};

use super::{Target, ckpt_json, syncfs};
use crate::error::Result;
use crate::refs;

pub(super) fn run(
    t: &Target,
    message: &str,
    trigger: &str,
    meta: serde_json::Map<String, Value>,
) -> Result<Value> {
    refs::validate_requested_trigger(trigger)?;
    syncfs(&t.mountpoint)?;
    refs::validate_meta(&meta)?;
    let c = t
        .session
        .checkpoint_with_meta(message, trigger, None, meta)?;
    Ok(json!({"checkpoint": ckpt_json(&c)}))
}
