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
    /// Credentials to use for this remote from now on (the CLI sends those of
    /// its environment, only to the store's daemon socket): the daemon holds them
    /// in memory, before its own environment; never stored, logged or recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<RemoteCredentials>,
}

/// Credentials handed over with `remote_add` (`Debug` prints no secret).
#[derive(Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteCredentials {
    /// Access key id.
    pub key_id: String,
    /// Secret access key.
    pub secret: String,
    /// Session token, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl std::fmt::Debug for RemoteCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteCredentials({}, <secret>)", self.key_id)
    }
}

impl RemoteCredentials {
    /// As the client takes them (both keys non-empty, else `invalid`).
    fn into_client(self) -> Result<crate::remote::client::Credentials> {
        if self.key_id.is_empty() || self.secret.is_empty() {
            return Err(crate::error::Error::Invalid(
                "credentials need a non-empty key id and secret".into(),
            ));
        }
        Ok(crate::remote::client::Credentials {
            key_id: self.key_id,
            secret: self.secret,
            token: self.token.filter(|t| !t.is_empty()),
        })
    }
}

impl Verb for RemoteAdd {
    const NAME: &'static str = "remote_add";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::serve::remote_add::RemoteAdded;

    fn agent_may(&self) -> bool {
        // Remotes: configuring them reaches the network with the daemon's
        // credentials and changes store-wide state: the user's.
        let RemoteAdd {
            name: _,
            url: _,
            endpoint: _,
            region: _,
            single_writer: _,
            credentials: _,
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
            credentials,
        } = self;
        let config = crate::remote::RemoteConfig::new(
            &name,
            &url,
            &endpoint,
            region.as_deref(),
            single_writer,
        )?;
        let given = credentials
            .map(RemoteCredentials::into_client)
            .transpose()?;
        crate::remote::serve::remote_add::run(cx.host, config, given)
    }
}
