//! `remote_rm`: forget a remote — its config and tracking refs in one commit,
//! then its registry entry and local cache directory. Nothing on the remote is
//! touched.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::refs::{remote_names, tracking};
use crate::remote::registry;
use crate::store::ObjectStore;

/// The answer to `remote_rm`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RemoteRemoved {
    /// The remote forgotten.
    pub removed: String,
    /// How many of its tracking refs were dropped.
    pub tracking_refs: usize,
}

/// Serve `remote_rm` on `h` (lazy reads then forget the remote).
pub fn run_live<H: crate::host::Host>(h: &H, name: &str) -> Result<RemoteRemoved> {
    let v = run(&*h.store(), name)?;
    h.remotes_changed()?;
    Ok(v)
}

/// Forget remote `name` of `store`.
pub fn run(store: &dyn ObjectStore, name: &str) -> Result<RemoteRemoved> {
    remote_names::validate_name(name)?;
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
    registry::forget(store, name, true);
    let dir = registry::store_cache_dir(store, name);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&dir, e)),
    }
    Ok(RemoteRemoved {
        removed: name.to_string(),
        tracking_refs: refs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refs::tracking::{TrackKind, Tracking};
    use crate::remote::{RemoteConfig, config};
    use crate::store::MemStore;

    #[test]
    fn rm_drops_config_and_only_its_tracking_refs() {
        let s = MemStore::default();
        let mut ops = Vec::new();
        for name in ["origin", "origin2"] {
            let c = RemoteConfig::new(name, "s3://bkt", "http://127.0.0.1:9", None, false).unwrap();
            ops.push(c.op());
            let t = Tracking::new(TrackKind::Branch, None, None, serde_json::Value::Null);
            ops.push(t.op(name, TrackKind::Branch, "main"));
            ops.push(t.op(name, TrackKind::Session, "s"));
        }
        s.commit(ops).unwrap();
        let cache = registry::store_cache_dir(&s, "origin");
        std::fs::create_dir_all(cache.join("idx")).unwrap();
        let v = run(&s, "origin").unwrap();
        assert_eq!(v.tracking_refs, 2);
        assert!(!cache.exists());
        assert!(config::get(&s, "origin").unwrap().is_none());
        assert!(tracking::list(&s, "origin", None).unwrap().is_empty());
        assert_eq!(tracking::list(&s, "origin2", None).unwrap().len(), 2);
        assert!(config::get(&s, "origin2").unwrap().is_some());
        assert!(matches!(run(&s, "origin"), Err(Error::NotFound(_))));
        assert!(matches!(run(&s, "bad name"), Err(Error::Invalid(_))));
    }
}
