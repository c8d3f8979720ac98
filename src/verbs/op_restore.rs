//! `op_restore`: return to the state right after operation `op`.

use super::prelude::*;

/// Return to the state right after operation `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpRestore {
    /// Operation number.
    #[serde(rename = "operation")]
    pub seq: u64,
    /// `files` or `refs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
}

impl Verb for OpRestore {
    const NAME: &'static str = "op_restore";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::undo::Moved;

    fn agent_may(&self) -> bool {
        // Additive: they append operations and save pending changes first;
        // whatever they move back is still named by the log.
        let OpRestore { seq: _, what: _ } = self;
        true
    }
}

impl Handler for OpRestore {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::undo::restore(cx.host, &cx.target(), &cx.call, self.seq, self.what)
    }
}
