//! `push`: the request's remote and refs to a [`crate::remote::push`] call.

use serde_json::Value;

use crate::error::Result;
use crate::host::Host;
use crate::remote::push::{self, PushReport, PushRequest};
use crate::store::ObjectStore;

/// The remote a request names: the given one, else the only configured one,
/// else `origin`.
pub fn remote_name(store: &dyn ObjectStore, given: Option<String>) -> Result<String> {
    if let Some(n) = given {
        return Ok(n);
    }
    let all = crate::remote::list(store)?;
    Ok(match all.as_slice() {
        [only] => only.name.clone(),
        _ => "origin".to_string(),
    })
}

/// Serve `push` of `req` to `remote` (see [`remote_name`]) on `h`.
pub fn run<H: Host>(
    h: &H,
    remote: Option<String>,
    req: &PushRequest,
    events: &mut dyn FnMut(Value),
) -> Result<PushReport> {
    let store = h.store();
    let remote = crate::remote::open(&*store, &remote_name(&*store, remote)?)?;
    push::push(h, &remote, req, events)
}
