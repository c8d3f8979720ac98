//! `mount`: mount a session (creating it, optionally from a host directory).

use super::prelude::*;
use std::path::PathBuf;

/// Mount a session (creating it, optionally from a host directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mount {
    /// Session name.
    pub session: String,
    /// Absolute mountpoint.
    pub mountpoint: PathBuf,
    /// Host directory to import when the session is created.
    #[serde(default)]
    pub from: Option<PathBuf>,
    /// Also serve the session on an agent-role socket at this absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_socket: Option<PathBuf>,
    /// A uid allowed on the agent socket besides the daemon's and root (the socket
    /// file is then owned by it, mode 0600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_uid: Option<u32>,
    /// What the session is for (stored in its info record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Idle TTL, a duration like `4h` (`never` clears it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_idle: Option<String>,
    /// Absolute TTL from now, a duration like `7d` (`never` clears it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_absolute: Option<String>,
    /// Evict once promoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_promote: Option<bool>,
    /// Never evict automatically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual: Option<bool>,
    /// Create the session from a remote ref `REMOTE/REF` (a remote session,
    /// or a new session at a remote branch); contents arrive lazily.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_remote: Option<String>,
    /// Push the session to this remote before an eviction unmounts it
    /// (`none` clears it); stored as the info's `policy.evict_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evict_to: Option<String>,
    /// How the mount talks to the kernel: `auto` (the default: FUSE over io_uring
    /// when the kernel allows it, else /dev/fuse), `uring` (fail if it cannot) or
    /// `dev`. Absent: the daemon's default (`TREEFORK_TRANSPORT`, else `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<crate::transport::Transport>,
}

impl Verb for Mount {
    const NAME: &'static str = "mount";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Mounted;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Mount {
            session: _,
            mountpoint: _,
            from: _,
            agent_socket: _,
            agent_uid: _,
            task: _,
            ttl_idle: _,
            ttl_absolute: _,
            until_promote: _,
            manual: _,
            from_remote: _,
            evict_to: _,
            transport: _,
        } = self;
        false
    }
}

/// The answer to `mount` (a shared shape: `fork` answers it too).
pub use crate::ops::views::Mounted;

impl Handler for Mount {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Mounted> {
        cx.host.mount(self, cx.events)
    }
}
