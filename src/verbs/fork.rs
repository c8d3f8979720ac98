//! `fork`: create a new session from a ref (default: a fresh checkpoint) and mount it.

use super::prelude::*;
use std::path::PathBuf;

/// Create a new session from a ref (default: a fresh checkpoint) and mount it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fork {
    /// New session name.
    pub name: String,
    /// Ref to start from.
    #[serde(default)]
    pub from: Option<String>,
    /// Where to mount it (absolute, empty directory).
    pub mountpoint: PathBuf,
    /// Also serve the session on an agent-role socket at this absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_socket: Option<PathBuf>,
    /// A uid allowed on the agent socket besides the daemon's and root (the socket
    /// file is then owned by it, mode 0600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_uid: Option<u32>,
    /// Start from a message instead: the files as they were when it was
    /// recorded, the conversation up to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_message: Option<String>,
}

impl Verb for Fork {
    const NAME: &'static str = "fork";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Some;
    const RECORDS: bool = true;
    type Response = Value;

    fn agent_may(&self) -> bool {
        // A fork adds a session; granting sockets to uids stays with the user.
        // Reads the session's own messages and workspaces.
        let Fork {
            name: _,
            from: _,
            mountpoint: _,
            agent_socket,
            agent_uid,
            from_message: _,
        } = self;
        agent_socket.is_none() && agent_uid.is_none()
    }

    fn refused_what(&self) -> String {
        "fork with agent_socket/agent_uid".to_string()
    }
}

impl Handler for Fork {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Value> {
        let Fork {
            name,
            from,
            mountpoint,
            agent_socket,
            agent_uid,
            from_message,
        } = self;
        let agent = AgentSocket::from_request(agent_socket, agent_uid)?;
        if from.is_some() && from_message.is_some() {
            return Err(Error::Invalid(
                "fork takes a ref or a message to start from, not both".into(),
            ));
        }
        let req = ops::fork::Request {
            name: &name,
            from: from.as_deref(),
            mountpoint: &mountpoint,
            agent,
            who: cx.who,
            from_message: from_message.as_deref(),
        };
        let t = cx.target();
        let lock = cx.lock();
        ops::fork::run(cx.host, &t, &cx.call, lock, req)
    }

    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        ops::messages::wait(t)
    }
}
