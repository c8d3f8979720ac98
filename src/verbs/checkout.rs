//! `checkout`: make the live mount show a ref's tree (saving pending changes first). A
//! branch name attaches HEAD to it; anything else detaches HEAD.

use super::prelude::*;

/// Make the live mount show a ref's tree (saving pending changes first). A
/// branch name attaches HEAD to it; anything else detaches HEAD.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkout {
    /// The ref (default with `create`: HEAD).
    #[serde(rename = "ref", default)]
    pub target: Option<String>,
    /// Create this branch at the ref and attach HEAD to it (`checkout -b`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<String>,
}

impl Verb for Checkout {
    const NAME: &'static str = "checkout";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::checkout::CheckedOut;

    fn agent_may(&self) -> bool {
        // Both save pending changes as an `auto/before-...` checkpoint first.
        // `-b` creates a new name only (an existing one is a conflict).
        let Checkout {
            target: _,
            create: _,
        } = self;
        true
    }
}

impl Handler for Checkout {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::checkout::run(
            cx.host,
            &cx.target(),
            &cx.call,
            self.target.as_deref(),
            self.create.as_deref(),
        )
    }
}
