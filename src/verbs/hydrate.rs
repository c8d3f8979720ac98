//! `hydrate`: fetch every object a session needs from a remote (user role only; see
//! docs/protocol.md, "hydrate").

use super::prelude::*;

/// Fetch every object a session needs from a remote (user role only; see
/// docs/protocol.md, "hydrate").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hydrate {
    /// The session (default: the socket's, else the only mounted one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The remote (default: the session's upstream, else the only
    /// configured one, else `origin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

impl Verb for Hydrate {
    const NAME: &'static str = "hydrate";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::pull::hydrate::HydrateReport;

    fn agent_may(&self) -> bool {
        // Pulling and hydrating reach the network with the daemon's
        // credentials and move store-wide refs: the user's.
        let Hydrate {
            session: _,
            remote: _,
        } = self;
        false
    }
}

impl Handler for Hydrate {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let session = self.session.or(cx.session.map(str::to_string));
        crate::remote::serve::hydrate::run(cx.host, session, self.remote, cx.events)
    }
}
