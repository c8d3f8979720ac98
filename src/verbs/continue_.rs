//! `continue`: fork the latest session imported from `project`, its messages copied, and
//! mount it (user role only).

use super::prelude::*;
use std::path::PathBuf;

/// Fork the latest session imported from `project`, its messages copied, and
/// mount it (user role only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Continue {
    /// The durable repository (absolute path).
    pub project: PathBuf,
    /// New session name.
    pub name: String,
    /// Where to mount it (absolute).
    pub mountpoint: PathBuf,
}

impl Verb for Continue {
    const NAME: &'static str = "continue";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = ops::messages::cont::Continued;

    fn agent_may(&self) -> bool {
        // Reads any session of the store and mounts a new one: the user's.
        let Continue {
            project: _,
            name: _,
            mountpoint: _,
        } = self;
        false
    }
}

impl Handler for Continue {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        ops::messages::continue_session(
            cx.host,
            cx.who,
            &cx.call,
            &self.project,
            &self.name,
            &self.mountpoint,
        )
    }
}
