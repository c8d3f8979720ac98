//! `checkout`: make the live mount show a ref's tree, saving pending changes first.
//! A branch name attaches HEAD to that branch (new checkpoints move it); any other
//! ref detaches HEAD. A branch another live session has checked out is not
//! attached (its checkpoints would move the branch under that session, as git
//! refuses a branch checked out in another worktree): HEAD is detached at it, and
//! the answer's `notes` say so. `checkout -b NAME [REF]` creates the branch, then
//! checks it out. Recorded as an operation (kind `checkout`).

use serde_json::{Value, json};

use super::record::{self, Call, view_of};
use super::{Host, Target, branch, ckpt_json, save_and_graft, saved_json};
use crate::error::{Error, Result};
use crate::refs;
use crate::session::snapshot::StateChange;

pub(super) fn run<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    spec: Option<&str>,
    create: Option<&str>,
) -> Result<Value> {
    if let Some(name) = create {
        branch::create(h, t, call, name, spec)?;
        return run(h, t, call, Some(name), None);
    }
    let spec = spec.ok_or_else(|| Error::Invalid("checkout needs a ref".into()))?;
    let s = &t.session;
    let store = s.store().clone();
    let c = super::refctx::resolve(t, spec)?;
    // Attach only to a branch the caller sees (a hidden branch named like an id
    // prefix it resolved is not the caller's to move).
    let mut attach = refs::get_ref(&*store, spec)?
        .filter(|r| r.checkpoint == c.id)
        .map(|_| spec.to_string())
        .filter(|b| super::refctx::branch_visible(t, b).unwrap_or(false));
    let mut notes = Vec::new();
    if let Some(b) = &attach
        && let Some(other) = held_elsewhere(h, t, b)
    {
        notes.push(format!(
            "branch {b} is checked out in session {other}: HEAD is detached at {} \
             (`treefork checkout -b NAME` starts a branch of your own here)",
            &c.id[..12]
        ));
        attach = None;
    }
    let root = c.root_id()?;
    let t0 = std::time::Instant::now();
    let mut before = None;
    let mut live = root;
    // HEAD is committed under the write gate, right after the tree swap: a write
    // (and its flush) may only come after it, never be overwritten by it.
    let (saved, n) = save_and_graft(
        t,
        "before-checkout",
        &format!("checkout of {spec}"),
        root,
        None,
        &mut |before_root| {
            before = Some(view_of(&s.record(), before_root));
            // The workspace now: the target's tree under the live inode counter
            // (another id than `root` once the session allocated more inodes).
            live = s.flush()?;
            let change = StateChange {
                head: Some(c.id.clone()),
                branch: attach.clone(),
                base: root,
                root: Some(live),
            };
            s.commit_state(change, &mut |_, _| Ok(Vec::new())).map(drop)
        },
    )?;
    log::debug!(
        "checkout {spec}: sync+save+graft+commit, {n} invalidations, total {:?}",
        t0.elapsed()
    );
    let before = before.expect("grafted");
    let after = view_of(&s.record(), live);
    let op = record::append(t, call.op("checkout", before, after)).ok();
    Ok(json!({
        "checkpoint": ckpt_json(&c),
        "branch": attach,
        "detached": attach.is_none(),
        "saved": saved_json(saved),
        "op": op.map(|o| o.seq),
        "notes": notes,
    }))
}

/// The other live session that has branch `b` checked out, if any.
pub(super) fn held_elsewhere<H: Host>(h: &H, t: &Target, b: &str) -> Option<String> {
    h.live()
        .into_iter()
        .find(|o| {
            o.session.name() != t.session.name() && o.session.record().branch.as_deref() == Some(b)
        })
        .map(|o| o.session.name().to_string())
}
