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
    type Response = Collected;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Gc { dry_run: _ } = self;
        false
    }
}

/// The answer to `gc`: the collection's report and what the retention pass
/// before it removed (nothing in a dry run).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Collected {
    /// What the collection found and did.
    pub gc: crate::gc::GcReport,
    /// Operation records past their retention, removed.
    #[serde(default)]
    pub operations_pruned: usize,
    /// Sessions discarded longer than the retention period, removed.
    #[serde(default)]
    pub discarded_removed: usize,
    /// `auto/...` refs past their retention, dropped.
    #[serde(default)]
    pub auto_refs_dropped: usize,
}

impl Handler for Gc {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Collected> {
        cx.host.gc(self.dry_run, cx.events)
    }
}
