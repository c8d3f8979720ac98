//! `session_sweep`: run an eviction sweep now.

use super::prelude::*;

/// Run an eviction sweep now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSweep {}

impl Verb for SessionSweep {
    const NAME: &'static str = "session_sweep";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Value;

    fn agent_may(&self) -> bool {
        // Lifecycle changes (eviction policy, discard, evicting) are the user's.
        let SessionSweep {} = self;
        false
    }
}

impl Handler for SessionSweep {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Value> {
        cx.host.sweep()
    }
}
