//! `remote_trust`: adopt the origin and eviction policy a session pulled from a remote
//! named (kept aside until now: see docs/design.md, "Remote tier: pull").

use super::prelude::*;

/// Adopt the origin and eviction policy a session pulled from a remote
/// named (kept aside until now: see docs/design.md, "Remote tier: pull").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteTrust {
    /// The local session.
    pub name: String,
}

impl Verb for RemoteTrust {
    const NAME: &'static str = "remote_trust";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::serve::remote_trust::Trusted;

    fn agent_may(&self) -> bool {
        // Trusting a pulled origin lets promote write to that repository.
        let RemoteTrust { name: _ } = self;
        false
    }
}

impl Handler for RemoteTrust {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        crate::remote::serve::remote_trust::run(&*cx.host.store(), &self.name)
    }
}
