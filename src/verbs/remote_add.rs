//! `remote_add`: configure a remote (S3-compatible object storage), after probing it
//! (user role only; see docs/protocol.md, "Remotes").

use super::prelude::*;
use crate::control::is_false;

/// Configure a remote (S3-compatible object storage), after probing it
/// (user role only; see docs/protocol.md, "Remotes").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteAdd {
    /// Remote name.
    pub name: String,
    /// `s3://BUCKET/PREFIX`.
    pub url: String,
    /// Endpoint, `http(s)://HOST[:PORT]`.
    pub endpoint: String,
    /// Region (default `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// This store is the remote's only writer: accept a server that does not
    /// honour conditional writes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub single_writer: bool,
}

impl Verb for RemoteAdd {
    const NAME: &'static str = "remote_add";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::ops::remote_add::RemoteAdded;

    fn agent_may(&self) -> bool {
        // Remotes: configuring them reaches the network with the daemon's
        // credentials and changes store-wide state: the user's.
        let RemoteAdd {
            name: _,
            url: _,
            endpoint: _,
            region: _,
            single_writer: _,
        } = self;
        false
    }
}

impl Handler for RemoteAdd {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let RemoteAdd {
            name,
            url,
            endpoint,
            region,
            single_writer,
        } = &self;
        let config = crate::remote::RemoteConfig::new(
            name,
            url,
            endpoint,
            region.as_deref(),
            *single_writer,
        )?;
        crate::remote::ops::remote_add::run(cx.host, config)
    }
}
