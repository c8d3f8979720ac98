//! `exec_end`: finish recording exec `exec`: checkpoint what changed, append its record.

use super::prelude::*;
use crate::control::is_false;

/// Finish recording exec `exec`: checkpoint what changed, append its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecEnd {
    /// The exec number.
    pub exec: u64,
    /// Exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that killed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Why it could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Wall time, ms.
    #[serde(default)]
    pub duration_ms: u64,
    /// The client cut stdout at its capture limit.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stdout_truncated: bool,
    /// The client cut stderr at its capture limit.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stderr_truncated: bool,
    /// A timeout stopped it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub timed_out: bool,
}

impl Verb for ExecEnd {
    const NAME: &'static str = "exec_end";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::exec::answers::Ended;

    fn agent_may(&self) -> bool {
        // Recording a command adds a checkpoint and an operation; reading the
        // history reveals nothing the log does not.
        let ExecEnd {
            exec: _,
            exit_code: _,
            signal: _,
            error: _,
            pid: _,
            duration_ms: _,
            stdout_truncated: _,
            stderr_truncated: _,
            timed_out: _,
        } = self;
        true
    }
}

impl Handler for ExecEnd {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let ExecEnd {
            exec,
            exit_code,
            signal,
            error,
            pid,
            duration_ms,
            stdout_truncated,
            stderr_truncated,
            timed_out,
        } = self;
        let e = ops::exec::Ending {
            exit_code,
            signal,
            error,
            pid,
            duration_ms: Some(duration_ms),
            truncated: [stdout_truncated, stderr_truncated],
            timed_out,
            abandoned: false,
        };
        ops::exec::end(&cx.target(), exec, e)
    }
}
