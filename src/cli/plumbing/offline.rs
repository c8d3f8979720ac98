//! Store-wide ops run in this process when no daemon serves the store: the store
//! is opened under its lock and the op served by the library's offline host
//! ([`treefork::daemon::offline`]) through the same verb table as the daemon's,
//! answering the same JSON (`ok` included), so a `--json` document has one shape
//! whoever answered.

use std::path::Path;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use treefork::daemon::offline::Offline;
use treefork::store::PackStore;

use super::{Progress, Request, progress_of};

/// Run `op` on the store at `store` (no daemon serves it).
pub fn run(store: &Path, op: &Request, progress: &mut dyn FnMut(Progress)) -> Result<Value> {
    // `sessions` opens (so makes) a store not made yet: an empty list, no error.
    if !matches!(op, Request::Sessions(_)) && !store.join(treefork::store::STORE_FILE).exists() {
        bail!("{} is not a treefork store", store.display());
    }
    let _lock = treefork::lock::StoreLock::acquire(store)?;
    if !Offline::serves(op) {
        bail!("{} needs a running treefork daemon", op.name());
    }
    let host = if matches!(op, Request::Fsck(treefork::verbs::Fsck { repair: true })) {
        let (s, rebuilt) = PackStore::open_for_repair(store)?;
        Offline::repaired(s, rebuilt)
    } else {
        Offline::new(PackStore::open(store)?)
    };
    let mut events = |e: Value| {
        if let Some(p) = progress_of(&e) {
            progress(p)
        }
    };
    let mut v = host.run(op.clone(), &mut events)?;
    v["ok"] = json!(true);
    Ok(v)
}
