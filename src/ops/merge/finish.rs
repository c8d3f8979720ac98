//! `--continue` and `--abort` of a merge, cherry-pick or rebase stopped on
//! conflicts (`SessionRecord::merging`, typed by `merge::stop`).
//!
//! `--continue` checks the conflicts are resolved — no conflict markers left in
//! a file that had them, no `PATH~theirs` left beside a path — and then takes the
//! checkpoint the clean landing would have taken (a merge's with two parents; a
//! rebase also records its new baseline), in one batch with the end of the
//! stopped state. Unresolved, it answers `merge_conflict` with what is left and
//! changes nothing; a stored conflict that does not decode is `Error::Corrupt`
//! (never skipped: `--continue` would pass with it left). `--abort` grafts back
//! the workspace as it was before (the conflicted state is saved first, like any
//! pending changes); it reads no conflict, so it is the way out of a stop whose
//! conflicts are damaged.

use super::{MergeAnswer, Status, next_words};
use crate::error::{Error, Result};
use crate::merge::{Conflict, Stop, stop, text};
use crate::ops::record::{Call, view_of};
use crate::ops::txn::{self, Log};
use crate::ops::views::Saved;
use crate::ops::{Target, save_and_graft, syncfs, working_root};
use crate::session::Merging;
use crate::store::ObjectStore;

/// The stopped state as stored (its conflicts undecoded), checked to be of `op`.
fn stopped(t: &Target, op: &str) -> Result<Merging> {
    let Some(m) = t.session.record().merging else {
        return Err(Error::Invalid(format!(
            "session {}: no {op} is stopped on conflicts",
            t.session.name()
        )));
    };
    if m.op != op {
        return Err(Error::Invalid(format!(
            "session {}: the stopped operation is a {} of {}: use `treefork {} --continue` or `--abort`",
            t.session.name(),
            m.op,
            m.theirs,
            m.op
        )));
    }
    Ok(m)
}

/// The stopped state of `op`, its conflicts decoded (`Error::Corrupt` if one
/// does not).
fn stopped_typed(t: &Target, op: &str) -> Result<Stop> {
    stop::decode(t.session.name(), &stopped(t, op)?)
}

/// The conflicts not resolved yet in the tree `root`.
fn unresolved(
    store: &dyn ObjectStore,
    root: crate::id::NodeId,
    all: &[Conflict],
) -> Result<Vec<Conflict>> {
    let tree = crate::diff::Tree::load(store, root)?;
    let mut left = Vec::new();
    for c in all {
        if let Some(at) = &c.theirs_at
            && tree.lookup(store, at.as_bytes())?.is_some()
        {
            let mut c = c.clone();
            c.detail = format!(
                "{at} is still there: keep what you want at {} and delete it",
                c.path
            );
            left.push(c);
            continue;
        }
        if !c.kind.has_markers() {
            continue;
        }
        let Some(r) = tree.lookup(store, c.path.as_bytes())? else {
            continue;
        };
        if r.kind == crate::tree::Kind::File
            && text::has_markers(&crate::diff::read_file(store, &r, crate::merge::TEXT_MAX)?)
        {
            let mut c = c.clone();
            c.detail = "conflict markers are still in the file".into();
            left.push(c);
        }
    }
    Ok(left)
}

/// `--continue`.
pub(crate) fn cont(t: &Target, call: &Call, op: &str) -> Result<MergeAnswer> {
    let m = stopped_typed(t, op)?;
    let store = t.session.store().clone();
    let root = working_root(t)?;
    let mut out = MergeAnswer::new(op, Status::MergeConflict, &m.theirs, None);
    out.conflicts = unresolved(&*store, root, &m.conflicts)?;
    if !out.conflicts.is_empty() {
        out.next = Some(next_words(op, &out.conflicts));
        return Ok(out);
    }
    syncfs(&t.mount)?;
    let txn = txn::Transaction::begin(t, op);
    let mut tx = t.session.txn();
    let before_root = tx.flush()?;
    let before = view_of(tx.before(), before_root);
    let more: Vec<_> = match (op, m.parents.is_empty()) {
        ("merge", false) => m.parents.clone(),
        ("merge", true) => m.theirs_id.into_iter().collect(),
        _ => Vec::new(),
    };
    let mut meta = serde_json::Map::new();
    if let Some(id) = m.theirs_id {
        let key = if op == "cherry-pick" {
            "cherry_pick"
        } else {
            "merged"
        };
        meta.insert(key.into(), id.to_hex().into());
    }
    let c = tx.checkpoint_with(&m.message, op, &more, meta)?;
    tx.edit(&mut |rec| rec.merging = None);
    let rec = txn.commit(&mut tx, Log::Next, &mut |_, after| {
        let extra = match &m.onto {
            Some(_) => super::baseline::ops(t, &m)?,
            None => Vec::new(),
        };
        let mut o = call.op(
            &format!("{op}-continue"),
            before.clone(),
            view_of(after, before_root),
        );
        o.meta.insert("theirs".into(), m.theirs.clone().into());
        if let Some(id) = m.theirs_id {
            o.meta.insert("theirs_id".into(), id.to_hex().into());
        }
        let exec = crate::refs::exec_ref(&m.theirs);
        if let Some(n) = exec.filter(|_| op == "revert") {
            o.meta.insert("reverts_exec".into(), n.into());
        }
        Ok((o, extra))
    })?;
    out.status = Status::Merged;
    out.checkpoint = Some(c.id.to_hex());
    out.record = Some(rec.seq);
    Ok(out)
}

/// `--abort`.
pub(crate) fn abort(t: &Target, call: &Call, op: &str) -> Result<MergeAnswer> {
    let m = stopped(t, op)?;
    let store = t.session.store().clone();
    let now = working_root(t)?;
    let changes = crate::diff::diff_roots(&*store, now, m.before_root)?
        .iter()
        .map(crate::ops::views::PathChange::from)
        .collect();
    let txn = txn::Transaction::begin(t, op);
    let (saved, _, rec) = save_and_graft(
        t,
        &format!("before-{op}-abort"),
        &format!("{op} --abort"),
        m.before_root,
        None,
        &mut |tx, before_root, after_root| {
            let before = view_of(tx.before(), before_root);
            tx.edit(&mut |rec| rec.merging = None);
            txn.commit(tx, Log::Next, &mut |_, after| {
                let mut o = call.op(
                    &format!("{op}-abort"),
                    before.clone(),
                    view_of(after, after_root),
                );
                o.meta.insert("theirs".into(), m.theirs.clone().into());
                if let Some(id) = m.theirs_id {
                    o.meta.insert("theirs_id".into(), id.to_hex().into());
                }
                Ok((o, Vec::new()))
            })
        },
    )?;
    let mut out = MergeAnswer::new(op, Status::Aborted, &m.theirs, None);
    out.changes = changes;
    out.saved = Saved::of(&saved);
    out.record = Some(rec.seq);
    Ok(out)
}
