//! What a mount costs in descriptors, and the check that the daemon can pay it
//! before anything of the mount is made ([`Daemon::hold_fds`]).
//!
//! Invariants: a mount starts only while the descriptors free (the limit less
//! what is open, less what mounts being made now have reserved) cover its need
//! ([`need`]) plus a reserve for everything else the daemon opens (connections,
//! requests, children's pipes, the store's pack files it has not opened yet);
//! the check and the reservation are one step under the reservation lock, so
//! two mounts made at once cannot both take the last descriptors; a reservation
//! is given back when its [`FdHold`] drops (the mount is live, its descriptors
//! open and counted, or it failed).

use std::sync::Mutex;

use super::Daemon;
use crate::error::{Error, Result};
use crate::transport::Transport;

/// Descriptors a mount served over /dev/fuse holds: the device, the
/// notifications' duplicate, its control socket and the mountpoint's parent (4
/// measured with the shared pool, 7 with `TREEFORK_FUSE_SERVER=fuser`, whose
/// workers clone the device; rounded up to cover either).
const OVER_DEV: u64 = 8;
/// Over the ring: the above and the ring's queues and event descriptors (12
/// measured; rounded up).
const OVER_RING: u64 = 16;
/// An agent socket: its listener and the socket file's directory.
const AGENT: u64 = 2;
/// Kept free whatever the mounts: client connections, requests in flight,
/// children's pipes, the metadata journal and database.
const RESERVE: u64 = 64;

/// What mounts being made now have reserved.
#[derive(Default)]
pub(super) struct Reserved(Mutex<u64>);

/// Descriptors one mount over `transport` (with an agent socket when `agent`)
/// holds while it is served.
pub(crate) fn need(transport: Transport, agent: bool) -> u64 {
    let base = match transport {
        Transport::Dev => OVER_DEV,
        Transport::Auto | Transport::Uring => OVER_RING,
    };
    base + if agent { AGENT } else { 0 }
}

/// A reservation of descriptors for a mount being made.
pub(crate) struct FdHold<'a> {
    reserved: &'a Reserved,
    n: u64,
}

impl Drop for FdHold<'_> {
    fn drop(&mut self) {
        let mut r = self.reserved.0.lock().unwrap_or_else(|p| p.into_inner());
        *r = r.saturating_sub(self.n);
    }
}

impl Daemon {
    /// Reserve the descriptors a mount over `transport` needs, or refuse it
    /// (`busy`, saying how many are open, the limit and what to do) before
    /// anything is made.
    pub(crate) fn hold_fds(&self, transport: Transport, agent: bool) -> Result<FdHold<'_>> {
        let n = need(transport, agent);
        let mut r = self.fds.0.lock().unwrap_or_else(|p| p.into_inner());
        let (open, limit) = crate::fdlimit::usage()?;
        let packs = self.store.pack_fds_unopened() as u64;
        let wanted = open + *r + n + RESERVE + packs;
        if wanted > limit {
            return Err(Error::Busy(format!(
                "the daemon cannot serve another mount: {open} of its {limit} descriptors are \
                 open ({} reserved for mounts being made, {RESERVE} kept for requests and {packs} \
                 for the store's pack files) and a mount needs {n}; raise the daemon's limit \
                 (`ulimit -n` in the shell that starts it, LimitNOFILE= for a service) or unmount \
                 sessions",
                *r
            )));
        }
        *r += n;
        Ok(FdHold {
            reserved: &self.fds,
            n,
        })
    }
}
