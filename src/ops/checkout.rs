//! `checkout`: make the live mount show a ref's tree, saving pending changes first.
//! A branch name attaches HEAD to that branch (new checkpoints move it); any other
//! ref detaches HEAD. A branch another live session has checked out is not
//! attached (its checkpoints would move the branch under that session, as git
//! refuses a branch checked out in another worktree): HEAD is detached at it, and
//! the answer's `notes` say so. `checkout -b NAME [REF]` creates the branch and
//! checks it out in the same batch: without REF it is `branch NAME` with HEAD
//! attached (pending changes become its checkpoint; the workspace stays), with REF
//! the branch record joins the checkout's batch. Recorded as one operation (kind
//! `checkout`, naming the new branch) in the batch that moves HEAD (`super::txn`):
//! the branch attached to must still name the checkpoint at commit.

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
    let spec = match (spec, create) {
        // `checkout -b NAME`: the branch at HEAD (checkpointing pending changes
        // first, as `branch NAME` does), attached; the workspace stays.
        (None, Some(name)) => {
            let (c, op) = branch::make(h, t, call, name, None, true)?;
            // (`make` stores it in this session's namespace.)
            return Ok(CheckedOut {
                checkpoint: CheckpointView::from(&c),
                branch: Some(name.to_string()),
                detached: false,
                saved: None,
                op: op.seq,
                notes: Vec::new(),
            });
        }
        (Some(spec), _) => spec,
        (None, None) => return Err(Error::Invalid("checkout needs a ref".into())),
    };
    let txn = txn::Transaction::begin(t, "checkout");
    let s = &t.session;
    let store = s.store().clone();
    // `-b NAME` makes the session's own branch NAME (stored `SESSION:NAME`).
    let create_full = create.map(|n| refs::names::owned(s.name(), n));
    if let Some(name) = create {
        refs::validate_ref_name(name)?;
        refs::names::refuse_taken(&*store, s.name(), name, None)?;
    }
    let c = super::refctx::resolve(t, spec)?;
    // Attach only to a branch the caller sees (a hidden branch named like an id
    // prefix it resolved is not the caller's to move); `-b NAME` attaches to the
    // branch it creates.
    let mut attach = match &create_full {
        Some(full) => Some(full.clone()),
        None => super::refctx::find_branch(t, spec)?
            .filter(|(_, r)| r.checkpoint == c.id)
            .map(|(full, _)| full),
    };
    let mut notes = Vec::new();
    // Another session's branch is its own to move (as git does not check out a
    // branch of another worktree): HEAD is detached at it.
    if let Some(b) = &attach
        && let (Some(owner), short) = refs::names::split(b)
        && owner != s.name()
    {
        notes.push(format!(
            "branch {short} is session {owner}'s: HEAD is detached at {} \
             (`treefork checkout -b NAME` starts a branch of your own here)",
            c.id.short()
        ));
        attach = None;
    }
    if create.is_none()
        && let Some(b) = &attach
        && let Some(other) = held_elsewhere(h, t, b)
    {
        notes.push(format!(
            "branch {} is checked out in session {other}: HEAD is detached at {} \
             (`treefork checkout -b NAME` starts a branch of your own here)",
            refs::names::display(b, Some(s.name())),
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
    // `-b NAME`: the new branch's record and its grant to this session, in the
    // batch (the expectation above is that it does not exist).
    let created = create_full.as_deref().map(|name| {
        let r = refs::RefRecord {
            checkpoint: c.id,
            created: crate::tree::Timespec::now().sec,
        };
        [
            refs::ref_op(name, &r),
            crate::visibility::grant_op(s.name(), name, r.created, "created"),
        ]
    });
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
            let mut before = view_of(tx.before(), before_root);
            if let Some(name) = &create_full {
                super::record::touch(&mut before, &*store, name)?;
            }
            tx.set_state(StateChange {
                head: Some(c.id),
                branch: attach.clone(),
                base: root,
                root: Some(live),
            });
            // A branch name is checked and written under the name lock.
            let _names = match create {
                Some(name) => {
                    let g = h.name_lock();
                    refs::names::refuse_taken(&*store, s.name(), name, None)?;
                    Some(g)
                }
                None => None,
            };
            txn.commit(tx, Log::Next, &mut |_, after| {
                let mut after = view_of(after, live);
                if let Some(name) = &create_full {
                    after.branches.insert(name.clone(), Some(c.id));
                }
                let op = call.op("checkout", before.clone(), after);
                let mut ops: Vec<MetaOp> = expect.iter().cloned().collect();
                ops.extend(created.iter().flatten().cloned());
                Ok((op, ops))
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
        branch: attach.map(|b| refs::names::display(&b, Some(s.name()))),
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
