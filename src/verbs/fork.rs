//! `fork`: create a new session from a ref (default: a fresh checkpoint) and mount it.

use super::prelude::*;

/// The request is the library's (`ops::fork::Fork`), as it comes over the wire.
pub use crate::ops::fork::Fork;

impl Verb for Fork {
    const NAME: &'static str = "fork";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Some;
    const RECORDS: bool = true;
    type Response = ops::fork::Forked;

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
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let t = cx.target();
        let lock = cx.lock();
        ops::fork::run(cx.host, &t, &cx.call, lock, self, cx.who)
    }

    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        ops::messages::wait(t)
    }
}
