//! `branch_share`: share a branch with a session: that session's agent socket sees the branch
//! and the history it names (see docs/design.md, "What an agent socket sees").

use super::prelude::*;

/// Share a branch with a session: that session's agent socket sees the branch
/// and the history it names (see docs/design.md, "What an agent socket sees").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchShare {
    /// Branch name, as the asking session writes it (`SESSION/BRANCH` for
    /// another session's).
    pub name: String,
    /// The session whose agent may see it.
    pub with: String,
}

impl Verb for BranchShare {
    const NAME: &'static str = "branch_share";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = ops::branch::Shared;

    fn agent_may(&self) -> bool {
        // Widens what an agent socket sees: the user's.
        let BranchShare { name: _, with: _ } = self;
        false
    }
}

impl Handler for BranchShare {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::branch::share(&*cx.host.store(), cx.session, &self.name, &self.with)
    }
}
