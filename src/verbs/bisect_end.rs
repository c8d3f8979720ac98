//! `bisect_end`: unmount and remove forks of a bisect; on the final call (with
//! `result`) record the bisect as one inert `bisect` operation.
//!
//! The request is defined in `ops::bisect::end` and re-exported here: the library takes it
//! whole (`ops` cannot name `verbs`).

use super::prelude::*;

pub use crate::ops::bisect::end::BisectEnd;

impl Verb for BisectEnd {
    const NAME: &'static str = "bisect_end";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    // Checked in the library when a result is recorded: removing forks must
    // stay possible for an agent at its record quota.
    const RECORDS: bool = false;
    type Response = ops::bisect::end::BisectEnded;

    fn agent_may(&self) -> bool {
        // Only forks of this bisect of the caller's session are removed (any
        // other name refuses the request); the record is inert (no state moves).
        let BisectEnd {
            id: _,
            remove: _,
            result: _,
            abort: _,
        } = self;
        true
    }
}

impl Handler for BisectEnd {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let t = cx.target();
        let lock = cx.lock();
        ops::bisect::end(cx.host, &t, lock, cx.actor, self)
    }
}
