//! The ref context of a live session: what `@`/`HEAD`, `@{-N}` and `exec@N` mean
//! for it. Every op that resolves a ref spec given by a client goes through
//! [`resolve`] (so the whole ref syntax means the same in every command).
//!
//! HEAD comes from the session record. `@{-N}` and `exec@N` are answered from the
//! session's operation log once it records checkouts and execs; until then they
//! are refused with `invalid`.

use super::Target;
use crate::error::{Error, Result};
use crate::refs::{self, Checkpoint, RefContext};

/// A [`RefContext`] for a mounted session.
pub(crate) struct SessionRefs<'a> {
    t: &'a Target,
}

impl<'a> SessionRefs<'a> {
    /// The context of `t`.
    pub(crate) fn new(t: &'a Target) -> SessionRefs<'a> {
        SessionRefs { t }
    }
}

impl RefContext for SessionRefs<'_> {
    fn head(&self) -> Option<String> {
        self.t.session.record().head
    }

    fn previous_checkout(&self, n: u64) -> Result<String> {
        Err(Error::Invalid(format!(
            "@{{-{n}}}: previous checkouts are not yet recorded"
        )))
    }

    fn exec_state(&self, n: u64) -> Result<String> {
        Err(Error::Invalid(format!(
            "exec@{n}: exec records are not yet recorded"
        )))
    }
}

/// Resolve `spec` in the context of the session of `t`.
pub(crate) fn resolve(t: &Target, spec: &str) -> Result<Checkpoint> {
    refs::resolve_in(&**t.session.store(), &SessionRefs::new(t), spec)
}
