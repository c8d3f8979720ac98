//! `message_flush`: answer once every message appended before is durable.

use super::prelude::*;

/// Answer once every message appended before is durable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageFlush {}

impl Verb for MessageFlush {
    const NAME: &'static str = "message_flush";
    const KIND: Kind = Kind::Unlocked;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::messages::Durable;

    fn agent_may(&self) -> bool {
        // The conversation log: appending adds records; a rewind hides
        // messages (never deletes them), saves pending changes first and is
        // an undoable operation; the metadata merge changes counters only.
        let MessageFlush {} = self;
        true
    }
}

impl Handler for MessageFlush {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::messages::flush(&cx.target())
    }
}
