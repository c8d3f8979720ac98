//! `checkpoint`: take a checkpoint of the session.

use super::prelude::*;

/// Take a checkpoint of the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Message.
    #[serde(default)]
    pub message: String,
    /// Why: `manual` (default), `auto`, `before-risky`, `milestone`, or any other
    /// well-formed name not reserved for the daemon (`refs::validate_requested_trigger`).
    #[serde(default = "default_trigger")]
    pub trigger: String,
    /// Caller-defined data stored in the record (and covered by its id).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub meta: serde_json::Map<String, serde_json::Value>,
}

fn default_trigger() -> String {
    "manual".into()
}

impl Verb for Checkpoint {
    const NAME: &'static str = "checkpoint";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::checkpoint::CheckpointAnswer;

    fn agent_may(&self) -> bool {
        // Reads stored states only (never follows links out of the tree).
        // Streaming changes how the answer is framed, not what it reveals.
        let Checkpoint {
            message: _,
            trigger: _,
            meta: _,
        } = self;
        true
    }
}

impl Handler for Checkpoint {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let Checkpoint {
            message,
            trigger,
            meta,
        } = self;
        ops::checkpoint::run(&cx.target(), &cx.call, &message, &trigger, meta)
    }
}
