//! `remote_gc`: delete what no ref of a remote reaches, in two phases with a grace
//! period (user role only; see docs/protocol.md, "remote_gc").

use super::prelude::*;
use crate::control::is_false;

/// Delete what no ref of a remote reaches, in two phases with a grace
/// period (user role only; see docs/protocol.md, "remote_gc").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteGc {
    /// The remote (default: the only configured one, else `origin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Report only: take no lock, change nothing.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
    /// Seconds between condemning and deleting (default 24 h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_secs: Option<u64>,
}

impl Verb for RemoteGc {
    const NAME: &'static str = "remote_gc";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::gc::GcReport;

    fn agent_may(&self) -> bool {
        // Remote gc deletes history on the remote with the daemon's
        // credentials: the user's.
        let RemoteGc {
            remote: _,
            dry_run: _,
            grace_secs: _,
        } = self;
        false
    }
}

impl Handler for RemoteGc {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        crate::remote::serve::remote_gc::run_store(
            &*cx.host.store(),
            self.remote,
            self.dry_run,
            self.grace_secs,
        )
    }
}
