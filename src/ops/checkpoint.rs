//! `checkpoint`: save the live tree as a checkpoint of the session (moving the
//! branch HEAD is attached to), recorded as an operation in the same commit.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::record::Call;
use super::views::CheckpointView;
use super::{Target, syncfs};
use crate::error::Result;
use crate::refs;

/// The answer to `checkpoint`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointAnswer {
    /// The checkpoint taken.
    pub checkpoint: CheckpointView,
    /// The branch HEAD is attached to (moved to it); `null` when detached.
    pub branch: Option<String>,
}

pub(crate) fn run(
    t: &Target,
    call: &Call,
    message: &str,
    trigger: &str,
    meta: serde_json::Map<String, Value>,
) -> Result<CheckpointAnswer> {
    refs::validate_requested_trigger(trigger)?;
    syncfs(&t.mount)?;
    refs::validate_meta(&meta)?;
    let store = t.session.store().clone();
    let mut hook = call.checkpoint_hook(&*store, "checkpoint");
    let c = t
        .session
        .checkpoint_logged(message, trigger, None, meta, Some(&mut hook))?;
    let rec = t.session.record();
    Ok(CheckpointAnswer {
        checkpoint: CheckpointView::from(&c),
        branch: rec
            .branch
            .map(|b| crate::refs::names::display(&b, Some(&rec.name))),
    })
}
