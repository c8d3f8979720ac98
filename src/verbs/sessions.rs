//! `sessions`: list sessions.

use super::prelude::*;
use std::path::PathBuf;

/// List sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sessions {}

impl Verb for Sessions {
    const NAME: &'static str = "sessions";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = SessionList;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Sessions {} = self;
        false
    }
}

/// The answer to `sessions`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionList {
    /// Every session of the store, by name.
    pub sessions: Vec<SessionRow>,
}

/// One session in `sessions`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionRow {
    /// Session name.
    pub name: String,
    /// `mounted` or `stopped`.
    pub state: String,
    /// Where it is mounted (`null`: not mounted).
    pub mountpoint: Option<PathBuf>,
    /// Bytes of file data in its workspace (live for a mounted session).
    pub bytes: i64,
    /// Inodes in its workspace (live for a mounted session).
    pub inodes: i64,
    /// Inodes in a mounted session's live table (eviction bounds it; `null`:
    /// not mounted).
    #[serde(default)]
    pub live_inodes: Option<usize>,
    /// Unix seconds of its last stored change.
    pub updated: i64,
    /// Its workspace's stored root (hex).
    pub root: String,
    /// The lifecycle columns.
    #[serde(flatten)]
    pub life: crate::lifecycle::manage::LifeColumns,
}

impl Handler for Sessions {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<SessionList> {
        cx.host.sessions()
    }
}
