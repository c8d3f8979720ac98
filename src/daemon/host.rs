//! The [`Host`] implementation through which session ops reach the daemon: the
//! store, the live sessions as targets, claims, mounting and unmounting forks,
//! removing sessions, and reinstalling lazy reads when remotes change.

use std::path::Path;
use std::sync::Arc;

use super::Daemon;
use super::mounting::Source;
use super::mountpoint::{self, MountDir, MountFor};
use super::table::{Claim, State};
use crate::control::AgentSocket;
use crate::error::{Error, Result};
use crate::fs::ring::Transport;
use crate::host::{Host, Mounted, Target};
use crate::session::SessionRecord;
use crate::store::ObjectStore;

impl Host for Daemon {
    type Dir = MountDir;
    type Claim<'a> = Claim<'a>;

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    fn target(&self, name: Option<&str>) -> Result<Target> {
        let live = self.live();
        let found = match name {
            Some(n) => live.into_iter().find(|t| t.session.name() == n),
            None if live.len() == 1 => live.into_iter().next(),
            None => {
                return Err(Error::Invalid(
                    "which session? run the command inside a workspace, use -C PATH, or name the session".into(),
                ));
            }
        };
        found.ok_or_else(|| {
            Error::NotFound(format!("session {} is not mounted", name.unwrap_or("?")))
        })
    }

    fn live(&self) -> Vec<Target> {
        self.table
            .lock()
            .values()
            .filter_map(|e| match (&e.state, &e.mountpoint) {
                (State::Live(m), Some(mp)) => Some(Target {
                    session: m.session.clone(),
                    mountpoint: mp.clone(),
                    mount: Arc::new(crate::fs::KernelMount::new(
                        m.mount.clone(),
                        m.kernel.clone(),
                    )),
                    last_auto_ms: m.last_auto_ms.clone(),
                    transport: m.transport,
                    scope: crate::visibility::Scope::All,
                    agent_uid: None,
                }),
                _ => None,
            })
            .collect()
    }

    fn name_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.names.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn claim(&self, name: &str) -> Result<Claim<'_>> {
        self.table.claim(name, None)
    }

    fn open_mountpoint(&self, path: &Path, who: MountFor) -> Result<MountDir> {
        mountpoint::open_mountpoint(path, who, true, &|| self.dead_mount_of_ours(path))
    }

    fn mount_claimed(
        &self,
        claim: &mut Claim<'_>,
        dir: MountDir,
        rec: SessionRecord,
        agent: Option<AgentSocket>,
    ) -> Result<Mounted> {
        self.mount_dir(
            claim,
            dir,
            Source::Record(Box::new(rec)),
            agent,
            Transport::from_env(),
            &mut |_| {},
        )
    }

    fn unmount_session(&self, mp: &Path) -> Result<()> {
        self.unmount(mp)
    }

    fn remove_session(&self, name: &str) -> Result<()> {
        self.session_rm(name).map(drop)
    }

    fn remotes_changed(&self) -> Result<()> {
        crate::remote::lazy::install(&Host::store(self))
    }
}
