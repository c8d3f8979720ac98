//! `branch`: create a branch at a ref (default: HEAD, checkpointing pending changes first).

use super::prelude::*;

/// Create a branch at a ref (default: HEAD, checkpointing pending changes first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Branch {
    /// Branch name.
    pub name: String,
    /// Ref it points at.
    #[serde(default)]
    pub from: Option<String>,
}

impl Verb for Branch {
    const NAME: &'static str = "branch";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::branch::Made;

    fn agent_may(&self) -> bool {
        // Creates a new name only: an existing name is refused (`conflict`)
        // for every role, so no op moves or overwrites a branch.
        let Branch { name: _, from: _ } = self;
        true
    }
}

impl Handler for Branch {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::branch::create(
            cx.host,
            &cx.target(),
            &cx.call,
            &self.name,
            self.from.as_deref(),
        )
    }
}
