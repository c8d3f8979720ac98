//! `gc`: garbage-collect the store (mark & sweep from every root, then repack).

use super::prelude::*;

/// Garbage-collect the store (mark & sweep from every root, then repack).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gc {
    /// Only report what would be reclaimed.
    #[serde(default)]
    pub dry_run: bool,
}

impl Verb for Gc {
    const NAME: &'static str = "gc";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Value;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Gc { dry_run: _ } = self;
        false
    }
}

impl Handler for Gc {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Value> {
        cx.host.gc(self.dry_run, cx.events)
    }
}
