//! `umount`: flush and unmount.

use super::prelude::*;
use std::path::PathBuf;

/// Flush and unmount.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Umount {
    /// Absolute mountpoint.
    pub mountpoint: PathBuf,
}

impl Verb for Umount {
    const NAME: &'static str = "umount";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Value;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Umount { mountpoint: _ } = self;
        false
    }
}

impl Handler for Umount {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Value> {
        cx.host.umount(&self.mountpoint)
    }
}
