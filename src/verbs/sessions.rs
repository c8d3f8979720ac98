//! `sessions`: list sessions.

use super::prelude::*;

/// List sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sessions {}

impl Verb for Sessions {
    const NAME: &'static str = "sessions";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Value;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Sessions {} = self;
        false
    }
}

impl Handler for Sessions {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Value> {
        cx.host.sessions()
    }
}
