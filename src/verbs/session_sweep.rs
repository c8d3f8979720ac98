//! `session_sweep`: run an eviction sweep now.

use super::prelude::*;

/// Run an eviction sweep now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSweep {}

impl Verb for SessionSweep {
    const NAME: &'static str = "session_sweep";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Swept;

    fn agent_may(&self) -> bool {
        // Lifecycle changes (eviction policy, discard, evicting) are the user's.
        let SessionSweep {} = self;
        false
    }
}

/// The answer to `session_sweep`: what the sweep did to each session due for
/// eviction.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Swept {
    /// Mounted sessions evicted (checkpointed, unmounted, state `expired`).
    pub evicted: Vec<SweptEvicted>,
    /// Mounted sessions due but not evicted (their info records why).
    pub busy: Vec<SweptBusy>,
    /// Sessions not mounted, only marked `expired`.
    pub expired: Vec<SweptExpired>,
    /// Experiment forks removed because their source session is gone, discarded
    /// or expired (`ops::experiment::left`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forks_removed: Vec<SweptExpired>,
}

/// A session a sweep evicted.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SweptEvicted {
    /// The session.
    pub session: String,
    /// Why it was due (`idle 3600s (ttl 3600s)`, ...).
    pub reason: String,
    /// The checkpoint taken before unmounting (`null`: nothing had changed).
    pub checkpoint: Option<String>,
}

/// A session a sweep could not evict.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SweptBusy {
    /// The session.
    pub session: String,
    /// Why it was due.
    pub reason: String,
    /// What kept it mounted.
    pub blocked: String,
}

/// A session not mounted that a sweep marked `expired`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SweptExpired {
    /// The session.
    pub session: String,
    /// Why it was due.
    pub reason: String,
}

impl Handler for SessionSweep {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Swept> {
        cx.host.sweep()
    }
}
