//! `history`: exec records of the session, newest first.

use super::prelude::*;

/// Exec records of the session, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct History {
    /// At most this many.
    #[serde(default)]
    pub limit: Option<usize>,
}

impl Verb for History {
    const NAME: &'static str = "history";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::exec::answers::HistoryAnswer;

    fn agent_may(&self) -> bool {
        // Recording a command adds a checkpoint and an operation; reading the
        // history reveals nothing the log does not.
        let History { limit: _ } = self;
        true
    }
}

impl Handler for History {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::exec::list(&cx.target(), self.limit)
    }
}
