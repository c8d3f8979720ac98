//! `restore`: rewind the tree, or some paths of it, to a ref.

use super::prelude::*;

/// Rewind the tree, or some paths of it, to a ref.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Restore {
    /// The ref.
    #[serde(rename = "ref")]
    pub target: String,
    /// Paths relative to the workspace root (empty: everything).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Only report what would change.
    #[serde(default)]
    pub dry_run: bool,
}

impl Verb for Restore {
    const NAME: &'static str = "restore";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::restore::Restored;

    fn agent_may(&self) -> bool {
        let Restore {
            target: _,
            paths: _,
            dry_run: _,
        } = self;
        true
    }
}

impl Handler for Restore {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::restore::run(
            &cx.target(),
            &cx.call,
            &self.target,
            &self.paths,
            self.dry_run,
        )
    }
}
