//! `rewind`: bring files and/or conversation back to a message (undoable).

use super::prelude::*;
use crate::control::is_false;

/// Bring files and/or conversation back to a message (undoable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rewind {
    /// The message id.
    pub to: String,
    /// `files`, `conversation` or `both` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// Only report what would change.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

impl Verb for Rewind {
    const NAME: &'static str = "rewind";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::messages::rewind::Rewound;

    fn agent_may(&self) -> bool {
        // The conversation log: appending adds records; a rewind hides
        // messages (never deletes them), saves pending changes first and is
        // an undoable operation; the metadata merge changes counters only.
        let Rewind {
            to: _,
            what: _,
            dry_run: _,
        } = self;
        true
    }
}

impl Handler for Rewind {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::messages::rewind(
            &cx.target(),
            &cx.call,
            &self.to,
            self.what.as_deref(),
            self.dry_run,
        )
    }

    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        ops::messages::wait(t)
    }
}
