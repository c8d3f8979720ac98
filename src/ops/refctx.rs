//! The ref context of a live session: what `@`/`HEAD`, `@{-N}` and `exec@N` mean
//! for it. Every op that resolves a ref spec given by a client goes through
//! [`resolve`] (so the whole ref syntax means the same in every command).
//!
//! HEAD comes from the session record. `@{-N}` is answered from the session's
//! operation log: the HEAD before its N-th newest `checkout` operation, found by a
//! walk back that stops there (N at most [`MAX_PREVIOUS`]; at most
//! `oplog::walk::SCAN_LIMIT` records are searched). `exec@N`
//! is the state after exec number N (its `exec` operation's HEAD after).
//!
//! On an agent socket ([`Scope::Lineage`]) the context carries the session's
//! [`AgentView`]: every name and id resolves through it, so no op reaches a branch
//! or checkpoint the agent does not see (see `crate::visibility`). [`find_branch`]
//! is the same lookup for ops that need a branch by name themselves (the
//! session's own first, see `refs::names`), and
//! [`resolve_or_session`] (a ref, or else a session's name) asks it before it
//! reads any session record: a session the agent does not see answers exactly as
//! a name that does not exist.
//!
//! [`baseline_root`] is what `baseline` (a diff side, not a checkpoint) means for
//! the session: its info record's `origin.baseline_root` (the empty tree when it
//! has no origin).

use super::Target;
use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::oplog::walk::{self, Walked};
use crate::refs::{self, Checkpoint, RefContext, Visibility};
use crate::store::ObjectStore;
use crate::visibility::{AgentView, Scope};

/// The session's baseline tree ([`refs::BASELINE`]): the tree of the directory it
/// was imported from (a fork inherits its source's), as a promote or rebase last
/// moved it; for a session created empty, the empty tree (what promote compares
/// with too).
pub(crate) fn baseline_root(t: &Target) -> Result<crate::id::NodeId> {
    let s = &t.session;
    let store = s.store();
    match crate::lifecycle::load(&**store, s.name())?.and_then(|i| i.origin) {
        Some(o) => crate::id::NodeId::from_hex(&o.baseline_root)
            .ok_or_else(|| Error::corrupt("session info", "bad baseline root")),
        None => crate::session::empty_root(&**store, 0, 0),
    }
}

/// Largest N of `@{-N}`.
pub const MAX_PREVIOUS: u64 = 1000;

/// A [`RefContext`] for a mounted session.
pub(crate) struct SessionRefs<'a> {
    t: &'a Target,
    view: Option<AgentView<'a>>,
}

impl<'a> SessionRefs<'a> {
    /// The context of `t`.
    pub(crate) fn new(t: &'a Target) -> SessionRefs<'a> {
        SessionRefs {
            t,
            view: agent_view(t),
        }
    }
}

/// What the caller of `t` sees, when it does not see everything.
pub(crate) fn agent_view(t: &Target) -> Option<AgentView<'_>> {
    match t.scope {
        Scope::All => None,
        Scope::Lineage => Some(AgentView::new(&*t.session)),
    }
}

/// The branch `name` names for the caller of `t` (its own, a store-wide one, or
/// `SESSION/BRANCH`; only what the caller sees): stored name and record.
pub(crate) fn find_branch(t: &Target, name: &str) -> Result<Option<(String, refs::RefRecord)>> {
    let view = agent_view(t);
    let visible = |full: &str| view.as_ref().map_or(Ok(true), |v| v.branch(full));
    refs::names::find(&**t.session.store(), Some(t.session.name()), name, &visible)
}

impl RefContext for SessionRefs<'_> {
    fn visibility(&self) -> Option<&dyn Visibility> {
        self.view.as_ref().map(|v| v as &dyn Visibility)
    }

    fn session(&self) -> Option<&str> {
        Some(self.t.session.name())
    }

    fn head(&self) -> Option<CheckpointId> {
        self.t.session.record().head
    }

    fn previous_checkout(&self, n: u64) -> Result<CheckpointId> {
        let s = &self.t.session;
        previous_checkout(&**s.store(), s.name(), n)
    }

    fn exec_state(&self, n: u64) -> Result<CheckpointId> {
        let s = &self.t.session;
        let hex = super::exec::exec_state(&**s.store(), s.name(), n)?;
        CheckpointId::from_hex(&hex).ok_or_else(|| {
            Error::corrupt(format!("exec@{n}"), format!("bad checkpoint id {hex:?}"))
        })
    }
}

/// Resolve `spec` in the context of the session of `t`.
pub(crate) fn resolve(t: &Target, spec: &str) -> Result<Checkpoint> {
    refs::resolve_in(&**t.session.store(), &SessionRefs::new(t), spec)
}

/// The checkpoint `spec` names: a ref (in the caller's view), or else the name
/// of another session the caller sees: its HEAD. A session the caller does not
/// see, or one with no HEAD, answers as the ref does (`unknown ref ...`).
pub(crate) fn resolve_or_session(t: &Target, spec: &str) -> Result<Checkpoint> {
    let why = match resolve(t, spec) {
        Err(Error::NotFound(why)) => why,
        r => return r,
    };
    let seen = spec != t.session.name() && agent_view(t).map_or(Ok(true), |v| v.session(spec))?;
    let head = seen
        .then(|| crate::session::load_record(&**t.session.store(), spec))
        .transpose()?
        .flatten()
        .and_then(|r| r.head);
    match head.map(|h| resolve(t, &h.to_hex())) {
        Some(Ok(c)) => Ok(c),
        Some(Err(Error::NotFound(_))) | None => Err(Error::NotFound(why)),
        Some(Err(e)) => Err(e),
    }
}

/// `@{-N}` of `session`: the HEAD before its N-th newest `checkout` operation.
pub(crate) fn previous_checkout(
    store: &dyn ObjectStore,
    session: &str,
    n: u64,
) -> Result<CheckpointId> {
    if n > MAX_PREVIOUS {
        return Err(Error::Invalid(format!(
            "@{{-{n}}}: at most @{{-{MAX_PREVIOUS}}}"
        )));
    }
    let mut seen = 0;
    let mut found = None;
    // Newest first, in pages, stopping at the N-th checkout.
    let walked = walk::back(store, session, None, walk::SCAN_LIMIT, &mut |op| {
        if op.kind == "checkout" {
            seen += 1;
            if seen == n {
                found = Some(op);
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    match found {
        Some(op) => op.before.head.ok_or_else(|| {
            Error::NotFound(format!(
                "@{{-{n}}}: the session had no checkpoint before that checkout"
            ))
        }),
        None if walked == Walked::Exhausted => Err(Error::NotFound(format!(
            "@{{-{n}}}: {seen} checkout(s) among the session's newest {} operations",
            walk::SCAN_LIMIT
        ))),
        None => Err(Error::NotFound(format!(
            "@{{-{n}}}: the session's log has {seen} checkout(s)"
        ))),
    }
}
