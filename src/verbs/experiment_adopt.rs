//! `experiment_adopt`: bring a run's final state into the session (saving pending changes first).
//!
//! The request is defined in `ops::experiment::adopt` and re-exported here: the library takes it
//! whole (`ops` cannot name `verbs`).

use super::prelude::*;

pub use crate::ops::experiment::adopt::ExperimentAdopt;

impl Verb for ExperimentAdopt {
    const NAME: &'static str = "experiment_adopt";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::experiment::adopt::Adopted;

    fn agent_may(&self) -> bool {
        // An experiment adds forks of the agent's own session (names and
        // mountpoints chosen by the daemon, the agent ownership rule applied)
        // and one operation; its end removes only the forks that experiment
        // made, after recording their results; an adopt saves pending changes
        // first and is recorded (undoable). The daemon runs no command.
        let ExperimentAdopt {
            id: _,
            run: _,
            winner: _,
        } = self;
        true
    }
}

impl Handler for ExperimentAdopt {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let t = cx.target();
        let lock = cx.lock();
        ops::experiment::adopt(cx.host, &t, &lock, cx.actor, &self)
    }
}
