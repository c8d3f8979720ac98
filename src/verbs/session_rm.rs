//! `session_rm`: delete a session record (not mounted); its checkpoints become reclaimable.
//! Experiment forks it left (an unadopted winner's) go with it, unless mounted.

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
    /// Its experiment forks removed with it (`ops::experiment::left`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forks_removed: Vec<String>,
}

impl Handler for SessionRm {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<SessionRemoved> {
        cx.host.remove_session(&self.name)?;
        let forks_removed = remove_forks(cx.host, &self.name);
        Ok(SessionRemoved {
            removed: self.name,
            forks_removed,
        })
    }
}

/// Remove the experiment forks session `source` left, but those mounted (or that
/// cannot be removed: logged); returns those removed.
pub(super) fn remove_forks<H: Server>(h: &H, source: &str) -> Vec<String> {
    let store = h.store();
    let forks = match ops::experiment::left::forks_of(&*store, source) {
        Ok(f) => f,
        Err(e) => {
            log::warn!("session {source}: cannot list its experiment forks: {e}");
            return Vec::new();
        }
    };
    let mut removed = Vec::new();
    for f in forks {
        match h.remove_session(&f) {
            Ok(()) => removed.push(f),
            Err(e) => log::info!("session {source}: its experiment fork {f} stays: {e}"),
        }
    }
    removed
}
