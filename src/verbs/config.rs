//! `config`: show (and with `set`, change) the session's settings.

use super::prelude::*;

/// Show (and with `set`, change) the session's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fields to change.
    #[serde(default)]
    pub set: Option<serde_json::Map<String, Value>>,
}

impl Verb for Config {
    const NAME: &'static str = "config";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Some;
    const RECORDS: bool = true;
    type Response = ops::config::ConfigAnswer;

    fn agent_may(&self) -> bool {
        // Showing is fine; changing settings is the user's.
        let Config { set } = self;
        set.is_none()
    }

    fn refused_what(&self) -> String {
        "config with \"set\"".to_string()
    }
}

impl Handler for Config {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::config::run(&cx.target(), &cx.call, self.set)
    }
}
