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
    type Response = Unmounted;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Umount { mountpoint: _ } = self;
        false
    }
}

/// The answer to `umount`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Unmounted {
    /// The mountpoint unmounted.
    pub mountpoint: PathBuf,
    /// The daemon exits now: this was its last mount and no other request is
    /// being served (absent from old daemons' answers: `false`).
    #[serde(default)]
    pub daemon_exiting: bool,
}

impl Handler for Umount {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Unmounted> {
        cx.host.umount(&self.mountpoint)
    }
}
