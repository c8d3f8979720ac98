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
    type Response = Stopping;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Shutdown {} = self;
        false
    }
}

/// The answer to `shutdown`: an empty object (the daemon flushes, unmounts
/// every session and exits after answering).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Stopping {}

impl Handler for Shutdown {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Stopping> {
        cx.host.shutdown()
    }
}
