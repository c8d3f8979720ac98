//! `message_append`: queue a message for the session's conversation log; answers once queued
//! (a full queue makes the request wait).

use super::prelude::*;

/// Queue a message for the session's conversation log; answers once queued
/// (a full queue makes the request wait).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageAppend {
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// Any JSON (at most 1 MiB as JSON).
    pub content: Value,
    /// Tool calls the message makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    /// The tool call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Caller data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Map<String, Value>>,
    /// A client-chosen UUID (a repeated id is idempotent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `messages` (default) or `transcript`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
}

impl Verb for MessageAppend {
    const NAME: &'static str = "message_append";
    const KIND: Kind = Kind::Unlocked;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::messages::Queued;

    fn agent_may(&self) -> bool {
        // The conversation log: appending adds records; a rewind hides
        // messages (never deletes them), saves pending changes first and is
        // an undoable operation; the metadata merge changes counters only.
        let MessageAppend {
            role: _,
            content: _,
            tool_calls: _,
            tool_call_id: _,
            meta: _,
            id: _,
            stream: _,
        } = self;
        true
    }
}

impl Handler for MessageAppend {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let MessageAppend {
            role,
            content,
            tool_calls,
            tool_call_id,
            meta,
            id,
            stream,
        } = self;
        let d = crate::messages::Draft {
            id: id.unwrap_or_else(crate::messages::new_id),
            stream: crate::messages::Stream::parse(stream.as_deref())?,
            role,
            content,
            tool_calls,
            tool_call_id,
            meta,
            time_ns: crate::clock::unix_ns(),
        };
        ops::messages::append(&cx.target(), d)
    }
}
