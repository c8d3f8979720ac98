//! `session_show`: a session's info record, touched-file count and mount state. On a socket
//! bound to a session (a session or agent socket) only that session.

use super::prelude::*;

/// A session's info record, touched-file count and mount state. On a socket
/// bound to a session (a session or agent socket) only that session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionShow {
    /// Session name (default: the socket's session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Verb for SessionShow {
    const NAME: &'static str = "session_show";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = crate::lifecycle::manage::SessionShown;

    fn agent_may(&self) -> bool {
        // Its own session only: the daemon refuses (`forbidden`) a name other
        // than the session a bound socket serves.
        let SessionShow { name: _ } = self;
        true
    }
}

impl Handler for SessionShow {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        cx.host.session_show(self.name.as_deref(), cx.session)
    }
}
