//! `branches`: list branches (the session's own by default).

use super::prelude::*;

/// List branches: the session's own and the store-wide ones (`all`: every
/// session's, another's qualified as `SESSION/BRANCH`), without the automatic `auto/...`
/// refs unless `auto`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Branches {
    /// Every session's branches, another session's named `SESSION/BRANCH`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// Also the automatic `auto/...` refs (saves before checkout, restore, undo).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto: bool,
}

impl Verb for Branches {
    const NAME: &'static str = "branches";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::branch::Listed;

    fn agent_may(&self) -> bool {
        // Reads stored states only (never follows links out of the tree).
        // Streaming changes how the answer is framed, not what it reveals.
        let Branches { all: _, auto: _ } = self;
        true
    }
}

impl Handler for Branches {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let which = ops::branch::Which {
            all: self.all,
            auto: self.auto,
        };
        if !cx.actor.is_agent() {
            return ops::branch::list(&*cx.host.store(), None, cx.session, which);
        }
        let mut t = cx.host.target(cx.session)?;
        t.scope = ops::Scope::Lineage;
        let _lock = t.session.op_lock.lock().unwrap();
        let view = ops::refctx::agent_view(&t);
        ops::branch::list(&*cx.host.store(), view.as_ref(), cx.session, which)
    }
}
