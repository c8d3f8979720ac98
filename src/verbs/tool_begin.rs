//! `tool_begin`: an agent runtime is about to run a tool that can write (`treefork
//! hook`): record it as an exec (a new one, or joining the group of calls open).

use super::prelude::*;

/// An agent runtime is about to run a tool that can write (`treefork hook`):
/// record it as an exec (a new one, or joining the group of calls open).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolBegin {
    /// The runtime: `claude`, `codex`, `gemini`, ...
    pub runtime: String,
    /// The runtime's id of the call (its `tool_use_id`).
    pub call: String,
    /// The tool's name.
    pub tool: String,
    /// What it was asked to do (cut at 1 KiB).
    #[serde(default)]
    pub summary: String,
    /// The subagent making the call (the runtime's id for it; absent: the main
    /// agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The runtime's working directory, relative to the workspace root.
    #[serde(default)]
    pub cwd: String,
    /// The runtime's pid (the group lives as long as it does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_pid: Option<u32>,
}

impl Verb for ToolBegin {
    const NAME: &'static str = "tool_begin";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::exec::tool::ToolBegun;

    fn agent_may(&self) -> bool {
        // As exec_begin: it adds a checkpoint and an operation of the session.
        let ToolBegin {
            runtime: _,
            call: _,
            tool: _,
            summary: _,
            agent: _,
            cwd: _,
            client_pid: _,
        } = self;
        true
    }
}

impl Handler for ToolBegin {
    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        // The prompt appended before this call is written with the state before it.
        ops::messages::wait(t)
    }

    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let explanation = cx.call.explanation.clone();
        let st = ops::exec::tool::Start {
            runtime: self.runtime,
            call: self.call,
            tool: self.tool,
            summary: self.summary,
            agent: self.agent,
            cwd: self.cwd,
            client_pid: self.client_pid,
        };
        ops::exec::tool::begin(&cx.target(), cx.actor, st, explanation)
    }
}
