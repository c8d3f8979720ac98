//! `hydrate`: the request to a [`crate::remote::pull::hydrate`] call.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::host::Host;
use crate::remote::pull::hydrate::{self, HydrateReport};
use crate::store::ObjectStore;

/// The remote to hydrate `rec` from: the named one, else the session's upstream,
/// else the only configured one (else `origin`).
fn remote_for(
    store: &dyn ObjectStore,
    given: Option<String>,
    rec: &crate::session::SessionRecord,
) -> Result<crate::remote::Remote> {
    let name = match given.or_else(|| crate::remote::push::upstream(rec).map(|u| u.0)) {
        Some(n) => n,
        None => super::push::remote_name(store, None)?,
    };
    crate::remote::open(store, &name)
}

/// Hydrate session `name` of `store`.
pub fn run_store(
    store: &dyn ObjectStore,
    name: Option<String>,
    remote: Option<String>,
    events: &mut dyn FnMut(Value),
) -> Result<HydrateReport> {
    let name =
        name.ok_or_else(|| Error::Invalid("hydrate: name the session (--session)".into()))?;
    let rec = crate::session::load_record(store, &name)?
        .ok_or_else(|| Error::NotFound(format!("no session named {name}")))?;
    let remote = remote_for(store, remote, &rec)?;
    hydrate::hydrate(store, &remote, &rec, events)
}

/// Serve `hydrate` for the daemon `h`: the named session, else the socket's, else
/// the only mounted one.
pub fn run<H: Host>(
    h: &H,
    name: Option<String>,
    remote: Option<String>,
    events: &mut dyn FnMut(Value),
) -> Result<HydrateReport> {
    let store = h.store();
    let name = match name {
        Some(n) => n,
        None => h.target(None)?.session.name().to_string(),
    };
    run_store(&*store, Some(name), remote, events)
}
