//! `remote_gc`: the request to a [`crate::remote::gc::gc`] run.

use crate::error::Result;
use crate::remote::gc::{self, DEFAULT_GRACE_SECS, GcReport, GcRequest};
use crate::store::ObjectStore;

/// Run a remote gc on `remote` (default: the only configured one, else
/// `origin`) of `store`.
pub fn run_store(
    store: &dyn ObjectStore,
    remote: Option<String>,
    dry_run: bool,
    grace_secs: Option<u64>,
) -> Result<GcReport> {
    let name = super::push::remote_name(store, remote)?;
    let remote = crate::remote::open(store, &name)?;
    let req = GcRequest {
        dry_run,
        grace_secs: grace_secs.unwrap_or(DEFAULT_GRACE_SECS),
    };
    gc::gc(store, &remote, req)
}
