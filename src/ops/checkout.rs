//! `checkout`: make the live mount show a ref's tree, saving pending changes first.
//! A branch name attaches HEAD to that branch (new checkpoints move it); any other
//! ref detaches HEAD. A branch another live session has checked out is not
//! attached (its checkpoints would move the branch under that session, as git
//! refuses a branch checked out in another worktree): HEAD is detached at it, and
//! the answer's `notes` say so. `checkout -b NAME [REF]` creates the branch, then
//! checks it out. Recorded as an operation (kind `checkout`) in the batch that
//! moves HEAD (`super::txn`): the branch attached to must still name the
//! checkpoint at commit.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::record::{Call, view_of};
use super::txn::{self, Log};
use super::views::{CheckpointView, Saved};
use super::{Host, Target, branch, save_and_graft};
use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::refs;
use crate::session::snapshot::StateChange;

/// The answer to `checkout`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckedOut {
    /// The checkpoint the workspace now shows (HEAD).
    pub checkpoint: CheckpointView,
    /// The branch HEAD is attached to; `null` when detached.
    pub branch: Option<String>,
    /// Whether HEAD is detached (no branch, or one checked out elsewhere).
    pub detached: bool,
    /// Pending changes saved first; `null` when there were none.
    pub saved: Option<Saved>,
    /// The operation recorded (its number in the session's log).
    pub op: u64,
    /// Things to know, for people (e.g. why HEAD was not attached).
    pub notes: Vec<String>,
}

pub(crate) fn run<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    spec: Option<&str>,
    create: Option<&str>,
) -> Result<CheckedOut> {
    if let Some(name) = create {
        branch::create(h, t, call, name, spec)?;
        return run(h, t, call, Some(name), None);
    }
    let spec = spec.ok_or_else(|| Error::Invalid("checkout needs a ref".into()))?;
    let txn = txn::Op::begin(t, "checkout");
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
            c.id.short()
        ));
        attach = None;
    }
    // The branch attached to must still name the checkpoint when the batch
    // commits (a precondition of the batch).
    let expect = attach
        .as_ref()
        .map(|b| {
            let key = meta::ref_key(b);
            store.meta_get(&key).map(|raw| MetaOp::Expect(key, raw))
        })
        .transpose()?;
    let root = c.root;
    let t0 = std::time::Instant::now();
    // HEAD is committed under the write gate, right after the tree swap, in one
    // batch with the saved pending changes and the operation record.
    let (saved, n, op) = save_and_graft(
        t,
        "before-checkout",
        &format!("checkout of {spec}"),
        root,
        None,
        &mut |tx, before_root, live| {
            let before = view_of(tx.before(), before_root);
            tx.set_state(StateChange {
                head: Some(c.id),
                branch: attach.clone(),
                base: root,
                root: Some(live),
            });
            txn.commit(tx, Log::Next, &mut |_, after| {
                let op = call.op("checkout", before.clone(), view_of(after, live));
                Ok((op, expect.iter().cloned().collect()))
            })
        },
    )?;
    log::debug!(
        "checkout {spec}: sync+save+graft+commit, {n} invalidations, total {:?}",
        t0.elapsed()
    );
    Ok(CheckedOut {
        checkpoint: CheckpointView::from(&c),
        detached: attach.is_none(),
        branch: attach,
        saved: Saved::of(&saved),
        op: op.seq,
        notes,
    })
}

/// The other live session that has branch `b` checked out, if any.
pub(crate) fn held_elsewhere<H: Host>(h: &H, t: &Target, b: &str) -> Option<String> {
    h.live()
        .into_iter()
        .find(|o| {
            o.session.name() != t.session.name() && o.session.record().branch.as_deref() == Some(b)
        })
        .map(|o| o.session.name().to_string())
}
