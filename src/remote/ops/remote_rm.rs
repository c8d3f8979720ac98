//! `remote_rm`: forget a remote — its config and tracking refs in one commit,
//! then its registry entry and local cache directory. Nothing on the remote is
//! touched.

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::remote::{config, registry, tracking};
use crate::store::ObjectStore;

pub(super) fn run(store: &dyn ObjectStore, name: &str) -> Result<Value> {
    config::validate_name(name)?;
    let Some(raw) = store.meta_get(&meta::remote_key(name))? else {
        return Err(Error::NotFound(format!("no remote named {name:?}")));
    };
    let mut ops = vec![
        MetaOp::Expect(meta::remote_key(name), Some(raw)),
        MetaOp::Delete(meta::remote_key(name)),
    ];
    let dropped = tracking::delete_all_ops(store, name)?;
    let refs = dropped.len();
    ops.extend(dropped);
    store.commit(ops)?;
    registry::forget(store, name);
    let dir = registry::store_cache_dir(store, name);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&dir, e)),
    }
    Ok(json!({ "removed": name, "tracking_refs": refs }))
}
