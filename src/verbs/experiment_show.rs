//! `experiment_show`: a recorded experiment (default: the newest).

use super::prelude::*;

/// A recorded experiment (default: the newest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentShow {
    /// The experiment id.
    #[serde(default)]
    pub id: Option<String>,
}

impl Verb for ExperimentShow {
    const NAME: &'static str = "experiment_show";
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
        let ExperimentShow { id: _ } = self;
        true
    }
}

impl Handler for ExperimentShow {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::experiment::show(
            &*cx.host.store(),
            cx.target().session.name(),
            self.id.as_deref(),
        )
    }
}
