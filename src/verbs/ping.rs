//! `ping`: liveness check; answers the daemon's pid and store.

use super::prelude::*;
use std::path::PathBuf;

/// Liveness check; answers the daemon's pid and store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ping {}

impl Verb for Ping {
    const NAME: &'static str = "ping";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = Pong;

    fn agent_may(&self) -> bool {
        // Reads stored states only (never follows links out of the tree).
        // Streaming changes how the answer is framed, not what it reveals.
        let Ping {} = self;
        true
    }
}

/// The answer to `ping`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Pong {
    /// The daemon's process id.
    pub pid: u32,
    /// The store directory the daemon serves.
    pub store: PathBuf,
    /// On a session socket: the session it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// On a session socket: where that session is mounted (an agent's CLI,
    /// which cannot read the mount registry, resolves its paths with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mountpoint: Option<PathBuf>,
    /// The caller's role on this socket (`user` or `agent`); set by the socket
    /// layer, which knows the role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

impl Handler for Ping {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Pong> {
        cx.host.ping(cx.session)
    }
}
