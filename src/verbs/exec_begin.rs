//! `exec_begin`: start recording a command the client runs (`treefork exec`): save pending
//! changes as the before checkpoint, start watching writers. Answers the exec
//! number and the before checkpoint.

use super::prelude::*;

/// Start recording a command the client runs (`treefork exec`): save pending
/// changes as the before checkpoint, start watching writers. Answers the exec
/// number and the before checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecBegin {
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// Its working directory, relative to the workspace root (text, recorded).
    #[serde(default)]
    pub cwd: String,
}

impl Verb for ExecBegin {
    const NAME: &'static str = "exec_begin";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::exec::answers::Begun;

    fn agent_may(&self) -> bool {
        // Recording a command adds a checkpoint and an operation; reading the
        // history reveals nothing the log does not.
        let ExecBegin { argv: _, cwd: _ } = self;
        true
    }
}

impl Handler for ExecBegin {
    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        // A message appended before this request is written with the state
        // before it (the writer's queue drains first).
        ops::messages::wait(t)
    }

    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let explanation = cx.call.explanation.clone();
        ops::exec::begin(&cx.target(), cx.actor, self.argv, self.cwd, explanation)
    }
}
