//! `shutdown`: flush everything, unmount everything, exit.

use super::prelude::*;

/// Flush everything, unmount everything, exit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Shutdown {}

impl Verb for Shutdown {
    const NAME: &'static str = "shutdown";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Value;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Shutdown {} = self;
        false
    }
}

impl Handler for Shutdown {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Value> {
        cx.host.shutdown()
    }
}
