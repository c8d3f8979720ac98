//! `branch_rename`: rename a branch (sessions attached to it follow).

use super::prelude::*;

/// Rename a branch (sessions attached to it follow).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchRename {
    /// Current name.
    pub old: String,
    /// New name.
    pub new: String,
}

impl Verb for BranchRename {
    const NAME: &'static str = "branch_rename";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = true;
    type Response = ops::branch::Renamed;

    fn agent_may(&self) -> bool {
        // Drops a name: the user's.
        let BranchRename { old: _, new: _ } = self;
        false
    }
}

impl Handler for BranchRename {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::branch::rename(cx.host, &cx.target(), &cx.call, &self.old, &self.new)
    }
}
