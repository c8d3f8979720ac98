//! `rewind`: bring files and/or conversation back to a message (undoable).

use super::prelude::*;
use crate::control::is_false;

/// Bring files and/or conversation back to a message (undoable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rewind {
    /// The message id (the messages after it are hidden); or give `prompt`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub to: String,
    /// Instead of `to`: before the Nth prompt (user message) of the visible
    /// conversation, counting from 1: the files as it was given, it and what
    /// followed hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<u64>,
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
            prompt: _,
            what: _,
            dry_run: _,
        } = self;
        true
    }
}

impl Handler for Rewind {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let point = match (self.prompt, self.to.is_empty()) {
            (Some(n), true) => ops::messages::rewind::Point::BeforePrompt(n),
            (None, false) => ops::messages::rewind::Point::Message(&self.to),
            _ => {
                return Err(crate::Error::Invalid(
                    "rewind: give either a message id (to) or a prompt number (prompt)".into(),
                ));
            }
        };
        ops::messages::rewind(
            &cx.target(),
            &cx.call,
            point,
            self.what.as_deref(),
            self.dry_run,
        )
    }

    fn before_lock(&self, t: &ops::Target) -> Result<()> {
        ops::messages::wait(t)
    }
}
