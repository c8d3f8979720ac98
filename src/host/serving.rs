//! [`Serving`]: what the remote tier's push and pull ask of whoever serves the
//! sessions, besides the store — which session is mounted, and the two locks a
//! local change takes (a session name's claim, the store-wide branch-name lock).
//!
//! Every [`Host`] serves (the daemon, the offline host of store verbs), through
//! the impl below; [`Unserved`] is a store nobody serves (nothing is mounted and
//! every name is free: the caller holds the store lock). Invariant: one
//! definition, so push and pull take the same calls of the same host.

use super::{Host, Target};
use crate::error::{Error, Result};

/// What push and pull need of whoever serves the sessions (see the module docs).
pub trait Serving {
    /// The mounted session `name`, or the only one when `None` (an error when
    /// none is).
    fn mounted(&self, name: Option<&str>) -> Result<Target>;
    /// Run `f` owning session name `name` (refused while anyone else owns it; no
    /// mount meanwhile).
    fn with_claim(&self, name: &str, f: &mut dyn FnMut() -> Result<()>) -> Result<()>;
    /// Run `f` holding the store-wide branch-name lock.
    fn with_names(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<()>;
}

impl<H: Host> Serving for H {
    fn mounted(&self, name: Option<&str>) -> Result<Target> {
        self.target(name)
    }

    fn with_claim(&self, name: &str, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let _claim = self.claim(name)?;
        f()
    }

    fn with_names(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let _names = self.name_lock();
        f()
    }
}

/// A store nobody serves: no session is mounted, every name is free (the caller
/// holds the store lock, so nothing mounts meanwhile).
pub struct Unserved;

impl Serving for Unserved {
    fn mounted(&self, name: Option<&str>) -> Result<Target> {
        Err(Error::NotFound(match name {
            Some(n) => format!("session {n} is not mounted"),
            None => "no session is mounted".to_string(),
        }))
    }

    fn with_claim(&self, _name: &str, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        f()
    }

    fn with_names(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        f()
    }
}
