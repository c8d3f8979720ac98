//! Remote-held objects: what local gc and fsck may leave unread.
//!
//! Owns: [`Held`], the predicate "this object is not stored locally, and a
//! configured remote holds it" that the daemon and the CLI give gc and fsck (as a
//! [`crate::reach::HeldElsewhere`]; they pass it to their walks as a
//! [`crate::reach::Boundary`]) and `store trim` uses itself. Such an object was trimmed (`store trim`) or never
//! hydrated (`mount --from-remote`): it is not a problem and its subtree is not
//! read (the remote's closure invariant: a remote that holds a node holds
//! everything under it), so gc never hydrates and never refuses because of it.
//!
//! The remotes' indexes come from the store's installed fallback (the daemon's
//! [`super::lazy::Lazy`], which shares the process's open indexes), else from
//! each configured remote's local index cache (no network, no credentials: an
//! offline gc or fsck). An object only in condemned packs is not held.
//!
//! Invariant: an object stored locally is never on the boundary (it is read and
//! verified as before); an object absent locally and unknown to every remote
//! stays a problem.

use std::sync::Arc;

use super::index::RemoteIndex;
use super::registry;
use crate::error::Result;
use crate::id::ObjectId;
use crate::reach::HeldElsewhere;
use crate::store::{Fallback, ObjectStore};

/// Where to ask whether a remote holds an object.
enum Source {
    /// The store's fallback (the daemon's lazy reads over every remote).
    Fallback(Arc<dyn Fallback>),
    /// Each configured remote's cached index (offline).
    Cached(Vec<RemoteIndex>),
}

/// "Not local, and a configured remote holds it" (see the module docs).
pub struct Held<'a> {
    store: &'a dyn ObjectStore,
    source: Source,
}

impl<'a> Held<'a> {
    /// The predicate for `store`, or `None` when no remote is configured (then
    /// nothing is remote-held and walks need no boundary).
    pub fn of(store: &'a dyn ObjectStore) -> Result<Option<Held<'a>>> {
        if let Some(fb) = store.fallback() {
            return Ok(Some(Held {
                store,
                source: Source::Fallback(fb),
            }));
        }
        let configs = registry::list(store)?;
        if configs.is_empty() {
            return Ok(None);
        }
        let mut indexes = Vec::new();
        for c in configs {
            let dir = registry::index_dir(&registry::store_cache_dir(store, &c.name));
            match RemoteIndex::load(&dir) {
                Ok(ix) => indexes.push(ix),
                Err(e) => log::warn!("remote {}: cached index unreadable: {e}", c.name),
            }
        }
        Ok(Some(Held {
            store,
            source: Source::Cached(indexes),
        }))
    }

    /// Whether some remote holds `id` (whether or not it is local).
    pub fn remote_has(&self, id: &ObjectId) -> bool {
        match &self.source {
            Source::Fallback(fb) => fb.has(id),
            Source::Cached(v) => v.iter().any(|ix| ix.has(id)),
        }
    }

    /// Whether `id` is on the boundary: a remote holds it and the store does not.
    pub fn is_held(&self, id: &ObjectId) -> bool {
        // The remote lookup first: it is an in-memory hash lookup, the local one
        // an index read.
        self.remote_has(id) && !self.store.contains(id).unwrap_or(true)
    }
}

impl HeldElsewhere for Held<'_> {
    fn is_held(&self, id: &ObjectId) -> bool {
        Held::is_held(self, id)
    }
}

/// `held` (from [`Held::of`]) as the boundary parameter of `crate::gc::gc` and
/// `crate::fsck::fsck`.
pub fn boundary<'a>(held: &'a Option<Held<'_>>) -> Option<&'a dyn HeldElsewhere> {
    held.as_ref().map(|h| h as &dyn HeldElsewhere)
}

#[cfg(test)]
#[path = "held_tests.rs"]
pub(crate) mod tests;
