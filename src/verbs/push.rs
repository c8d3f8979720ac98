//! `push`: send branches and sessions to a remote (user role only; see
//! docs/protocol.md, "push").

use super::prelude::*;
use crate::control::is_false;

/// Send branches and sessions to a remote (user role only; see
/// docs/protocol.md, "push").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Push {
    /// The remote (default: the only configured one, else `origin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// `REF`, `SRC:DST` or `SESSION`; empty: the current session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
    /// The current session (default: the socket's, else the only mounted one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Overwrite remote refs that are not fast-forwards.
    #[serde(default, skip_serializing_if = "is_false")]
    pub force: bool,
}

impl Verb for Push {
    const NAME: &'static str = "push";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::push::PushReport;

    fn agent_may(&self) -> bool {
        // Pushing sends the store's history out with the daemon's
        // credentials: the user's.
        let Push {
            remote: _,
            refs: _,
            session: _,
            force: _,
        } = self;
        false
    }
}

impl Handler for Push {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let Push {
            remote,
            refs,
            session,
            force,
        } = self;
        let req = crate::remote::push::PushRequest {
            refs,
            session: session.or(cx.session.map(str::to_string)),
            force,
        };
        crate::remote::serve::push::run(cx.host, remote, &req, cx.events)
    }
}
