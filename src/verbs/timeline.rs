//! `timeline`: the session's activity, oldest first: operations with the files each
//! changed, and notes.

use super::prelude::*;

/// The session's activity, oldest first: operations with the files each
/// changed, and notes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timeline {
    /// Only entries at or after this unix time (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
    /// Only entries by this role (`user`, `agent`, `daemon`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// At most this many (the newest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

impl Verb for Timeline {
    const NAME: &'static str = "timeline";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::timeline::TimelineAnswer;

    fn agent_may(&self) -> bool {
        // Reading the activity and adding notes to it.
        let Timeline {
            since: _,
            actor: _,
            limit: _,
        } = self;
        true
    }
}

impl Handler for Timeline {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::timeline::run(&cx.target(), self.since, self.actor.as_deref(), self.limit)
    }
}
