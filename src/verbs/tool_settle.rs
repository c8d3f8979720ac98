//! `tool_settle`: an agent runtime's turn ended: write the record of its open tool
//! calls, those without an end marked so.

use super::prelude::*;

/// An agent runtime's turn ended (of its main agent, or of a subagent): its open
/// tool calls get no end; the record is written once no other agent's call is
/// open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSettle {
    /// Only a group of this runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The subagent whose turn ended (absent: the main agent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl Verb for ToolSettle {
    const NAME: &'static str = "tool_settle";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::exec::tool::ToolEnded;

    fn agent_may(&self) -> bool {
        // As exec_end.
        let ToolSettle {
            runtime: _,
            agent: _,
        } = self;
        true
    }
}

impl Handler for ToolSettle {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::exec::tool::settle(&cx.target(), self.runtime.as_deref(), self.agent.as_deref())
    }
}
