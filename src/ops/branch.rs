//! `branch`, `branches`, `branch_delete`, `branch_rename`: named refs to
//! checkpoints.
//!
//! Creating a branch is atomic store-wide: the name is checked and written under
//! the host's name lock, so of two concurrent creations of one name exactly one
//! wins and the other gets `conflict` (never a silent overwrite). A rename moves
//! the record in one batch guarded by [`MetaOp::Expect`] on both names, and the
//! sessions attached to the old name follow it. Each is recorded as an operation
//! of the session it was aimed at.
//!
//! A branch created in a session is given to it (a grant, written in the same
//! batch: see `crate::visibility`), so that session's agent sees it; `share` gives
//! an existing branch to a session (the user's). On an agent socket `branches`
//! lists only what the agent sees.

use serde_json::{Value, json};

use super::record::{self, Call, touch, view_now};
use super::{Host, Target, ref_or_fresh};
use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::meta::{self, MetaOp};
use crate::refs;
use crate::session::snapshot::StateChange;
use crate::store::ObjectStore;
use crate::tree::Timespec;
use crate::visibility::AgentView;

fn exists(name: &str) -> Error {
    Error::Conflict(format!("branch {name:?} already exists"))
}

pub(super) fn create<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    name: &str,
    from: Option<&str>,
) -> Result<Value> {
    refs::validate_ref_name(name)?;
    let store = h.store();
    if refs::get_ref(&*store, name)?.is_some() {
        return Err(exists(name));
    }
    let mut before = view_now(t)?;
    touch(&mut before, &*store, name);
    if let Some(b) = before.branch.clone() {
        touch(&mut before, &*store, &b);
    }
    let c = ref_or_fresh(t, from, &format!("branch {name}"), "manual")?;
    let r = refs::RefRecord {
        checkpoint: c.id.clone(),
        created: Timespec::now().sec,
    };
    {
        let _names = h.name_lock();
        if refs::get_ref(&*store, name)?.is_some() {
            return Err(exists(name));
        }
        crate::refs::remote_names::refuse_branch_clash(&*store, name)?;
        store.commit(vec![
            MetaOp::Expect(meta::ref_key(name), None),
            refs::ref_op(name, &r),
            crate::visibility::grant_op(t.session.name(), name, r.created, "created"),
        ])?;
    }
    let mut after = record::refs_after(t, &before);
    for b in before.branches.keys() {
        touch(&mut after, &*store, b);
    }
    let op = record::append(t, call.op("branch", before, after)).ok();
    Ok(json!({"branch": name, "checkpoint": c.id, "op": op.map(|o| o.seq)}))
}

/// Every branch, or with `view` (an agent socket) those it sees.
pub(super) fn list(store: &dyn ObjectStore, view: Option<&AgentView<'_>>) -> Result<Value> {
    let mut all = refs::list_refs(store)?;
    if let Some(v) = view {
        let seen = v.branches()?;
        all.retain(|(n, _)| seen.contains(n));
    }
    let mut list = Vec::new();
    for (name, r) in all {
        let c = CheckpointId::from_hex(&r.checkpoint).and_then(|id| refs::load(store, &id).ok());
        list.push(json!({
            "name": name, "checkpoint": r.checkpoint, "created": r.created,
            "message": c.as_ref().map(|c| c.message.clone()),
            "session": c.as_ref().map(|c| c.session.clone()),
        }));
    }
    Ok(json!({"branches": list}))
}

/// Give branch `name` to session `with` (`branch --share`).
pub(super) fn share(store: &dyn ObjectStore, name: &str, with: &str) -> Result<Value> {
    crate::visibility::share(store, name, with)?;
    Ok(json!({"branch": name, "shared_with": with}))
}

pub(super) fn delete<H: Host>(h: &H, t: Option<&Target>, call: &Call, name: &str) -> Result<Value> {
    let store = h.store();
    let before = t.map(view_now).transpose()?;
    let was = {
        let _names = h.name_lock();
        let Some(raw) = store.meta_get(&meta::ref_key(name))? else {
            return Err(Error::NotFound(format!("no branch named {name:?}")));
        };
        let r = refs::RefRecord::decode(name, &raw)?;
        store.commit(vec![
            MetaOp::Expect(meta::ref_key(name), Some(raw)),
            refs::delete_ref_op(name),
        ])?;
        r.checkpoint
    };
    let mut op = None;
    if let (Some(t), Some(mut before)) = (t, before) {
        let mut after = before.clone();
        before.branches.insert(name.to_string(), Some(was));
        after.branches.insert(name.to_string(), None);
        op = record::append(t, call.op("branch-delete", before, after))
            .ok()
            .map(|o| o.seq);
    }
    Ok(json!({"deleted": name, "op": op}))
}

pub(super) fn rename<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    old: &str,
    new: &str,
) -> Result<Value> {
    refs::validate_ref_name(new)?;
    let store = h.store();
    let before = view_now(t)?;
    let moved = {
        let _names = h.name_lock();
        let Some(raw) = store.meta_get(&meta::ref_key(old))? else {
            return Err(Error::NotFound(format!("no branch named {old:?}")));
        };
        if refs::get_ref(&*store, new)?.is_some() {
            return Err(exists(new));
        }
        crate::refs::remote_names::refuse_branch_clash(&*store, new)?;
        let r = refs::RefRecord::decode(old, &raw)?;
        store.commit(vec![
            MetaOp::Expect(meta::ref_key(old), Some(raw)),
            MetaOp::Expect(meta::ref_key(new), None),
            refs::delete_ref_op(old),
            refs::ref_op(new, &r),
        ])?;
        r.checkpoint
    };
    follow_rename(h, old, new)?;
    let mut before = before;
    before.branches.insert(old.to_string(), Some(moved.clone()));
    before.branches.insert(new.to_string(), None);
    let mut after = record::refs_after(t, &before);
    after.branches.insert(old.to_string(), None);
    after.branches.insert(new.to_string(), Some(moved.clone()));
    let op = record::append(t, call.op("branch-rename", before, after)).ok();
    Ok(json!({"renamed": old, "to": new, "checkpoint": moved, "op": op.map(|o| o.seq)}))
}

/// Sessions attached to `old` are attached to `new`: live ones through their
/// session (under its flush lock), stored ones by rewriting their record.
fn follow_rename<H: Host>(h: &H, old: &str, new: &str) -> Result<()> {
    let store = h.store();
    let mut live = std::collections::HashSet::new();
    for t in h.live() {
        let s = &t.session;
        live.insert(s.name().to_string());
        let rec = s.record();
        if rec.branch.as_deref() == Some(old) {
            let change = StateChange {
                head: rec.head.clone(),
                branch: Some(new.to_string()),
                base: s.base_root()?,
                root: None,
            };
            s.commit_state(change, &mut |_, _| Ok(Vec::new()))?;
        }
    }
    for (k, v) in store.meta_scan(meta::SESSION_PREFIX)? {
        let Some(name) = meta::session_name(&k) else {
            continue;
        };
        if live.contains(name) {
            continue;
        }
        let Ok(mut rec) = crate::session::SessionRecord::decode(name, &v) else {
            continue;
        };
        if rec.branch.as_deref() == Some(old) {
            rec.branch = Some(new.to_string());
            store.commit(vec![
                MetaOp::Expect(k.clone(), Some(v)),
                crate::session::record_op(&rec),
            ])?;
        }
    }
    Ok(())
}
