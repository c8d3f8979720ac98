//! `experiment_end`: finish an experiment: record every run's result as one operation and remove
//! the forks (all but the winner's, unless `keep`; all with `abort`).

use super::prelude::*;

/// Finish an experiment: record every run's result as one operation and remove
/// the forks (all but the winner's, unless `keep`; all with `abort`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentEnd {
    /// The experiment id (from `experiment_begin`).
    pub id: String,
    /// What each run did.
    #[serde(default)]
    pub results: Vec<crate::command::RunResult>,
    /// `exit`, `duration`, `output` or `score` (default: exit 0 first, then duration).
    #[serde(default)]
    pub rank_by: Option<String>,
    /// Leave every fork mounted.
    #[serde(default)]
    pub keep: bool,
    /// The experiment was interrupted: remove every fork.
    #[serde(default)]
    pub abort: bool,
}

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
        } = self;
        true
    }
}

impl Handler for ExperimentEnd {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let ExperimentEnd {
            id,
            results,
            rank_by,
            keep,
            abort,
        } = self;
        let req = ops::experiment::end::End {
            id: &id,
            results,
            rank_by: rank_by.as_deref(),
            keep,
            abort,
        };
        let t = cx.target();
        let lock = cx.lock();
        ops::experiment::end(cx.host, &t, lock, cx.actor, req)
    }
}
