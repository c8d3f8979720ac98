//! The remote ops the daemon serves (`remote_add`, `remote_list`, `remote_rm`,
//! `remote_trust`;
//! push, pull, hydrate, remote gc and trim plug in here): one small file per verb.
//!
//! Owns: the dispatch. The daemon forwards every op for which [`handles`] is true
//! to [`run`]; ops that need only the store are also run without a daemon
//! ([`run_store`], from the CLI's offline path).
//!
//! `store_trim` needs the store's packs and the mounted sessions' live ids (gc's
//! protocol), which [`Host`] does not give: the daemon calls
//! [`store_trim::run`] itself (beside `gc`), the CLI's offline path likewise.
//!
//! Invariants: every op here is user-only (`Role::allows`); none carries or
//! answers credentials; network work happens outside the host's locks.

mod hydrate;
pub mod pull;
pub mod push;
mod remote_add;
mod remote_gc;
mod remote_list;
mod remote_rm;
mod remote_trust;
pub mod store_trim;

use serde_json::Value;

use crate::control::Op;
use crate::error::{Error, Result};
use crate::ops::Host;
use crate::store::ObjectStore;

/// Whether `op` is a remote op (served by [`run`]).
pub fn handles(op: &Op) -> bool {
    matches!(
        op,
        Op::RemoteAdd { .. }
            | Op::RemoteList
            | Op::RemoteRm { .. }
            | Op::RemoteTrust { .. }
            | Op::Push { .. }
            | Op::Pull { .. }
            | Op::Hydrate { .. }
            | Op::RemoteGc { .. }
    )
}

/// Run remote op `op` for the daemon `h` (`session`: the session the request is
/// aimed at, as for `ops::run`, the default of `push` and `hydrate`; progress
/// events go to `events`). Remote ops record no operation of their own, so the
/// caller's role, actor and explanation are not needed here.
pub fn run<H: Host>(
    h: &H,
    session: Option<&str>,
    op: Op,
    events: &mut dyn FnMut(Value),
) -> Result<Value> {
    let store = h.store();
    match op {
        op @ Op::RemoteAdd { .. } => {
            let ready = remote_add::prepare(&*store, &remote_add::Request::of(&op)?)?;
            let v = {
                let _names = h.name_lock();
                remote_add::commit(&*store, ready)?
            };
            // Lazy reads use every configured remote from now on.
            crate::remote::lazy::install(&store)?;
            Ok(v)
        }
        op @ Op::RemoteRm { .. } => {
            let v = run_store(&*store, op, events)?;
            crate::remote::lazy::install(&store)?;
            Ok(v)
        }
        Op::Push {
            remote,
            refs,
            session: named,
            force,
        } => {
            let session = named.or(session.map(str::to_string));
            let req = push::Request {
                remote,
                refs,
                session,
                force,
            };
            push::run(h, req, events)
        }
        Op::Pull { remote, refs } => pull::run(h, remote, refs, events),
        Op::Hydrate {
            session: named,
            remote,
        } => hydrate::run(h, named.or(session.map(str::to_string)), remote, events),
        op => run_store(&*store, op, events),
    }
}

/// Run a remote op that needs only the store (no mounted session): also used
/// when no daemon serves the store.
pub fn run_store(store: &dyn ObjectStore, op: Op, events: &mut dyn FnMut(Value)) -> Result<Value> {
    match op {
        op @ Op::RemoteAdd { .. } => {
            let ready = remote_add::prepare(store, &remote_add::Request::of(&op)?)?;
            remote_add::commit(store, ready)
        }
        Op::RemoteList => remote_list::run(store),
        Op::RemoteRm { name } => remote_rm::run(store, &name),
        Op::RemoteTrust { name } => remote_trust::run(store, &name),
        Op::Push {
            remote,
            refs,
            session,
            force,
        } => {
            let req = push::Request {
                remote,
                refs,
                session,
                force,
            };
            push::run_store(store, req, events)
        }
        Op::Pull { remote, refs } => pull::run_store(store, remote, refs, events),
        Op::Hydrate { session, remote } => hydrate::run_store(store, session, remote, events),
        Op::RemoteGc {
            remote,
            dry_run,
            grace_secs,
        } => remote_gc::run_store(store, remote, dry_run, grace_secs),
        other => Err(Error::Invalid(format!(
            "{} needs a running treefork daemon",
            other.name()
        ))),
    }
}
