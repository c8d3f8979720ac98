//! `show`: a checkpoint's metadata and changed paths; with `path`, the bytes (or
//! directory entries, or link target) at that path in it, streamed as
//! `{"event":"data"}` lines.

use super::prelude::*;

/// A checkpoint's metadata and changed paths; with `path`, the bytes (or
/// directory entries, or link target) at that path in it, streamed as
/// `{"event":"data"}` lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Show {
    /// The ref spec.
    #[serde(rename = "ref")]
    pub target: String,
    /// Workspace-relative path inside that state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl Verb for Show {
    const NAME: &'static str = "show";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::show::ShowAnswer;

    fn agent_may(&self) -> bool {
        // Reads stored states only (never follows links out of the tree).
        // Streaming changes how the answer is framed, not what it reveals.
        let Show { target: _, path: _ } = self;
        true
    }
}

impl Handler for Show {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let t = cx.target();
        let lock = cx.lock();
        ops::show::run(&t, lock, &self.target, self.path.as_deref(), cx.events)
    }
}
