//! `experiment_begin`: start an experiment: save the state, create and mount one fork per run.

use super::prelude::*;

/// Start an experiment: save the state, create and mount one fork per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentBegin {
    /// Ref to start from (default: the current state, checkpointed).
    #[serde(default)]
    pub from: Option<String>,
    /// The runs (at least one, at most the `experiment_max_runs` setting).
    pub runs: Vec<crate::command::RunSpec>,
    /// The caller's directory relative to the workspace root.
    #[serde(default)]
    pub cwd: Option<String>,
}

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
        } = self;
        true
    }
}

impl Handler for ExperimentBegin {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let req = ops::experiment::begin::Begin {
            from: self.from.as_deref(),
            runs: &self.runs,
            cwd: self.cwd.as_deref(),
            by_agent: cx.call.actor.is_agent(),
        };
        let t = cx.target();
        let lock = cx.lock();
        ops::experiment::begin(cx.host, &t, lock, cx.who, req)
    }
}
