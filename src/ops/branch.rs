//! `branch`, `branches`, `branch_delete`, `branch_rename`: named refs to
//! checkpoints.
//!
//! Branch names are the session's own (`refs::names`): a branch made in session S
//! is stored as `S:NAME`; answers name branches as the asking session writes
//! them (`NAME`, `OTHER/NAME`, or a store-wide legacy name).
//!
//! Creating a branch is atomic store-wide: the name is checked and written under
//! the host's name lock, so of two concurrent creations of one name exactly one
//! wins and the other gets `conflict` (never a silent overwrite). A rename moves
//! the record in one batch guarded by [`MetaOp::Expect`] on both names, and every
//! session attached to the old name follows it in that batch, live or stored
//! ([`rename`](mod@rename), which says how it takes the live followers' locks
//! without deadlock). Each is recorded as an operation of the session it was
//! aimed at, in the batch that moves the ref (`super::txn`).
//!
//! A branch created in a session is given to it (a grant, written in the same
//! batch: see `crate::visibility`), so that session's agent sees it; `share` gives
//! an existing branch to a session (the user's). On an agent socket `branches`
//! lists only what the agent sees.
//!
//! The answers: [`Made`], [`Listed`], [`Shared`], [`Deleted`], [`Renamed`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::record::{Call, touch, view_of};
use super::txn::{self, Log};
use super::{Host, Target, syncfs};
use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::oplog::View;
use crate::refs;
use crate::store::ObjectStore;
use crate::tree::Timespec;
use crate::visibility::AgentView;

mod rename;
#[cfg(test)]
mod tests;

pub(crate) use rename::rename;

/// The answer to `branch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Made {
    /// The branch created.
    pub branch: String,
    /// The checkpoint it names (hex).
    pub checkpoint: String,
    /// The operation recorded (its number in the session's log).
    pub op: u64,
}

/// The answer to `branches`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Listed {
    /// The branches asked for (on an agent socket: only those the agent sees),
    /// by name as the asking session writes them.
    pub branches: Vec<Listing>,
}

/// One branch of [`Listed`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Listing {
    /// Branch name.
    pub name: String,
    /// The checkpoint it names (hex).
    pub checkpoint: String,
    /// When the branch was created (unix s).
    pub created: i64,
    /// The checkpoint's message; `null` when its record cannot be read.
    pub message: Option<String>,
    /// The session the checkpoint was taken in; `null` when its record cannot
    /// be read.
    pub session: Option<String>,
    /// Whether the asking session's HEAD is attached to it (always false when
    /// no session asked).
    #[serde(default)]
    pub current: bool,
    /// The session whose branch it is; `null` for a store-wide branch (made
    /// before branches were per session).
    #[serde(default)]
    pub owner: Option<String>,
}

/// The answer to `branch_share`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Shared {
    /// The branch.
    pub branch: String,
    /// The session whose agent now sees it.
    pub shared_with: String,
}

/// The answer to `branch_delete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Deleted {
    /// The branch deleted.
    pub deleted: String,
    /// The operation recorded; `null` when no live session was asked (the ref
    /// alone was deleted, recorded in no log).
    pub op: Option<u64>,
}

/// The answer to `branch_rename`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Renamed {
    /// The old name.
    pub renamed: String,
    /// The new name.
    pub to: String,
    /// The checkpoint the branch names (hex).
    pub checkpoint: String,
    /// The operation recorded (its number in the session's log).
    pub op: u64,
}

pub(crate) fn create<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    name: &str,
    from: Option<&str>,
) -> Result<Made> {
    let (c, op) = make(h, t, call, name, from, false)?;
    Ok(Made {
        branch: name.to_string(),
        checkpoint: c.id.to_hex(),
        op: op.seq,
    })
}

/// [`create`], and with `attach` (`checkout -b NAME`, recorded as a `checkout`)
/// HEAD attached to the new branch in the same batch: the new checkpoint and the
/// operation record.
pub(crate) fn make<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    name: &str,
    from: Option<&str>,
    attach: bool,
) -> Result<(crate::refs::Checkpoint, crate::oplog::Operation)> {
    refs::validate_ref_name(name)?;
    let store = h.store();
    let short = name;
    refs::names::refuse_taken(&*store, t.session.name(), short, None)?;
    let full = refs::names::owned(t.session.name(), short);
    let name = &full[..];
    let from = from
        .map(|spec| super::refctx::resolve(t, spec))
        .transpose()?;
    let kind = if attach { "checkout" } else { "branch" };
    let txn = txn::Transaction::begin(t, kind);
    syncfs(&t.mount)?;
    let s = &t.session;
    let mut tx = s.txn();
    let root = tx.flush()?;
    let mut before = view_of(tx.before(), root);
    touch(&mut before, &*store, name)?;
    if let Some(b) = before.branch.clone() {
        touch(&mut before, &*store, &b)?;
    }
    // Without `from`: HEAD, checkpointing the live state first (in the batch)
    // when it has changes or the session has no checkpoint yet.
    let mut fresh = false;
    let c = match from {
        Some(c) => c,
        None if tx.record().head.is_none() || tx.has_changes()? => {
            fresh = true;
            tx.checkpoint(&format!("branch {short}"), "manual")?
        }
        None => super::refctx::resolve(t, "HEAD")?,
    };
    // The branch the fresh checkpoint moved (HEAD's, unless it had moved away).
    let advanced = if fresh {
        tx.record().branch.clone()
    } else {
        None
    };
    if attach {
        tx.edit(&mut |r| {
            r.branch = Some(name.to_string());
            r.branch_moved = None;
        });
    }
    let r = refs::RefRecord {
        checkpoint: c.id,
        created: Timespec::now().sec,
    };
    {
        let _names = h.name_lock();
        refs::names::refuse_taken(&*store, s.name(), short, None)?;
        txn.commit(&mut tx, Log::Next, &mut |_, rec| {
            let mut after = View {
                head: rec.head,
                branch: rec.branch.clone(),
                workspace: before.workspace,
                branches: before.branches.clone(),
            };
            after.branches.insert(name.to_string(), Some(c.id));
            if let Some(b) = &advanced {
                after.branches.insert(b.clone(), Some(c.id));
            }
            let ops = vec![
                MetaOp::Expect(meta::ref_key(name), None),
                refs::ref_op(name, &r),
                crate::visibility::grant_op(s.name(), name, r.created, "created"),
            ];
            Ok((call.op(kind, before.clone(), after), ops))
        })
    }
    .map(|op| (c, op))
}

/// Which branches `branches` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Which {
    /// Every session's (and the store-wide ones), not only the asking session's.
    pub all: bool,
    /// Also the automatic `auto/...` refs (saves before checkout, restore, undo...).
    pub auto: bool,
}

/// The asking session's branches and the store-wide ones (`which.all`: every
/// session's), or with `view` (an agent socket) only those it sees; `auto/...`
/// refs only with `which.auto`. Names are as `asking` writes them (with `all`,
/// the asking session's own too are qualified: `SESSION/BRANCH`); the one its
/// HEAD is attached to is marked `current`.
pub(crate) fn list(
    store: &dyn ObjectStore,
    view: Option<&AgentView<'_>>,
    asking: Option<&str>,
    which: Which,
) -> Result<Listed> {
    let current = match asking {
        Some(s) => refs::session_record::load_record(store, s)?.and_then(|r| r.branch),
        None => None,
    };
    let mut all = refs::list_refs(store)?;
    if let Some(v) = view {
        let seen = v.branches()?;
        all.retain(|(n, _)| seen.contains(n));
    }
    let mut list = Vec::new();
    for (full, r) in all {
        let (owner, short) = refs::names::split(&full);
        let mine = owner.is_none() || owner == asking || asking.is_none();
        if !(which.all || mine) || (!which.auto && short.starts_with("auto/")) {
            continue;
        }
        // As the asking session writes it (its own `BRANCH`, another's
        // `SESSION/BRANCH`); `owner` says whose it is.
        let shown = refs::names::display(&full, asking);
        let c = refs::load(store, &r.checkpoint).ok();
        list.push(Listing {
            checkpoint: r.checkpoint.to_hex(),
            created: r.created,
            message: c.as_ref().map(|c| c.message.clone()),
            session: c.map(|c| c.session),
            current: current.as_deref() == Some(&full[..]),
            owner: owner.map(str::to_string),
            name: shown,
        });
    }
    list.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Listed { branches: list })
}

/// Give branch `name` (as session `asking` writes it, `SESSION/BRANCH` for
/// another's) to session `with` (`branch --share`).
pub(crate) fn share(
    store: &dyn ObjectStore,
    asking: Option<&str>,
    name: &str,
    with: &str,
) -> Result<Shared> {
    let (full, _) = refs::names::find_required(store, asking, name, &|_| Ok(true))?;
    crate::visibility::share(store, &full, with)?;
    Ok(Shared {
        branch: refs::names::display(&full, Some(with)),
        shared_with: with.to_string(),
    })
}

pub(crate) fn delete<H: Host>(
    h: &H,
    t: Option<&Target>,
    call: &Call,
    name: &str,
) -> Result<Deleted> {
    let store = h.store();
    let asking = t.map(|t| t.session.name());
    let shown = name;
    let Some(t) = t else {
        // No live session to record it in: the ref alone.
        let _names = h.name_lock();
        let (full, _) = refs::names::find_required(&*store, asking, name, &|_| Ok(true))?;
        let name = &full[..];
        let raw = branch_raw(&*store, name)?;
        store.commit(vec![
            MetaOp::Expect(meta::ref_key(name), Some(raw)),
            refs::delete_ref_op(name),
        ])?;
        return Ok(Deleted {
            deleted: shown.to_string(),
            op: None,
        });
    };
    let txn = txn::Transaction::begin(t, "branch-delete");
    syncfs(&t.mount)?;
    let mut tx = t.session.txn();
    let root = tx.flush()?;
    let mut before = view_of(tx.before(), root);
    let _names = h.name_lock();
    let (full, _) = super::refctx::find_branch(t, name)?
        .ok_or_else(|| Error::NotFound(format!("no branch named {name:?}")))?;
    let name = &full[..];
    let raw = branch_raw(&*store, name)?;
    let was = refs::RefRecord::decode(name, &raw)?.checkpoint;
    let mut after = before.clone();
    before.branches.insert(name.to_string(), Some(was));
    after.branches.insert(name.to_string(), None);
    let op = txn.commit(&mut tx, Log::Next, &mut |_, _| {
        let ops = vec![
            MetaOp::Expect(meta::ref_key(name), Some(raw.clone())),
            refs::delete_ref_op(name),
        ];
        Ok((call.op("branch-delete", before.clone(), after.clone()), ops))
    })?;
    Ok(Deleted {
        deleted: shown.to_string(),
        op: Some(op.seq),
    })
}

/// The stored record of branch `name` (`not_found` without one).
fn branch_raw(store: &dyn ObjectStore, name: &str) -> Result<Vec<u8>> {
    store
        .meta_get(&meta::ref_key(name))?
        .ok_or_else(|| Error::NotFound(format!("no branch named {name:?}")))
}
