//! `rebase`: replay the session's changes since its baseline onto the durable
//! repository's new head (a three-way merge per file; base = the baseline).

use super::prelude::*;

/// The request is the library's (`ops::merge::rebase::RebaseRequest`).
pub use crate::ops::merge::rebase::RebaseRequest as Rebase;

impl Verb for Rebase {
    const NAME: &'static str = "rebase";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::merge::MergeAnswer;

    fn agent_may(&self) -> bool {
        // Reads the durable repository (as its owner) into the session's own
        // workspace: an agent only onto the branch its session came from (an
        // `onto` could name any commit its uid may not read).
        let Rebase {
            onto,
            dry_run: _,
            cont: _,
            abort: _,
        } = self;
        onto.is_none()
    }

    fn refused_what(&self) -> String {
        "rebase with onto".to_string()
    }
}

impl Handler for Rebase {
    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        // A message appended before this request is written with the state
        // before it (the writer's queue drains first).
        ops::messages::wait(t)
    }

    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::merge::rebase::run(&cx.target(), &cx.call, &self)
    }
}
