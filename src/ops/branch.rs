//! `branch`, `branches`, `branch_delete`: named refs to checkpoints.
//!
//! Creating a branch is atomic store-wide: the name is checked and written under
//! the host's name lock, so of two concurrent creations of one name exactly one
//! wins and the other gets `conflict` (never a silent overwrite).

use serde_json::{Value, json};

use super::{Host, Target, ref_or_fresh};
use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::refs;
use crate::store::ObjectStore;
use crate::tree::Timespec;

fn exists(name: &str) -> Error {
    Error::Conflict(format!("branch {name:?} already exists"))
}

pub(super) fn create<H: Host>(h: &H, t: &Target, name: &str, from: Option<&str>) -> Result<Value> {
    refs::validate_ref_name(name)?;
    let store = h.store();
    if refs::get_ref(&*store, name)?.is_some() {
        return Err(exists(name));
    }
    let c = ref_or_fresh(t, from, &format!("branch {name}"), "manual")?;
    let r = refs::RefRecord {
        checkpoint: c.id.clone(),
        created: Timespec::now().sec,
    };
    let _names = h.name_lock();
    if refs::get_ref(&*store, name)?.is_some() {
        return Err(exists(name));
    }
    store.commit(vec![refs::ref_op(name, &r)])?;
    Ok(json!({"branch": name, "checkpoint": c.id}))
}

pub(super) fn list(store: &dyn ObjectStore) -> Result<Value> {
    let mut list = Vec::new();
    for (name, r) in refs::list_refs(store)? {
        let c = CheckpointId::from_hex(&r.checkpoint).and_then(|id| refs::load(store, &id).ok());
        list.push(json!({
            "name": name, "checkpoint": r.checkpoint, "created": r.created,
            "message": c.as_ref().map(|c| c.message.clone()),
            "session": c.as_ref().map(|c| c.session.clone()),
        }));
    }
    Ok(json!({"branches": list}))
}

pub(super) fn delete<H: Host>(h: &H, name: &str) -> Result<Value> {
    let store = h.store();
    let _names = h.name_lock();
    if refs::get_ref(&*store, name)?.is_none() {
        return Err(Error::NotFound(format!("no branch named {name:?}")));
    }
    store.commit(vec![refs::delete_ref_op(name)])?;
    Ok(json!({"deleted": name}))
}
