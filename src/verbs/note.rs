//! `note`: add an entry of the agent or its runtime to the session's log.

use super::prelude::*;

/// Add an entry of the agent or its runtime to the session's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// The text.
    pub text: String,
    /// `action` (default), `decision`, `error` or `nudge`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

impl Verb for Note {
    const NAME: &'static str = "note";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::timeline::Noted;

    fn agent_may(&self) -> bool {
        // Reading the activity and adding notes to it.
        let Note { text: _, kind: _ } = self;
        true
    }
}

impl Handler for Note {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::timeline::note(&cx.target(), &cx.call, self.kind.as_deref(), &self.text)
    }
}
