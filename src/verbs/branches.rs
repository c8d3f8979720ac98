//! `branches`: list branches.

use super::prelude::*;

/// List branches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Branches {}

impl Verb for Branches {
    const NAME: &'static str = "branches";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::branch::Listed;

    fn agent_may(&self) -> bool {
        // Reads stored states only (never follows links out of the tree).
        // Streaming changes how the answer is framed, not what it reveals.
        let Branches {} = self;
        true
    }
}

impl Handler for Branches {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        if !cx.actor.is_agent() {
            return ops::branch::list(&*cx.host.store(), None, cx.session);
        }
        let mut t = cx.host.target(cx.session)?;
        t.scope = ops::Scope::Lineage;
        let _lock = t.session.op_lock.lock().unwrap();
        let view = ops::refctx::agent_view(&t);
        ops::branch::list(&*cx.host.store(), view.as_ref(), cx.session)
    }
}
