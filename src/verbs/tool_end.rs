//! `tool_end`: an agent runtime's tool call ran; the last open call of its group
//! writes the exec record.

use super::prelude::*;

/// An agent runtime's tool call ran; the last open call of its group writes the
/// exec record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolEnd {
    /// The call's id, as sent with `tool_begin`.
    pub call: String,
    /// Whether the tool reported success.
    #[serde(default = "yes")]
    pub ok: bool,
    /// The error it reported (cut at 1 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn yes() -> bool {
    true
}

impl Verb for ToolEnd {
    const NAME: &'static str = "tool_end";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::exec::tool::ToolEnded;

    fn agent_may(&self) -> bool {
        // As exec_end.
        let ToolEnd {
            call: _,
            ok: _,
            error: _,
        } = self;
        true
    }
}

impl Handler for ToolEnd {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::exec::tool::end(&cx.target(), &self.call, self.ok, self.error)
    }
}
