//! `log`: the checkpoints a ref (default HEAD) descends from, through every
//! parent, newest first (`first_parent`: along first parents only).

use super::prelude::*;

/// The checkpoints a ref (default HEAD) descends from, through every parent
/// (each once), newest first; `first_parent`: along first parents only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Log {
    /// At most this many.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Ref spec to start from (default HEAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Only checkpoints where this workspace-relative path (a file, or a
    /// directory's subtree) differs from the first parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Follow first parents only (the session's own line, not merged sides).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub first_parent: bool,
}

impl Verb for Log {
    const NAME: &'static str = "log";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::log::LogAnswer;

    fn agent_may(&self) -> bool {
        // Reads stored states only (never follows links out of the tree).
        // Streaming changes how the answer is framed, not what it reveals.
        let Log {
            limit: _,
            from: _,
            path: _,
            first_parent: _,
        } = self;
        true
    }
}

impl Handler for Log {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::log::run(
            &cx.target(),
            self.limit,
            self.from.as_deref(),
            self.path.as_deref(),
            self.first_parent,
        )
    }
}
