//! `remote_list`: the configured remotes.

use super::prelude::*;

/// The configured remotes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteList {}

impl Verb for RemoteList {
    const NAME: &'static str = "remote_list";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::serve::remote_list::RemotesListed;

    fn agent_may(&self) -> bool {
        // Remotes: configuring them reaches the network with the daemon's
        // credentials and changes store-wide state: the user's.
        let RemoteList {} = self;
        false
    }
}

impl Handler for RemoteList {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        crate::remote::serve::remote_list::run(&*cx.host.store())
    }
}
