//! `ping`: liveness check; answers the daemon's pid and store.

use super::prelude::*;

/// Liveness check; answers the daemon's pid and store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ping {}

impl Verb for Ping {
    const NAME: &'static str = "ping";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = Value;

    fn agent_may(&self) -> bool {
        // Reads stored states only (never follows links out of the tree).
        // Streaming changes how the answer is framed, not what it reveals.
        let Ping {} = self;
        true
    }
}

impl Handler for Ping {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Value> {
        Ok(cx.host.ping(cx.session))
    }
}
