//! `push`: the request's remote and refs to a [`crate::remote::push`] call.

use serde_json::Value;

use crate::error::Result;
use crate::ops::Host;
use crate::remote::push::{self, PushReport, PushRequest};
use crate::store::ObjectStore;

/// The fields of a `push` request.
pub struct Request {
    /// The remote, if named.
    pub remote: Option<String>,
    /// The refs.
    pub refs: Vec<String>,
    /// The session named in the request, else the socket's.
    pub session: Option<String>,
    /// Overwrite non-fast-forwards.
    pub force: bool,
}

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

/// Serve `push` for the daemon `h`.
pub fn run<H: Host>(h: &H, req: Request, events: &mut dyn FnMut(Value)) -> Result<PushReport> {
    let store = h.store();
    let remote = crate::remote::open(&*store, &remote_name(&*store, req.remote)?)?;
    let preq = PushRequest {
        refs: req.refs,
        session: req.session,
        force: req.force,
    };
    push::push(h, &remote, &preq, events)
}
