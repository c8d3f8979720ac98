//! `store_trim`: drop local copies of objects a remote holds (verified present) and no
//! kept session needs (user role only; see docs/protocol.md, "store_trim").

use super::prelude::*;
use crate::control::is_false;

/// Drop local copies of objects a remote holds (verified present) and no
/// kept session needs (user role only; see docs/protocol.md, "store_trim").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreTrim {
    /// Keep what sessions accessed within this duration reach (`30d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_than: Option<String>,
    /// Keep every session's current workspace (trim only history).
    #[serde(default, skip_serializing_if = "is_false")]
    pub keep_sessions: bool,
    /// Report only.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

impl Verb for StoreTrim {
    const NAME: &'static str = "store_trim";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = crate::remote::trim::TrimReport;

    fn agent_may(&self) -> bool {
        // Trimming drops local copies store-wide (they come back over the
        // network with the daemon's credentials): the user's.
        let StoreTrim {
            older_than: _,
            keep_sessions: _,
            dry_run: _,
        } = self;
        false
    }
}

impl Handler for StoreTrim {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let req = crate::remote::serve::store_trim::request(
            self.older_than.as_deref(),
            self.keep_sessions,
            self.dry_run,
        )?;
        cx.host.store_trim(req, cx.events)
    }
}
