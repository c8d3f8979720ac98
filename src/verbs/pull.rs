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
    const RECORDS: bool = true;
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
        // Recorded in the caller's session when it is one this store has.
        let session = cx.session.map(str::to_string).or_else(|| {
            cx.host
                .target(None)
                .ok()
                .map(|t| t.session.name().to_string())
        });
        let by = crate::remote::pull::PulledBy {
            actor: cx.call.actor.clone(),
            explanation: cx.call.explanation.clone(),
            session,
        };
        crate::remote::serve::pull::run(cx.host, self.remote, self.refs, by, cx.events)
    }
}
