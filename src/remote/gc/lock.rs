//! The remote gc lock `gc/lock`: one remote gc at a time, across machines.
//!
//! Invariants: the lock is created with `If-None-Match: *` (`PutIf::Absent`); a
//! lock past its `expires` is taken over only by `If-Match` on the ETag read, so
//! of two gcs racing for a stale lock exactly one wins; a live lock held by
//! someone else is `Error::Conflict` naming the holder. The lock is released
//! (deleted, if it is still ours) when the guard drops: at the end of a run and
//! on every error path. On a remote without conditional writes (`single_writer`)
//! the lock is written unconditionally: that remote has one writer by contract.

use crate::error::{Error, Result};
use crate::remote::client::{Client, Put, PutIf};
use crate::remote::layout::GC_LOCK;
use crate::remote::refval::GcLock;

/// How long a lock is honoured before another gc may take it over (seconds).
pub const LOCK_TTL_SECS: i64 = 6 * 3600;

/// A held `gc/lock`; released on drop.
pub struct Held<'a> {
    client: &'a Client,
    /// What was written.
    pub lock: GcLock,
}

fn token() -> String {
    crate::id::hex(&crate::id::random16())
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Take the lock at time `now` (unix seconds). `conditional`: the remote honours
/// conditional writes.
pub fn acquire(client: &Client, conditional: bool, now: i64) -> Result<Held<'_>> {
    let lock = GcLock {
        owner: token(),
        pid: std::process::id(),
        host: host(),
        started: now,
        expires: now + LOCK_TTL_SECS,
    };
    let held = Held { client, lock };
    if !conditional {
        client.put(GC_LOCK, held.lock.encode(), PutIf::Always)?;
        return Ok(held);
    }
    match client.put(GC_LOCK, held.lock.encode(), PutIf::Absent)? {
        Put::Written(_) => return Ok(held),
        Put::Exists | Put::Moved => {}
    }
    let Some(got) = client.get(GC_LOCK, crate::remote::layout::Body::Gc)? else {
        // Released between our write and our read: try once more.
        return match client.put(GC_LOCK, held.lock.encode(), PutIf::Absent)? {
            Put::Written(_) => Ok(held),
            _ => Err(Error::Conflict(format!(
                "remote {}: another remote gc took gc/lock just now",
                client.name()
            ))),
        };
    };
    // An unreadable lock is treated as stale (it can only be ours, garbled), and
    // said so.
    let other = match GcLock::decode(&got.bytes) {
        Ok(o) => Some(o),
        Err(e) => {
            log::warn!(
                "remote {}: gc/lock does not decode ({e}): taken as stale and replaced",
                client.name()
            );
            None
        }
    };
    if let Some(o) = other.as_ref().filter(|o| o.expires > now) {
        return Err(Error::Conflict(format!(
            "remote {}: a remote gc is running (gc/lock held by pid {} on {:?} since {}, \
             until {}); try later",
            client.name(),
            o.pid,
            o.host,
            o.started,
            o.expires
        )));
    }
    let Some(etag) = got.etag else {
        return Err(Error::Conflict(format!(
            "remote {}: gc/lock is stale but the server gave no ETag to take it over",
            client.name()
        )));
    };
    match client.put(GC_LOCK, held.lock.encode(), PutIf::Matches(etag))? {
        Put::Written(_) => {
            log::warn!(
                "remote {}: took over a stale gc/lock ({:?})",
                client.name(),
                other.map(|o| (o.pid, o.host, o.started))
            );
            Ok(held)
        }
        _ => Err(Error::Conflict(format!(
            "remote {}: another remote gc took over the stale gc/lock first",
            client.name()
        ))),
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let ours = match self.client.get(GC_LOCK, crate::remote::layout::Body::Gc) {
            Ok(Some(g)) => match GcLock::decode(&g.bytes) {
                Ok(l) => l.owner == self.lock.owner,
                Err(e) => {
                    log::warn!(
                        "remote {}: gc/lock not released: it does not decode ({e}); the next gc takes it as stale",
                        self.client.name()
                    );
                    false
                }
            },
            Ok(None) => false,
            Err(e) => {
                log::warn!("remote {}: gc/lock not released: {e}", self.client.name());
                false
            }
        };
        if ours && let Err(e) = self.client.delete(GC_LOCK) {
            log::warn!("remote {}: gc/lock not released: {e}", self.client.name());
        }
    }
}
