//! `revert`: take out what one checkpoint (or `exec@N`: one recorded command) changed, keeping what came after it: a three-way merge with base = its state and theirs = the state before it; a stop on conflicts as merge.

use super::prelude::*;
use crate::ops::merge::start::MergeRequest;

/// Take out what one checkpoint (or `exec@N`: one recorded command) changed, keeping what came after it: a three-way merge with base = its state and theirs = the state before it; a stop on conflicts as merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Revert {
    /// The ref to bring in (required unless `continue` or `abort`).
    #[serde(rename = "ref", default)]
    pub target: Option<String>,
    /// The checkpoint's message (default: says what was brought in).
    #[serde(default)]
    pub message: Option<String>,
    /// Only report what would change and conflict.
    #[serde(default)]
    pub dry_run: bool,
    /// Finish the one stopped on conflicts, once they are resolved.
    #[serde(default, rename = "continue")]
    pub cont: bool,
    /// Put the workspace back as it was before the stopped one.
    #[serde(default)]
    pub abort: bool,
}

impl Verb for Revert {
    const NAME: &'static str = "revert";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::merge::MergeAnswer;

    fn agent_may(&self) -> bool {
        // Refs resolve in the agent's view; the session's own workspace changes.
        let Revert {
            target: _,
            message: _,
            dry_run: _,
            cont: _,
            abort: _,
        } = self;
        true
    }
}

impl Handler for Revert {
    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        // A message appended before this request is written with the state
        // before it (the writer's queue drains first).
        ops::messages::wait(t)
    }

    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let Revert {
            target,
            message,
            dry_run,
            cont,
            abort,
        } = self;
        let req = MergeRequest {
            target,
            also: Vec::new(),
            message,
            dry_run,
            cont,
            abort,
        };
        ops::merge::start::revert(&cx.target(), &cx.call, &req)
    }
}
