//! `pull` and `mount from_remote`: requests to [`crate::remote::pull`] calls.

use serde_json::Value;

use crate::error::Result;
use crate::host::Host;
use crate::host::Unserved;
use crate::remote::pull::{self, PullReport, PullRequest};
use crate::store::ObjectStore;

/// Serve `pull` for the daemon `h`.
pub fn run<H: Host>(
    h: &H,
    remote: Option<String>,
    refs: Vec<String>,
    by: pull::PulledBy,
    events: &mut dyn FnMut(Value),
) -> Result<PullReport> {
    let store = h.store();
    let name = super::push::remote_name(&*store, remote)?;
    let remote = crate::remote::open(&*store, &name)?;
    crate::remote::lazy::install(&store)?;
    let req = PullRequest { refs, by: Some(by) };
    pull::pull(h, &remote, &req, events)
}

/// Serve `pull` without a daemon (no session is mounted; the caller holds the
/// store lock).
pub fn run_store(
    store: &dyn ObjectStore,
    remote: Option<String>,
    refs: Vec<String>,
    events: &mut dyn FnMut(Value),
) -> Result<PullReport> {
    let name = super::push::remote_name(store, remote)?;
    let remote = crate::remote::open(store, &name)?;
    pull::pull_env(
        store,
        &Unserved,
        &remote,
        &PullRequest { refs, by: None },
        events,
    )
}

/// Before the daemon mounts `session` with `from_remote: "REMOTE/REF"`: create
/// its record from the remote (a local session of that name is `conflict`), and
/// make sure lazy reads can reach the remote. Returns the origin path the remote
/// named (not trusted: see `pull::session`), if any.
pub fn mount_from_remote<H: Host>(h: &H, session: &str, spec: &str) -> Result<Option<String>> {
    let store = h.store();
    let (rname, rref) = pull::session::split(spec)?;
    let remote = crate::remote::open(&*store, rname)?;
    crate::remote::lazy::install(&store)?;
    let _claim = h.claim(session)?;
    Ok(pull::session::create(&*store, &remote, session, rref)?.untrusted_origin)
}
