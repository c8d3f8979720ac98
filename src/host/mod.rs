//! What the session operations (`ops`) and the remote tier (`remote`) ask of
//! whoever serves the mounted sessions, defined below both so neither imports the
//! other for it: the [`Host`] trait (the daemon, the offline host of store verbs,
//! the tests' in-memory host), a mounted session as they see it ([`Target`]), the
//! answer a mount gives ([`Mounted`]), the kernel side of a mount ([`Mount`]) and
//! `syncfs` through it ([`syncfs_at`]); and [`Serving`], the part of a host that
//! push and pull need, which a store nobody serves ([`Unserved`]) also offers.
//!
//! Invariants: imports no layer above it (`ops`, `remote`, `verbs`, `fs`,
//! `daemon`): a real mount is made by the daemon and reached through
//! [`Mount`] (`fs::KernelMount`); `ops` re-exports every name here that its files
//! use (`ops::Host`, `ops::Target`, `ops::Mount`, `ops::syncfs_at`,
//! `ops::views::Mounted`).

mod mount;
mod serving;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use mount::Mount;
pub use serving::{Serving, Unserved};

use crate::control::{AgentSocket, MountFor};
use crate::error::Result;
use crate::session::{Session, SessionRecord};
use crate::store::ObjectStore;
use crate::visibility::Scope;

/// A mounted (live) session, as ops see it.
#[derive(Clone)]
pub struct Target {
    /// The session.
    pub session: Arc<Session>,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// The mount: `syncfs` and kernel cache invalidations go through it (a
    /// `fs::KernelMount` in the daemon).
    pub mount: Arc<dyn Mount>,
    /// Unix ms of its last automatic checkpoint.
    pub last_auto_ms: Arc<AtomicU64>,
    /// How its mount talks to the kernel (shown by `sessions` and `session show`).
    pub transport: crate::transport::InUse,
    /// What names and ids resolve to for this request: everything, or (on an
    /// agent socket) what the session's lineage sees. Set by the verb table
    /// (`verbs::run`) from the caller's role.
    pub scope: Scope,
    /// On an agent socket, the uid it was made for: what the agent's composing
    /// operations (restore of paths, merges) are checked against
    /// (`crate::merge::contain`). `None` for the user's sockets. Set with
    /// `scope`, by `verbs::serve`.
    pub agent_uid: Option<u32>,
}

/// What ops need from whoever serves the mounted sessions (the daemon).
pub trait Host {
    /// A checked mountpoint, resolved once.
    type Dir;
    /// A session name owned by the caller until dropped (or mounted).
    type Claim<'a>
    where
        Self: 'a;
    /// The store.
    fn store(&self) -> Arc<dyn ObjectStore>;
    /// The live session `name`, or the only one when `name` is `None`.
    fn target(&self, name: Option<&str>) -> Result<Target>;
    /// Every live session.
    fn live(&self) -> Vec<Target>;
    /// Held while a branch name is checked and written (store-wide).
    fn name_lock(&self) -> std::sync::MutexGuard<'_, ()>;
    /// Own session name `name` (refused while anyone else owns it: mounted,
    /// being mounted, created, unmounted or removed).
    fn claim(&self, name: &str) -> Result<Self::Claim<'_>>;
    /// Resolve and check a mountpoint for `who`, creating it when missing.
    fn open_mountpoint(&self, path: &Path, who: MountFor) -> Result<Self::Dir>;
    /// Mount the session of `rec` (its name claimed by `claim`) on `dir`. On
    /// success the name passes to the mount; on failure the caller still owns it.
    fn mount_claimed(
        &self,
        claim: &mut Self::Claim<'_>,
        dir: Self::Dir,
        rec: SessionRecord,
        agent: Option<AgentSocket>,
    ) -> Result<Mounted>;
    /// Flush and unmount the live session mounted at `mp`.
    fn unmount_session(&self, mp: &Path) -> Result<()>;
    /// Delete the record of session `name`, which must not be mounted (`session rm`).
    fn remove_session(&self, name: &str) -> Result<()>;
    /// The store's remotes changed (`remote add`, `remote rm`): reads of objects
    /// missing here use the remotes configured now.
    fn remotes_changed(&self) -> Result<()>;
}

/// A session just mounted: the answer to `mount`, and the start of `fork`'s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Mounted {
    /// The session mounted.
    pub session: String,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// The agent-role socket serving it, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_socket: Option<PathBuf>,
    /// Entries of the imported directory (`from`) that were not imported:
    /// sockets and device nodes. Absent when nothing was imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<u64>,
    /// `from_remote`: the origin path the remote named, kept aside (not used)
    /// until `remote_trust`. Absent when it named none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untrusted_origin: Option<String>,
}

/// Push the kernel's dirty pages of the mount `m` to the daemon (from a child
/// process, through the mount's identity: see `fs::outside`); a path that no
/// longer names the mount is `Error::Conflict` ([`crate::mount_id::mount_error`]).
pub fn syncfs_at(m: &Arc<dyn Mount>) -> Result<()> {
    m.syncfs()
        .map_err(|e| crate::mount_id::mount_error(m.path(), e))
}
