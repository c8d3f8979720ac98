//! What the ops that make new sessions share (fork, continue; experiment runs
//! and bisect candidates make theirs in `experiment::begin` and `bisect::begin`):
//! taking back a new session whose records were committed but whose mount failed.
//!
//! Invariant: the caller still holds the new name's claim (`Host::claim`) when it
//! calls [`remove_unmounted`], so nobody else can mount or create that session
//! meanwhile; the claim is dropped after.

use crate::meta::{self, MetaOp};
use crate::store::ObjectStore;

/// Delete everything the new session `name` (never mounted) was given: its
/// record, info, touched paths, messages, grants and operation records, in one
/// batch. `what` names the op, for the log. Returns whether it was removed: a
/// failure is logged at error level, naming what is left behind (`session rm`
/// removes it), and the caller answers its own error.
pub(crate) fn remove_unmounted(store: &dyn ObjectStore, what: &str, name: &str) -> bool {
    let r = crate::lifecycle::manage::removal_ops(store, name).and_then(|mut ops| {
        ops.push(MetaOp::Delete(meta::session_key(name)));
        store.commit(ops)
    });
    match r {
        Ok(()) => true,
        Err(e) => {
            log::error!(
                "{what} {name}: the new session did not mount and its records could not be \
                 removed ({e}); `treefork session rm {name}` removes them"
            );
            false
        }
    }
}
