//! `session_discard`: unmount a session and mark it discarded (`gc` removes it after retention).

use super::prelude::*;
use std::path::PathBuf;

/// Unmount a session and mark it discarded (`gc` removes it after retention).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionDiscard {
    /// Session name.
    pub name: String,
}

impl Verb for SessionDiscard {
    const NAME: &'static str = "session_discard";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Discarded;

    fn agent_may(&self) -> bool {
        // Lifecycle changes (eviction policy, discard, evicting) are the user's.
        let SessionDiscard { name: _ } = self;
        false
    }
}

/// The answer to `session_discard`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Discarded {
    /// The session.
    pub session: String,
    /// Always `true`: its state is `discarded` now.
    pub discarded: bool,
    /// Where it was mounted, when the discard unmounted it (`null`: it was not
    /// mounted).
    pub unmounted: Option<PathBuf>,
    /// Its experiment forks, removed with it (those not mounted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forks_removed: Vec<String>,
}

impl Handler for SessionDiscard {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Discarded> {
        let mut d = cx.host.session_discard(&self.name)?;
        d.forks_removed = super::session_rm::remove_forks(cx.host, &self.name);
        Ok(d)
    }
}
