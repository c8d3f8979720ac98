//! `fsck`: verify the store (and with `repair`, fix what can be fixed; store offline only).

use super::prelude::*;

/// Verify the store (and with `repair`, fix what can be fixed; store offline only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fsck {
    /// Rebuild the index from packs and move unusable records aside.
    #[serde(default)]
    pub repair: bool,
}

impl Verb for Fsck {
    const NAME: &'static str = "fsck";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Value;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Fsck { repair: _ } = self;
        false
    }
}

impl Handler for Fsck {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Value> {
        cx.host.fsck(self.repair, cx.events)
    }
}
