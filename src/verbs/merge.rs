//! `merge`: Merge a ref (checkpoint, branch, session, experiment run, remote ref) into the session: a three-way merge from their merge base; a checkpoint with two parents, or a stop on conflicts.

use super::prelude::*;
use crate::ops::merge::start::MergeRequest;

/// Merge a ref (checkpoint, branch, session, experiment run, remote ref) into the session: a three-way merge from their merge base; a checkpoint with two parents, or a stop on conflicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Merge {
    /// The ref to bring in (required unless `continue` or `abort`).
    #[serde(rename = "ref", default)]
    pub target: Option<String>,
    /// More refs merged at once (an octopus merge; at most 15).
    #[serde(default)]
    pub also: Vec<String>,
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

impl Verb for Merge {
    const NAME: &'static str = "merge";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::merge::MergeAnswer;

    fn agent_may(&self) -> bool {
        // Refs resolve in the agent's view; the session's own workspace changes.
        let Merge {
            target: _,
            also: _,
            message: _,
            dry_run: _,
            cont: _,
            abort: _,
        } = self;
        true
    }
}

impl Handler for Merge {
    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        // A message appended before this request is written with the state
        // before it (the writer's queue drains first).
        ops::messages::wait(t)
    }

    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let Merge {
            target,
            also,
            message,
            dry_run,
            cont,
            abort,
        } = self;
        let req = MergeRequest {
            target,
            also,
            message,
            dry_run,
            cont,
            abort,
        };
        ops::merge::start::merge(&cx.target(), &cx.call, &req)
    }
}
