//! `diff`: differences between two states (refs, or `WORKING`).

use super::prelude::*;
use crate::control::is_false;

/// Differences between two states (refs, or `WORKING`). Paths the workspace's
/// ignore files ignore and `.git` are left out unless `ignored`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// List ignored paths too, marked `"ignored": true` (`.git` still left out).
    /// Omitted when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignored: bool,
    /// Only these workspace-relative paths (files or directories, and what is
    /// under them); empty: every path. Omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
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
            ignored: _,
            paths: _,
        } = self;
        true
    }
}

impl Handler for Diff {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let Diff {
            a,
            b,
            mode,
            stream,
            ignored,
            paths,
        } = self;
        let ask = ops::diff::Ask {
            a: a.as_deref(),
            b: b.as_deref(),
            mode: mode.as_deref(),
            stream,
            filter: ops::diff::filter(ignored, &paths)?,
        };
        let t = cx.target();
        let lock = cx.lock();
        ops::diff::run(&t, lock, &ask, cx.events)
    }
}
