//! `branch_delete`: delete a branch.

use super::prelude::*;

/// Delete a branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchDelete {
    /// Branch name.
    pub name: String,
}

impl Verb for BranchDelete {
    const NAME: &'static str = "branch_delete";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = true;
    type Response = ops::branch::Deleted;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let BranchDelete { name: _ } = self;
        false
    }
}

impl Handler for BranchDelete {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let t = cx.host.target(cx.session).ok();
        let _pins = t.as_ref().map(|t| t.session.pin_roots());
        ops::branch::delete(cx.host, t.as_ref(), &cx.call, &self.name)
    }
}
