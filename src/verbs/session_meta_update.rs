//! `session_meta_update`: merge conversation metadata into the session's info record.

use super::prelude::*;

/// Merge conversation metadata into the session's info record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionMetaUpdate {
    /// The model in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Turns to add to the count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_turns: Option<u64>,
    /// Cost to add to the total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_cost: Option<f64>,
    /// Why the agent stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_reason: Option<String>,
    /// The agent runtime working in the session (`claude`, `codex`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The runtime's own id of its session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_session: Option<String>,
}

impl Verb for SessionMetaUpdate {
    const NAME: &'static str = "session_meta_update";
    const KIND: Kind = Kind::Unlocked;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::messages::MetaUpdated;

    fn agent_may(&self) -> bool {
        // The conversation log: appending adds records; a rewind hides
        // messages (never deletes them), saves pending changes first and is
        // an undoable operation; the metadata merge changes counters only.
        let SessionMetaUpdate {
            model: _,
            add_turns: _,
            add_cost: _,
            exit_reason: _,
            runtime: _,
            runtime_session: _,
        } = self;
        true
    }
}

impl Handler for SessionMetaUpdate {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let SessionMetaUpdate {
            model,
            add_turns,
            add_cost,
            exit_reason,
            runtime,
            runtime_session,
        } = self;
        let texts = ops::messages::MetaTexts {
            model,
            exit_reason,
            runtime,
            runtime_session,
        };
        ops::messages::meta_update(&cx.target(), texts, add_turns, add_cost)
    }
}
