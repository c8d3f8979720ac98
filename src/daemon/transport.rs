//! A mount's transport: /dev/fuse alone, or FUSE over io_uring beside it.
//!
//! Two steps around INIT ([`plan`] before the mount, [`start`] once the /dev/fuse
//! server answered INIT, `serving.rs`). `auto` takes the ring only when the kernel
//! allows it (`enable_uring` Y) and every queue could be prepared, and otherwise
//! serves over /dev/fuse after one info line naming the reason (and the switch);
//! `uring` fails the mount with that reason instead. The daemon never changes the
//! kernel's switch.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::error::Error;
use crate::fs::TreeforkFs;
use crate::fs::ring::dispatch::Dispatch;
use crate::fs::ring::{self, InUse, Preparing, RingUnavailable, Rings, Transport};

/// Decide before mounting: `Some` with the queues prepared when the ring is to
/// be offered at INIT; `None` for /dev/fuse alone; an error when `uring` was
/// asked and cannot be had (nothing is mounted yet).
pub(super) fn plan(
    name: &str,
    transport: Transport,
    core: &Arc<TreeforkFs>,
) -> Result<Option<Preparing>, Error> {
    if transport == Transport::Dev {
        return Ok(None);
    }
    let prepared =
        ring::available().and_then(|()| ring::prepare(Arc::new(Dispatch::new(core.clone()))));
    match prepared {
        Ok(p) => Ok(Some(p)),
        Err(why) => fall_back(name, transport, why).map(|()| None),
    }
}

/// `auto` falls back to /dev/fuse (one info line); `uring` fails.
fn fall_back(name: &str, transport: Transport, why: RingUnavailable) -> Result<(), Error> {
    match transport {
        Transport::Uring => Err(Error::RingUnavailable(why)),
        _ => {
            log::info!("session {name}: serving over /dev/fuse: {why}");
            Ok(())
        }
    }
}

/// A ring start that failed where `uring` was asked: the error, and the rings
/// to join once the mount is gone.
pub(super) struct Failed {
    pub(super) error: Error,
    pub(super) rings: Option<Rings>,
}

/// After INIT: start the prepared queues if INIT negotiated the ring, else end
/// them. `dev` is a descriptor of the mount's connection. Returns the rings to
/// join at the unmount (kept even when their start failed) and the transport in
/// use; an error (with the rings to join) when `uring` was asked and the kernel
/// did not take it — the caller then unmounts.
pub(super) fn start(
    name: &str,
    transport: Transport,
    prepared: Option<Preparing>,
    core: &TreeforkFs,
    dev: impl FnOnce() -> std::io::Result<OwnedFd>,
) -> Result<(Option<Rings>, InUse), Box<Failed>> {
    let Some(p) = prepared else {
        return Ok((None, InUse::Dev));
    };
    if !core.negotiation().over_io_uring {
        p.abandon();
        return fall_back(name, transport, RingUnavailable::NotOffered)
            .map(|()| (None, InUse::Dev))
            .map_err(|e| {
                Box::new(Failed {
                    error: e,
                    rings: None,
                })
            });
    }
    let dev = match dev() {
        Ok(d) => d,
        Err(e) => {
            // Negotiated but never registered: the kernel holds requests until
            // the ring is ready; without it the mount cannot serve at all.
            p.abandon();
            let why = RingUnavailable::Setup(format!("/dev/fuse: {e}"));
            return Err(Box::new(Failed {
                error: Error::RingUnavailable(why),
                rings: None,
            }));
        }
    };
    let (rings, r) = p.start(dev);
    match r {
        Ok(()) => {
            let (q, e) = rings.shape();
            log::info!("session {name}: serving over io_uring ({q} queues x {e} entries)");
            Ok((Some(rings), InUse::Uring))
        }
        // The kernel serves the mount over /dev/fuse after a refused REGISTER.
        Err(why) => match fall_back(name, transport, why) {
            Ok(()) => Ok((Some(rings), InUse::Dev)),
            Err(e) => Err(Box::new(Failed {
                error: e,
                rings: Some(rings),
            })),
        },
    }
}
