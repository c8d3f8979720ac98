//! `pull`: fetch refs, checkpoint records and tree nodes from a remote (user role
//! only; see docs/protocol.md, "pull").

use super::prelude::*;

/// Fetch refs, checkpoint records and tree nodes from a remote (user role
/// only; see docs/protocol.md, "pull").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pull {
    /// The remote (default: the only configured one, else `origin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Remote ref names (a branch, else a session); empty: every ref.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
}

impl Verb for Pull {
    const NAME: &'static str = "pull";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::pull::PullReport;

    fn agent_may(&self) -> bool {
        // Pulling and hydrating reach the network with the daemon's
        // credentials and move store-wide refs: the user's.
        let Pull { remote: _, refs: _ } = self;
        false
    }
}

impl Handler for Pull {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        crate::remote::ops::pull::run(cx.host, self.remote, self.refs, cx.events)
    }
}
