//! `history_show`: one exec record with its captured output.

use super::prelude::*;

/// One exec record with its captured output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryShow {
    /// The exec number.
    pub exec: u64,
}

impl Verb for HistoryShow {
    const NAME: &'static str = "history_show";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::exec::answers::HistoryShown;

    fn agent_may(&self) -> bool {
        // Recording a command adds a checkpoint and an operation; reading the
        // history reveals nothing the log does not.
        let HistoryShow { exec: _ } = self;
        true
    }
}

impl Handler for HistoryShow {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::exec::show(&cx.target(), self.exec)
    }
}
