//! `bisect_step`: the results of a search's pending candidates in; the next
//! round's forks (or the end) out. The daemon's search decides, the client only
//! runs the command and reports.
//!
//! The request is defined in `ops::bisect::searching` and re-exported here: the
//! library takes it whole (`ops` cannot name `verbs`).

use super::prelude::*;

pub use crate::ops::bisect::searching::BisectStep;

impl Verb for BisectStep {
    const NAME: &'static str = "bisect_step";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    // The record is `bisect_end`'s.
    const RECORDS: bool = false;
    type Response = crate::command::bisect::Stepped;

    fn agent_may(&self) -> bool {
        // Results of the caller's own session's bisect only (its state is under
        // that session); the forks it makes and removes are that bisect's, as
        // `bisect_begin` and `bisect_end` make and remove them.
        let BisectStep { id: _, results: _ } = self;
        true
    }
}

impl Handler for BisectStep {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let by_agent = cx.call.actor.is_agent();
        let t = cx.target();
        let lock = cx.lock();
        ops::bisect::step(cx.host, &t, lock, cx.who, &self, by_agent)
    }
}
