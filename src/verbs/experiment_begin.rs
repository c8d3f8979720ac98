//! `experiment_begin`: start an experiment: save the state, create and mount one fork per run.
//!
//! The request is defined in `ops::experiment::begin` and re-exported here: the library takes it
//! whole (`ops` cannot name `verbs`).

use super::prelude::*;

pub use crate::ops::experiment::begin::ExperimentBegin;

impl Verb for ExperimentBegin {
    const NAME: &'static str = "experiment_begin";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::experiment::begin::Begun;

    fn agent_may(&self) -> bool {
        // An experiment adds forks of the agent's own session (names and
        // mountpoints chosen by the daemon, the agent ownership rule applied)
        // and one operation; its end removes only the forks that experiment
        // made, after recording their results; an adopt saves pending changes
        // first and is recorded (undoable). The daemon runs no command.
        let ExperimentBegin {
            from: _,
            runs: _,
            cwd: _,
            forks_dir,
        } = self;
        // Where the forks are mounted on the host is the user's choice (the
        // request's `forks_dir` or the `forks_dir` setting), never an agent's.
        forks_dir.is_none()
    }

    fn refused_what(&self) -> String {
        format!("{} with \"forks_dir\"", Self::NAME)
    }
}

impl Handler for ExperimentBegin {
    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        // A message appended before this request is written with the state
        // before it (the writer's queue drains first).
        ops::messages::wait(t)
    }

    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let t = cx.target();
        let lock = cx.lock();
        ops::experiment::begin(cx.host, &t, lock, cx.who, &self, &cx.call)
    }
}
