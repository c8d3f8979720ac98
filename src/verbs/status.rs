//! `status`: paths changed since the last checkpoint.

use super::prelude::*;
use crate::control::is_false;

/// Paths changed since the last checkpoint. Paths the workspace's ignore files
/// ignore (`.gitignore` files, `.git/info/exclude`) and `.git` are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Status {
    /// List ignored paths too, marked `"ignored": true` (`.git` still left out).
    /// Omitted when false, so daemons that predate it still accept the request.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignored: bool,
}

impl Verb for Status {
    const NAME: &'static str = "status";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = false;
    type Response = ops::status::StatusAnswer;

    fn agent_may(&self) -> bool {
        // Reads stored states only (never follows links out of the tree).
        // Streaming changes how the answer is framed, not what it reveals.
        let Status { ignored: _ } = self;
        true
    }
}

impl Handler for Status {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::status::run(&cx.target(), self.ignored)
    }
}
