//! `merge`: merge refs (checkpoint, branch, session, experiment run, remote ref)
//! into the session: a three-way merge from their merge base; a checkpoint with
//! two parents (or more), or a stop on conflicts.

use super::prelude::*;

/// The request is the library's (`ops::merge::start::MergeRequest`), as it comes
/// over the wire.
pub use crate::ops::merge::start::MergeRequest as Merge;

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
        ops::merge::start::merge(&cx.target(), &cx.call, &self)
    }
}
