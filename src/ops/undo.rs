//! `undo`, `redo`, `op_restore`: move a session back or forward along its
//! operation log. Each appends an operation and deletes nothing; each saves
//! pending changes first (the `before` view holds them), so it can be undone too.
//!
//! - `undo` reverts what the newest not-undone operation T changed: every part of
//!   T's view (HEAD and its attachment, each branch T touched, the workspace) that
//!   differs between T's `before` and `after` goes back to its `before` value;
//!   parts T did not change stay as they are now.
//! - `redo` reverts the newest undo U the same way (back to U's `before`, which
//!   held the pending changes of that moment).
//! - `op restore N` returns to the whole view after operation N: HEAD, the
//!   branches N touched, and the workspace.
//!
//! Branches move by compare-and-swap: a branch is moved only while it still holds
//! the value the reverted operation left (for `op restore`, the value the
//! session's newest operation touching it left) and no other live session has it
//! checked out; otherwise the whole request is refused with `conflict`, naming the
//! branch and both values, before anything changes (an `Expect` on each branch in
//! the commit batch closes the race with a mover in between).
//!
//! `what` limits any of them to `files` (the workspace) or `refs` (HEAD and
//! branches). `if_last` makes the request conditional on the log's newest
//! operation, so of two clients undoing at once exactly one wins (the op lock
//! serializes them; the second sees a newer last operation and gets `conflict`).
//!
//! All three answer [`Moved`].

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::oplog_list::{stacks, summary};
use super::record::{Call, view_of};
use super::txn::{self, Log};
use super::views::Saved;
use super::{Host, Target, save_and_graft, syncfs};
use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::meta::{self, MetaOp};
use crate::oplog::{self, NewOp, Operation, View, walk};
use crate::ops::oplog_words as words;
use crate::refs;
use crate::session::Txn;
use crate::session::snapshot::StateChange;
use crate::tree::Timespec;

use crate::messages::conversation::{self, Hidden};

/// The op setting the conversation's hidden ranges to the goal's (stored with the
/// operation record, which keeps the ranges before and after in its meta), if the
/// goal sets them and they differ from the current ones.
fn conversation_change(
    store: &dyn crate::store::ObjectStore,
    session: &str,
    goal: &Goal,
    nop: &mut NewOp,
) -> Result<Vec<MetaOp>> {
    let Some(want) = &goal.conversation else {
        return Ok(Vec::new());
    };
    let now = conversation::hidden(store, session)?;
    if &now == want {
        return Ok(Vec::new());
    }
    nop.meta
        .insert("conversation".into(), conversation::op_meta(&now, want));
    Ok(vec![conversation::put_op(session, want)])
}

/// Which parts of a view to move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    All,
    Files,
    Refs,
}

fn what_of(w: Option<&str>) -> Result<What> {
    match w {
        None | Some("all") => Ok(What::All),
        Some("files") => Ok(What::Files),
        Some("refs") => Ok(What::Refs),
        Some(o) => Err(Error::Invalid(format!(
            "--what {o:?}: expected files or refs"
        ))),
    }
}

/// The parts of a view to set.
#[derive(Debug, Default)]
struct Goal {
    /// HEAD and its branch.
    head: Option<(Option<CheckpointId>, Option<String>)>,
    /// Branches to set (`None`: delete).
    branches: BranchValues,
    /// Workspace root.
    workspace: Option<NodeId>,
    /// The conversation's hidden ranges (`crate::messages::conversation`), when
    /// the operation changed them (a rewind, or an undo of one).
    conversation: Option<Hidden>,
    /// What each branch to move must still hold: the value the operation being
    /// reverted (or, for `op restore`, the session's newest operation touching
    /// it) left. A branch found elsewhere was moved by someone else since.
    expect: BranchValues,
}

impl Goal {
    /// What reverting a change `from` → ... back to `to` sets: the parts that differ.
    fn revert(from: &View, to: &View) -> Goal {
        let mut g = Goal::default();
        if from.head != to.head || from.branch != to.branch {
            g.head = Some((to.head, to.branch.clone()));
        }
        for b in from.branches.keys().chain(to.branches.keys()) {
            let (f, t) = (
                from.branches.get(b).cloned().flatten(),
                to.branches.get(b).cloned().flatten(),
            );
            if f != t {
                g.branches.insert(b.clone(), t);
                g.expect.insert(b.clone(), f);
            }
        }
        if from.workspace != to.workspace {
            g.workspace = Some(to.workspace);
        }
        g
    }

    /// The whole view `v`.
    fn whole(v: &View) -> Goal {
        Goal {
            head: Some((v.head, v.branch.clone())),
            branches: v.branches.clone(),
            workspace: Some(v.workspace),
            conversation: None,
            expect: BTreeMap::new(),
        }
    }

    fn limit(mut self, w: What) -> Goal {
        match w {
            What::All => {}
            What::Files => {
                self.head = None;
                self.branches.clear();
                self.conversation = None;
            }
            What::Refs => {
                self.workspace = None;
                self.conversation = None;
            }
        }
        self
    }

    fn is_empty(&self) -> bool {
        self.head.is_none() && self.branches.is_empty() && self.workspace.is_none()
    }
}

fn check_last(last: &Option<Operation>, if_last: Option<u64>) -> Result<()> {
    match (if_last, last) {
        (Some(want), Some(l)) if l.seq != want => Err(Error::Conflict(format!(
            "the session's newest operation is {} ({}), not {want}: another client acted meanwhile; look at `treefork op log` and retry",
            l.seq,
            summary(l)
        ))),
        (Some(want), None) => Err(Error::Conflict(format!(
            "operation {want} is not in the session's log"
        ))),
        _ => Ok(()),
    }
}

/// The answer to `undo`, `redo` and `op_restore`: the operation appended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Moved {
    /// The operation recorded (its number in the session's log).
    pub op: u64,
    /// The operation it reverted (undo, redo) or returned to (op restore).
    pub of: u64,
    /// One line saying what it did.
    pub summary: String,
    /// HEAD after it (hex); `null` before the session's first checkpoint.
    pub head: Option<String>,
    /// The branch HEAD is attached to after it; `null` when detached.
    pub branch: Option<String>,
    /// Pending changes saved first; `null` when there were none (or the
    /// workspace did not move).
    pub saved: Option<Saved>,
    /// Things to know, for people (e.g. a branch not re-attached).
    pub notes: Vec<String>,
}

/// Which way along the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// Revert the newest done operation.
    Undo,
    /// Revert the newest undo.
    Redo,
}

/// `undo` or `redo`: revert what the target operation changed (see the module docs).
pub(crate) fn step<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    way: Way,
    what: Option<String>,
    if_last: Option<u64>,
) -> Result<Moved> {
    let what = what_of(what.as_deref())?;
    let (st, last) = stacks(t)?;
    check_last(&last, if_last)?;
    let (target, kind, nothing) = match way {
        Way::Undo => (
            st.undo_target(),
            "undo",
            "no operation left that is not undone",
        ),
        Way::Redo => (st.redo_target(), "redo", "no undo since the last operation"),
    };
    let seq = target.ok_or_else(|| {
        Error::NotFound(format!(
            "nothing to {kind} in session {}: {nothing}",
            t.session.name()
        ))
    })?;
    let op = oplog::get(&**t.session.store(), t.session.name(), seq)?;
    let mut goal = Goal::revert(&op.after, &op.before);
    goal.conversation = conversation::of_op(&op.meta, "before");
    let goal = goal.limit(what);
    let mut fill = |n: &mut NewOp| match way {
        Way::Undo => n.undoes = Some(seq),
        Way::Redo => n.redoes = Some(seq),
    };
    let log = Log::Unchanged(last.as_ref().map(|o| o.seq));
    apply(h, t, call, kind, goal, &mut fill, &op, log)
}

pub(crate) fn restore<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    seq: u64,
    what: Option<String>,
) -> Result<Moved> {
    let what = what_of(what.as_deref())?;
    let store = t.session.store();
    let log = Log::Unchanged(oplog::last(&**store, t.session.name())?.map(|o| o.seq));
    let op = oplog::get(&**store, t.session.name(), seq)?;
    let mut goal = Goal::whole(&op.after);
    goal.conversation = conversation::of_op(&op.meta, "after");
    let mut goal = goal.limit(what);
    goal.expect = left_by_session(&**store, t.session.name(), &goal.branches)?;
    apply(
        h,
        t,
        call,
        "op-restore",
        goal,
        &mut |n| {
            n.meta.insert("op".into(), json!(seq));
        },
        &op,
        log,
    )
}

/// Branch values by name (`None`: absent).
type BranchValues = BTreeMap<String, Option<CheckpointId>>;

/// For each of `branches`, the value the session's newest operation touching it
/// left (searching at most `walk::SCAN_LIMIT` records; a branch not found there
/// is expected absent, so an `op restore` never moves a branch the session has
/// not set lately).
fn left_by_session(
    store: &dyn crate::store::ObjectStore,
    session: &str,
    branches: &BranchValues,
) -> Result<BranchValues> {
    let mut left = BTreeMap::new();
    if branches.is_empty() {
        return Ok(left);
    }
    walk::back(store, session, None, walk::SCAN_LIMIT, &mut |o| {
        for (b, v) in &o.after.branches {
            if branches.contains_key(b) && !left.contains_key(b) {
                left.insert(b.clone(), *v);
            }
        }
        Ok(left.len() < branches.len())
    })?;
    for b in branches.keys() {
        left.entry(b.clone()).or_insert(None);
    }
    Ok(left)
}

/// Refuse (`conflict`) to move a branch that no longer holds the value the
/// reverted operation left (someone moved it since), or that another live
/// session has checked out. Checked before anything changes; returns the values
/// checked, which [`branch_ops`] requires again in the commit batch (`Expect`), so
/// a mover in between fails the batch instead of being overwritten.
fn check_branches<H: Host>(
    h: &H,
    t: &Target,
    kind: &str,
    goal: &Goal,
    of: &Operation,
) -> Result<BranchValues> {
    let mut seen = BTreeMap::new();
    let store = t.session.store();
    let short = |v: &Option<CheckpointId>| v.map_or_else(|| "(absent)".into(), |h| h.short());
    for (b, want) in &goal.branches {
        let cur = refs::get_ref(&**store, b)?.map(|r| r.checkpoint);
        seen.insert(b.clone(), cur);
        if &cur == want {
            continue;
        }
        let full = b;
        // As the session writes it (a stored name never leaves the daemon).
        let b = &refs::names::display(b, Some(t.session.name()));
        if let Some(left) = goal.expect.get(full)
            && left != &cur
        {
            return Err(Error::Conflict(format!(
                "{} of operation {}: branch {b} is at {}, not at {} where this session left \
                 it; someone else moved it since, so nothing was changed (see `treefork log {b}`)",
                kind,
                of.seq,
                short(&cur),
                short(left)
            )));
        }
        if let Some(other) = super::checkout::held_elsewhere(h, t, full) {
            return Err(Error::Conflict(format!(
                "{kind} of operation {}: branch {b} is checked out in session {other}, \
                 so it is not moved under it",
                of.seq
            )));
        }
    }
    Ok(seen)
}

/// The ops setting the goal's branches, each guarded by its current value, which
/// must still be the value [`check_branches`] checked (`conflict` otherwise); and
/// the values they had (for the record).
fn branch_ops(
    store: &dyn crate::store::ObjectStore,
    goal: &Goal,
    checked: &BranchValues,
) -> Result<(Vec<MetaOp>, BranchValues)> {
    let mut ops = Vec::new();
    let mut was = BTreeMap::new();
    for (b, v) in &goal.branches {
        let key = meta::ref_key(b);
        let raw = store.meta_get(&key)?;
        let cur = raw
            .as_deref()
            .map(|r| refs::RefRecord::decode(b, r))
            .transpose()?;
        let now = cur.as_ref().map(|r| r.checkpoint);
        if checked.get(b) != Some(&now) {
            let b = refs::names::display(b, None);
            return Err(Error::Conflict(format!(
                "branch {b} moved while this request ran; it was left alone (look at \
                 `treefork log {b}` and retry)"
            )));
        }
        was.insert(b.clone(), now);
        ops.push(MetaOp::Expect(key, raw));
        ops.push(match v {
            Some(c) => refs::ref_op(
                b,
                &refs::RefRecord {
                    checkpoint: *c,
                    created: cur.map_or(Timespec::now().sec, |r| r.created),
                },
            ),
            None => refs::delete_ref_op(b),
        });
    }
    Ok((ops, was))
}

/// HEAD, its branch and the base the goal leaves the session with. A branch to
/// attach that does not name the goal's HEAD (once the goal's branches are set),
/// or that another live session has checked out (as `checkout` would not attach
/// it), leaves HEAD detached.
fn head_change<H: Host>(
    host: &H,
    t: &Target,
    goal: &Goal,
    root: Option<NodeId>,
    notes: &mut Vec<String>,
) -> Result<StateChange> {
    let s = &t.session;
    let rec = s.record();
    let store = s.store();
    let (head, mut branch) = goal.head.clone().unwrap_or((rec.head, rec.branch.clone()));
    if let (Some(b), Some(h)) = (&branch, &head) {
        let names = match goal.branches.get(b) {
            Some(v) => *v,
            None => refs::get_ref(&**store, b)?.map(|r| r.checkpoint),
        };
        if names.as_ref() != Some(h) {
            notes.push(format!(
                "branch {} no longer names {}: HEAD is detached",
                refs::names::display(b, Some(s.name())),
                h.short()
            ));
            branch = None;
        } else if let Some(other) = super::checkout::held_elsewhere(host, t, b) {
            notes.push(format!(
                "branch {} is checked out in session {other}: HEAD is detached at {}",
                refs::names::display(b, Some(s.name())),
                h.short()
            ));
            branch = None;
        }
    }
    let base = match head {
        Some(id) if goal.head.is_some() => refs::load(&**store, &id)?.root,
        _ => s.base_root(),
    };
    Ok(StateChange {
        head,
        branch,
        base,
        root,
    })
}

#[allow(clippy::too_many_arguments)]
fn apply<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    kind: &str,
    goal: Goal,
    fill: &mut dyn FnMut(&mut NewOp),
    of: &Operation,
    log: Log,
) -> Result<Moved> {
    let checked = check_branches(h, t, kind, &goal, of)?;
    let s = &t.session;
    let store = s.store().clone();
    let mut notes = Vec::new();
    let target_root = goal.workspace;
    let txn = txn::Transaction::begin(t, kind);
    // The state change, the branch moves (each guarded by the value checked), the
    // conversation's ranges and the record: one batch, committed under the gate
    // right after the swap when the workspace moves.
    // `live`: the workspace after the graft (the target's tree under the live
    // inode counter), when the op moves the workspace.
    let mut commit =
        |tx: &mut Txn<'_>, before_root: NodeId, live: Option<NodeId>, notes: &mut Vec<String>| {
            let before = view_of(tx.before(), before_root);
            if !goal.is_empty() {
                tx.set_state(head_change(h, t, &goal, live, notes)?);
            }
            let ws = live.unwrap_or(before_root);
            txn.commit(tx, log, &mut |_, rec| {
                let (mut ops, was) = branch_ops(&*store, &goal, &checked)?;
                let mut before = before.clone();
                let mut after = View {
                    head: rec.head,
                    branch: rec.branch.clone(),
                    workspace: ws,
                    branches: BTreeMap::new(),
                };
                for (b, v) in was {
                    before.branches.insert(b.clone(), v);
                    after
                        .branches
                        .insert(b.clone(), goal.branches.get(&b).cloned().flatten());
                }
                let mut nop = call.op(kind, before, after);
                fill(&mut nop);
                if nop.undoes.is_some() || nop.redoes.is_some() {
                    // What was reverted, so its row says so in words.
                    nop.meta
                        .insert(words::TARGET_KEY.into(), words::target_of(of));
                }
                ops.extend(conversation_change(&*store, s.name(), &goal, &mut nop)?);
                Ok((nop, ops))
            })
        };
    let (rec_op, saved) = if let Some(root) = target_root {
        let (sv, _, op) = save_and_graft(
            t,
            &format!("before-{kind}"),
            &format!("{kind} of operation {}", of.seq),
            root,
            None,
            &mut |tx, before_root, live| commit(tx, before_root, Some(live), &mut notes),
        )?;
        (op, sv)
    } else {
        syncfs(&t.mount)?;
        let mut tx = s.txn();
        let root = tx.flush()?;
        (commit(&mut tx, root, None, &mut notes)?, None)
    };
    Ok(Moved {
        op: rec_op.seq,
        of: of.seq,
        summary: summary(&rec_op),
        head: rec_op.after.head.map(|h| h.to_hex()),
        branch: rec_op
            .after
            .branch
            .as_deref()
            .map(|b| refs::names::display(b, Some(s.name()))),
        saved: Saved::of(&saved),
        notes,
    })
}
