//! `op_log`: the session's operations, newest first.

use super::prelude::*;

/// The session's operations, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpLog {
    /// At most this many.
    #[serde(default)]
    pub limit: Option<usize>,
}

impl Verb for OpLog {
    const NAME: &'static str = "op_log";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::oplog_list::OpLogAnswer;

    fn agent_may(&self) -> bool {
        // Additive: they append operations and save pending changes first;
        // whatever they move back is still named by the log.
        let OpLog { limit: _ } = self;
        true
    }
}

impl Handler for OpLog {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::oplog_list::run(&cx.target(), self.limit)
    }
}
