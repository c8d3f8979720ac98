//! `limits`: show (and with `set`, change) the store's quotas (`crate::quota`).

use super::prelude::*;

/// Show (and with `set`, change) the store's quotas (`crate::quota`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Limits to change (name: non-negative integer).
    #[serde(default)]
    pub set: Option<serde_json::Map<String, Value>>,
}

impl Verb for Limits {
    const NAME: &'static str = "limits";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::Some;
    const RECORDS: bool = false;
    type Response = crate::quota::LimitsShown;

    fn agent_may(&self) -> bool {
        // The store's quotas bound what agents can make the daemon hold:
        // an agent may read them, only the user changes them.
        let Limits { set } = self;
        set.is_none()
    }

    fn refused_what(&self) -> String {
        "limits with \"set\"".to_string()
    }
}

impl Handler for Limits {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        crate::quota::run(
            &*cx.host.store(),
            self.set.as_ref(),
            crate::session::seal_threshold(),
        )
    }
}
