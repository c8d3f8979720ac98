//! `push`: the request's remote and refs to a [`crate::remote::push`] call.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::ops::Host;
use crate::remote::push::{self, Env, PushReport, PushRequest};
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

/// Serve `push` without a daemon: no session is mounted (sessions are read from
/// their records).
pub fn run_store(
    store: &dyn ObjectStore,
    req: Request,
    events: &mut dyn FnMut(Value),
) -> Result<PushReport> {
    let remote = crate::remote::open(store, &remote_name(store, req.remote)?)?;
    let target = |n: Option<&str>| {
        Err(Error::NotFound(match n {
            Some(n) => format!("session {n} is not mounted"),
            None => "no session is mounted: name one to push".to_string(),
        }))
    };
    let with_claim = |_: &str, f: &mut dyn FnMut() -> Result<()>| f();
    let env = Env {
        store,
        target: &target,
        with_claim: &with_claim,
    };
    let preq = PushRequest {
        refs: req.refs,
        session: req.session,
        force: req.force,
    };
    push::push_env(&env, &remote, &preq, events)
}
