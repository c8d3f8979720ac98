//! `diff`: differences between two states (refs, or `WORKING`).

use super::prelude::*;
use crate::control::is_false;

/// Differences between two states (refs, or `WORKING`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Diff {
    /// Old side (default HEAD).
    #[serde(default)]
    pub a: Option<String>,
    /// New side (default WORKING).
    #[serde(default)]
    pub b: Option<String>,
    /// `name-status` (default), `stat` or `patch`.
    #[serde(default)]
    pub mode: Option<String>,
    /// With `patch`: send each file's patch as a `{"event":"patch",...}` line as
    /// soon as it is made; the response then carries no `patch` text. Omitted
    /// when false, so daemons that predate it still accept the request.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stream: bool,
}

impl Verb for Diff {
    const NAME: &'static str = "diff";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::diff::DiffAnswer;

    fn agent_may(&self) -> bool {
        // Reads stored states only (never follows links out of the tree).
        // Streaming changes how the answer is framed, not what it reveals.
        let Diff {
            a: _,
            b: _,
            mode: _,
            stream: _,
        } = self;
        true
    }
}

impl Handler for Diff {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let Diff { a, b, mode, stream } = self;
        let t = cx.target();
        let lock = cx.lock();
        let (a, b, mode) = (a.as_deref(), b.as_deref(), mode.as_deref());
        ops::diff::run(&t, lock, a, b, mode, stream, cx.events)
    }
}
