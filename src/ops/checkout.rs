//! `checkout`: make the live mount show a ref's tree, saving pending changes first.
//! A branch name attaches HEAD to that branch (new checkpoints move it); any other
//! ref detaches HEAD. `checkout -b NAME [REF]` creates the branch, then checks it
//! out. Recorded as an operation (kind `checkout`).

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
    let attach = refs::get_ref(&*store, spec)?
        .filter(|r| r.checkpoint == c.id)
        .map(|_| spec.to_string())
        .filter(|b| super::refctx::branch_visible(t, b).unwrap_or(false));
    let root = c.root_id()?;
    let t0 = std::time::Instant::now();
    let mut before = None;
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
            let change = StateChange {
                head: Some(c.id.clone()),
                branch: attach.clone(),
                base: root,
                root: Some(root),
            };
            s.commit_state(change, &mut |_, _| Ok(Vec::new())).map(drop)
        },
    )?;
    log::debug!(
        "checkout {spec}: sync+save+graft+commit, {n} invalidations, total {:?}",
        t0.elapsed()
    );
    let before = before.expect("grafted");
    let after = view_of(&s.record(), root);
    let op = record::append(t, call.op("checkout", before, after)).ok();
    Ok(json!({
        "checkpoint": ckpt_json(&c),
        "branch": attach,
        "detached": attach.is_none(),
        "saved": saved_json(saved),
        "op": op.map(|o| o.seq),
    }))
}
