//! Serving one verb: what a handler is given ([`Cx`]), what it may ask of the daemon
//! ([`Server`]), and the one place a request is prepared for its [`Kind`]
//! ([`serve`]): the target session resolved for the caller's scope, the op-record
//! quota of agent sockets, root pins, the access clock, the op lock, and the
//! `branch_moved` notice on the answer.

use std::path::Path;
use std::sync::MutexGuard;

use serde::Serialize;
use serde_json::Value;

use crate::control::{Kind, MountFor, Verb};
use crate::error::{Error, Result};
use crate::oplog::Actor;
use crate::ops::{self, Host, Scope, Target};
use crate::remote::trim::TrimRequest;

/// A verb's handler: runs the request on the daemon `H`.
pub(crate) trait Handler: Verb {
    /// Serve the request.
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response>;

    /// Runs on the target before the op lock is taken ([`Kind::Session`] only):
    /// e.g. waiting for the conversation writer, which takes the op lock itself.
    fn before_lock(&self, _t: &Target) -> Result<()> {
        Ok(())
    }
}

/// What store-wide verbs ask of the daemon, beside what every op asks of it
/// ([`Host`]). The daemon serves them all; a host without a daemon (the CLI's
/// offline host, an in-process test host) refuses what it cannot serve with
/// [`needs_daemon`].
pub(crate) trait Server: Host {
    /// `ping`: the daemon's pid and store, and the session a bound socket serves.
    fn ping(&self, session: Option<&str>) -> Result<super::ping::Pong>;
    /// `mount`.
    fn mount(
        &self,
        req: super::Mount,
        events: &mut dyn FnMut(Value),
    ) -> Result<super::mount::Mounted>;
    /// `umount`.
    fn umount(&self, mountpoint: &Path) -> Result<super::umount::Unmounted>;
    /// `shutdown`.
    fn shutdown(&self) -> Result<super::shutdown::Stopping>;
    /// `gc`.
    fn gc(&self, dry_run: bool, events: &mut dyn FnMut(Value)) -> Result<super::gc::Collected>;
    /// `fsck`.
    fn fsck(&self, repair: bool, events: &mut dyn FnMut(Value)) -> Result<super::fsck::Checked>;
    /// `session_show` (`bound`: the session of the socket it came on).
    fn session_show(
        &self,
        name: Option<&str>,
        bound: Option<&str>,
    ) -> Result<crate::lifecycle::manage::SessionShown>;
    /// `session_discard`.
    fn session_discard(&self, name: &str) -> Result<super::session_discard::Discarded>;
    /// `session_sweep`.
    fn sweep(&self) -> Result<super::session_sweep::Swept>;
    /// `store_trim`.
    fn store_trim(
        &self,
        req: TrimRequest,
        events: &mut dyn FnMut(Value),
    ) -> Result<crate::remote::trim::TrimReport>;
}

/// The refusal of verb `what` by a host that is not a daemon.
pub(crate) fn needs_daemon(what: &str) -> Error {
    Error::Invalid(format!("{what} needs a running treefork daemon"))
}

/// What a handler runs with.
pub(crate) struct Cx<'a, H> {
    /// The daemon.
    pub host: &'a H,
    /// Who the caller is, for mounts it asks for.
    pub who: MountFor,
    /// Who asked (as the operation log names it).
    pub actor: &'a Actor,
    /// What the op's operation record is made from.
    pub call: ops::Call<'a>,
    /// The session the request is aimed at (a session socket's own, or named).
    pub session: Option<&'a str>,
    /// Event lines sent before the answer.
    pub events: &'a mut dyn FnMut(Value),
    target: Option<Target>,
    lock: Option<MutexGuard<'a, ()>>,
}

impl<H> Cx<'_, H> {
    /// The target session of a session verb.
    pub fn target(&self) -> Target {
        self.target
            .clone()
            .expect("session verbs are served with their target")
    }
}

impl<'a, H> Cx<'a, H> {
    /// The op lock of a [`Kind::Session`] verb, for handlers that release it early.
    pub fn lock(&mut self) -> MutexGuard<'a, ()> {
        self.lock
            .take()
            .expect("session verbs are served under the op lock")
    }
}

/// A request on its way to its handler.
pub(super) struct Call<'a> {
    pub who: MountFor,
    pub actor: &'a Actor,
    pub explanation: Option<&'a str>,
    pub session: Option<&'a str>,
    /// The request in protocol form (recorded with the operation).
    pub request: Value,
    pub events: &'a mut dyn FnMut(Value),
}

fn answer<R: Serialize>(r: R) -> Result<Value> {
    serde_json::to_value(r).map_err(|e| Error::Invalid(format!("answer does not serialize: {e}")))
}

/// Serve `req` for its [`Kind`] (see the module doc).
pub(super) fn serve<H: Server, V: Handler>(h: &H, call: Call<'_>, req: V) -> Result<Value> {
    let Call {
        who,
        actor,
        explanation,
        session,
        request,
        events,
    } = call;
    let rec = ops::Call {
        actor,
        explanation: explanation.map(str::to_string),
        request,
    };
    if V::KIND == Kind::Store {
        let mut cx = Cx {
            host: h,
            who,
            actor,
            call: rec,
            session,
            events,
            target: None,
            lock: None,
        };
        return answer(req.handle(&mut cx)?);
    }
    // What names resolve to for this caller: an agent socket sees its session's
    // lineage only (`crate::visibility`); every resolution goes through it.
    let mut t = h.target(session)?;
    t.scope = if actor.is_agent() {
        Scope::Lineage
    } else {
        Scope::All
    };
    // And what its composing operations are checked against (`merge::contain`).
    t.agent_uid = match who {
        MountFor::Agent { uid, .. } if actor.is_agent() => Some(uid),
        _ => None,
    };
    if actor.is_agent() && V::RECORDS {
        crate::quota::check_op_records(&*h.store(), t.session.name())?;
    }
    let s = t.session.clone();
    // Until the op's record is committed, the roots its views name stay gc roots.
    let _pins = s.pin_roots();
    s.note_access();
    let lock = if V::KIND == Kind::Session {
        req.before_lock(&t)?;
        Some(s.op_lock.lock().unwrap())
    } else {
        None
    };
    let mut cx = Cx {
        host: h,
        who,
        actor,
        call: rec,
        session,
        events,
        target: Some(t),
        lock,
    };
    let mut v = answer(req.handle(&mut cx)?)?;
    drop(cx);
    // Whatever the op, the session is told when someone else moved its branch.
    if V::KIND == Kind::Session {
        branch_notice(&s, &mut v);
    }
    Ok(v)
}

/// Add `branch_moved` to the answer `v` when someone else moved the session's
/// branch (see `ops::branch_notice`).
pub(super) fn branch_notice(s: &crate::session::Session, v: &mut Value) {
    if let (Some(n), Some(m)) = (ops::branch_notice(s), v.as_object_mut()) {
        m.insert("branch_moved".into(), n);
    }
}
