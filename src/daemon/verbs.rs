//! What the store-wide verbs ask of the daemon ([`crate::verbs::Server`]): each
//! method is the daemon's side of one verb, the rest of the verb (request type,
//! role rule, routing) is in its file under `src/verbs/`.

use std::path::Path;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::Daemon;
use crate::control::AgentSocket;
use crate::error::{Error, Result};
use crate::fs::ring::Transport;
use crate::remote::trim::TrimRequest;
use crate::verbs::fsck::Checked;
use crate::verbs::gc::Collected;
use crate::verbs::mount::Mounted;
use crate::verbs::ping::Pong;
use crate::verbs::session_discard::Discarded;
use crate::verbs::session_sweep::Swept;
use crate::verbs::shutdown::Stopping;
use crate::verbs::umount::Unmounted;
use crate::verbs::{Mount, Server};

impl Server for Daemon {
    fn ping(&self, session: Option<&str>) -> Result<Pong> {
        let mut v = Pong {
            pid: std::process::id(),
            store: self.store_dir.clone(),
            session: None,
            mountpoint: None,
            role: None,
        };
        // On a session socket: which workspace it serves (an agent's CLI, which
        // cannot read the registry, resolves its paths with it).
        if let Some(name) = session
            && let Some(mp) = self.mounted_at(name)
        {
            v.session = Some(name.to_string());
            v.mountpoint = Some(mp);
        }
        Ok(v)
    }

    fn mount(&self, req: Mount, events: &mut dyn FnMut(Value)) -> Result<Mounted> {
        let Mount {
            session,
            mountpoint,
            from,
            agent_socket,
            agent_uid,
            task,
            ttl_idle,
            ttl_absolute,
            until_promote,
            manual,
            from_remote,
            evict_to,
            transport,
        } = req;
        let agent = AgentSocket::from_request(agent_socket, agent_uid)?;
        let mut untrusted = None;
        if let Some(spec) = &from_remote {
            if from.is_some() {
                return Err(Error::Invalid(
                    "--from and --from-remote cannot be combined".into(),
                ));
            }
            untrusted = crate::remote::serve::pull::mount_from_remote(self, &session, spec)?;
        }
        let change = crate::lifecycle::manage::PolicyChange {
            task,
            ttl_idle,
            ttl_absolute,
            until_promote,
            manual,
            evict_to,
        };
        change.validate()?;
        change.check_remote(&*crate::ops::Host::store(self))?;
        let transport = transport.unwrap_or_else(Transport::from_env);
        let mut v = Daemon::mount(
            self,
            &session,
            &mountpoint,
            from.as_deref(),
            agent,
            transport,
            events,
        )?;
        self.apply_policy(&session, &change)?;
        v.untrusted_origin = untrusted;
        Ok(v)
    }

    fn umount(&self, mountpoint: &Path) -> Result<Unmounted> {
        self.unmount(mountpoint)?;
        let m = self.table.lock();
        // This request itself is still counted in `pending`.
        let exiting = m.is_empty() && self.pending.load(Ordering::SeqCst) == 1;
        if exiting {
            self.stop.store(true, Ordering::SeqCst);
        }
        Ok(Unmounted {
            mountpoint: mountpoint.to_path_buf(),
            daemon_exiting: exiting,
        })
    }

    fn shutdown(&self) -> Result<Stopping> {
        self.stop.store(true, Ordering::Relaxed);
        Ok(Stopping {})
    }

    fn gc(&self, dry_run: bool, events: &mut dyn FnMut(Value)) -> Result<Collected> {
        Daemon::gc(self, dry_run, events)
    }

    fn fsck(&self, repair: bool, events: &mut dyn FnMut(Value)) -> Result<Checked> {
        Daemon::fsck(self, repair, events)
    }

    fn session_show(
        &self,
        name: Option<&str>,
        bound: Option<&str>,
    ) -> Result<crate::lifecycle::manage::SessionShown> {
        Daemon::session_show(self, name, bound)
    }

    fn session_discard(&self, name: &str) -> Result<Discarded> {
        Daemon::session_discard(self, name)
    }

    fn sweep(&self) -> Result<Swept> {
        Daemon::sweep(self)
    }

    fn store_trim(
        &self,
        req: TrimRequest,
        events: &mut dyn FnMut(Value),
    ) -> Result<crate::remote::trim::TrimReport> {
        Daemon::store_trim(self, req, events)
    }
}
