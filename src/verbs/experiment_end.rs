//! `experiment_end`: finish an experiment: record every run's result as one operation and remove
//! the forks (all but the winner's, unless `keep`; all with `abort`).
//!
//! The request is defined in `ops::experiment::end` and re-exported here: the library takes it
//! whole (`ops` cannot name `verbs`).

use super::prelude::*;

pub use crate::ops::experiment::end::ExperimentEnd;

impl Verb for ExperimentEnd {
    const NAME: &'static str = "experiment_end";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::experiment::answer::Comparison;

    fn agent_may(&self) -> bool {
        // An experiment adds forks of the agent's own session (names and
        // mountpoints chosen by the daemon, the agent ownership rule applied)
        // and one operation; its end removes only the forks that experiment
        // made, after recording their results; an adopt saves pending changes
        // first and is recorded (undoable). The daemon runs no command.
        let ExperimentEnd {
            id: _,
            results: _,
            rank_by: _,
            keep: _,
            abort: _,
            interrupted_by: _,
        } = self;
        true
    }
}

impl Handler for ExperimentEnd {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let t = cx.target();
        let lock = cx.lock();
        ops::experiment::end(cx.host, &t, lock, cx.actor, self)
    }
}
