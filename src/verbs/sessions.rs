//! `sessions`: list sessions.

use super::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::session::Session;
use crate::transport::InUse;

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
    /// How a mounted session's mount talks to the kernel: `uring` (FUSE over
    /// io_uring) or `dev` (/dev/fuse); `null`: not mounted.
    #[serde(default)]
    pub transport: Option<InUse>,
    /// Unix seconds of its last stored change.
    pub updated: i64,
    /// Its workspace's stored root (hex).
    pub root: String,
    /// The session it was forked from (a fork or an experiment run), if any.
    #[serde(default)]
    pub parent: Option<String>,
    /// The lifecycle columns.
    #[serde(flatten)]
    pub life: crate::lifecycle::manage::LifeColumns,
}

impl Handler for Sessions {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<SessionList> {
        list(cx.host)
    }
}

/// Every session of the store of `h`: the mounted ones with their live usage, the
/// rest from their records.
fn list<H: ops::Host>(h: &H) -> Result<SessionList> {
    let store = h.store();
    let mounted: HashMap<String, (PathBuf, Arc<Session>, InUse)> = h
        .live()
        .into_iter()
        .map(|t| {
            let name = t.session.name().to_string();
            (name, (t.mountpoint, t.session, t.transport))
        })
        .collect();
    let mut parents = crate::visibility::parents(&*store)?;
    let mut list = Vec::new();
    for r in crate::session::list_records(&*store)? {
        let mp = mounted.get(&r.name).map(|(p, _, _)| p);
        let (bytes, inodes) = match mounted.get(&r.name) {
            Some((_, s, _)) => s.usage(),
            None => (r.bytes, r.inodes),
        };
        // Inodes in the mounted session's live table (eviction bounds it).
        let live = mounted.get(&r.name).map(|(_, s, _)| s.live_inodes());
        let transport = mounted.get(&r.name).map(|(_, _, t)| *t);
        let life = crate::lifecycle::manage::row_fields(&*store, &r.name, r.created);
        list.push(SessionRow {
            state: if mp.is_some() { "mounted" } else { "stopped" }.into(),
            mountpoint: mp.cloned(),
            bytes,
            inodes,
            live_inodes: live,
            transport,
            updated: r.updated,
            root: r.root.to_hex(),
            parent: parents.remove(&r.name),
            life,
            name: r.name,
        });
    }
    Ok(SessionList { sessions: list })
}
