//! `session_rm`: delete a session record (not mounted); its checkpoints become reclaimable.

use super::prelude::*;

/// Delete a session record (not mounted); its checkpoints become reclaimable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRm {
    /// Session name.
    pub name: String,
}

impl Verb for SessionRm {
    const NAME: &'static str = "session_rm";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = SessionRemoved;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let SessionRm { name: _ } = self;
        false
    }
}

/// The answer to `session_rm`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionRemoved {
    /// The session removed.
    pub removed: String,
}

impl Handler for SessionRm {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<SessionRemoved> {
        cx.host.remove_session(&self.name)?;
        Ok(SessionRemoved { removed: self.name })
    }
}
