//! `promote`: promote the session's chosen paths back to the durable git repository it
//! was imported from (user role only; see docs/design.md, "Promote").
//!
//! The request is defined in `ops::promote` and re-exported here: the library takes it
//! whole (`ops` cannot name `verbs`).

use super::prelude::*;

pub use crate::ops::promote::Promote;

impl Verb for Promote {
    const NAME: &'static str = "promote";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = true;
    type Response = ops::promote::answer::PromoteAnswer;

    fn agent_may(&self) -> bool {
        // Writes to the user's durable git repository (commits, branches,
        // index and work tree): the user's decision, never the agent's.
        let Promote {
            paths: _,
            strategy: _,
            message: _,
            dry_run: _,
            branch: _,
            onto_head: _,
            allow_large: _,
        } = self;
        false
    }
}

impl Handler for Promote {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::promote::run(&cx.target(), &cx.call, self)
    }
}
