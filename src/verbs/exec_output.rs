//! `exec_output`: a chunk of a running exec's captured output (sent before `exec_end`).

use super::prelude::*;

/// A chunk of a running exec's captured output (sent before `exec_end`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecOutput {
    /// The exec number `exec_begin` answered.
    pub exec: u64,
    /// `stdout` or `stderr`.
    pub stream: String,
    /// The bytes, base64.
    pub data: String,
}

impl Verb for ExecOutput {
    const NAME: &'static str = "exec_output";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::exec::answers::OutputTaken;

    fn agent_may(&self) -> bool {
        // Recording a command adds a checkpoint and an operation; reading the
        // history reveals nothing the log does not.
        let ExecOutput {
            exec: _,
            stream: _,
            data: _,
        } = self;
        true
    }
}

impl Handler for ExecOutput {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::exec::output(&cx.target(), self.exec, &self.stream, &self.data)
    }
}
