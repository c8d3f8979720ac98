//! `remote_rm`: forget a remote: its config, tracking refs and local cache (nothing on
//! the remote is touched).

use super::prelude::*;

/// Forget a remote: its config, tracking refs and local cache (nothing on
/// the remote is touched).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteRm {
    /// Remote name.
    pub name: String,
}

impl Verb for RemoteRm {
    const NAME: &'static str = "remote_rm";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::serve::remote_rm::RemoteRemoved;

    fn agent_may(&self) -> bool {
        // Remotes: configuring them reaches the network with the daemon's
        // credentials and changes store-wide state: the user's.
        let RemoteRm { name: _ } = self;
        false
    }
}

impl Handler for RemoteRm {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        crate::remote::serve::remote_rm::run_live(cx.host, &self.name)
    }
}
