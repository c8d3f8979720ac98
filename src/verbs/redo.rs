//! `redo`: redo what the last undo undid.

use super::prelude::*;

/// Redo what the last undo undid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Redo {
    /// `files` or `refs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// Refuse (`conflict`) unless this is still the session's newest operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_last: Option<u64>,
}

impl Verb for Redo {
    const NAME: &'static str = "redo";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::undo::Moved;

    fn agent_may(&self) -> bool {
        // Additive: they append operations and save pending changes first;
        // whatever they move back is still named by the log.
        let Redo {
            what: _,
            if_last: _,
        } = self;
        true
    }
}

impl Handler for Redo {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::undo::step(
            cx.host,
            &cx.target(),
            &cx.call,
            ops::undo::Way::Redo,
            self.what,
            self.if_last,
        )
    }
}
