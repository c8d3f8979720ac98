//! `messages`: the session's visible messages, oldest first.

use super::prelude::*;

/// The session's visible messages, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Messages {
    /// `messages` (default) or `transcript`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// Only the newest this many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only up to (including) this message id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upto: Option<String>,
    /// Only after this message id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

impl Verb for Messages {
    const NAME: &'static str = "messages";
    const KIND: Kind = Kind::Unlocked;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::messages::MessagesAnswer;

    fn agent_may(&self) -> bool {
        // The conversation log: appending adds records; a rewind hides
        // messages (never deletes them), saves pending changes first and is
        // an undoable operation; the metadata merge changes counters only.
        let Messages {
            stream: _,
            limit: _,
            upto: _,
            after: _,
        } = self;
        true
    }
}

impl Handler for Messages {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let Messages {
            stream,
            limit,
            upto,
            after,
        } = self;
        let q = crate::messages::Query {
            stream,
            limit,
            upto,
            after,
        };
        ops::messages::list(&cx.target(), q)
    }
}
