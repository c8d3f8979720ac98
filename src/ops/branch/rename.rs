//! `branch_rename`: a branch's record moves to its new name, and every session
//! attached to the old name follows, in ONE batch (issue 41: a crash leaves the
//! rename and all its followers, or none of it).
//!
//! The batch: the ref moved (guarded by [`MetaOp::Expect`] on both names), the
//! renaming session's record (its own [`Txn`]), the record of every other session
//! attached to the old name — a stored (unmounted) one as read, a live one
//! through its own `Txn` joined to this batch ([`Txn::joining_ops`]) — each guarded
//! by its stored record, the stored record of every other live session (guard
//! only: one that attaches to the old name meanwhile makes the batch fail, and
//! the next attempt finds it a follower), the owner's grant of the new name and
//! the operation record. A session record that does not decode fails the rename
//! (`corrupt`, naming it): it may be attached to the old name, and no record
//! error is passed over.
//!
//! A live follower's flush lock is held from before its record is read until its
//! in-memory record names the new branch (after the commit), so no flush or op of
//! that session commits the record as it was in between (every write of a
//! session record is made under its flush lock, from the record read under it).
//!
//! Deadlock: an attempt takes, waiting, only what every op takes in the same
//! order — its own session's flush lock (its `Txn`), then the store-wide name
//! lock. Followers' flush locks are only *tried* ([`Session::try_txn`], in name
//! order), never waited for: one that is held ends the attempt, which lets go of
//! everything it took (followers, name lock, its own `Txn`, its flush given up)
//! and starts again after a randomized backoff, at most [`TRIES`] times, then
//! fails with `busy` naming the session. No holder of the name lock waits for a
//! flush lock (ref verbs, pull and `remote_add` commit under it without taking
//! one), so a wait for the name lock always ends; and a rename never waits while
//! holding another session's lock, so it adds no edge to any circle of waits
//! (two renames in sessions that follow each other's branches take turns).
//! Giving everything up between attempts is what makes them take turns: one that
//! kept its own `Txn` while retrying would keep failing the other's try.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use super::{Renamed, branch_raw};
use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::oplog::View;
use crate::ops::record::{Call, view_of};
use crate::ops::txn::{self, Log};
use crate::ops::{Host, Target, syncfs};
use crate::refs;
use crate::session::{SessionRecord, Txn};
use crate::store::ObjectStore;

/// Attempts before a rename whose live followers stay busy gives up.
pub(crate) const TRIES: u32 = 12;

/// How an attempt ended without committing.
enum Again {
    /// A live follower's flush lock was held (the session's name).
    Busy(String),
    /// Another live session's record moved between the read and the commit.
    Moved(String),
}

pub(crate) fn rename<H: Host>(
    h: &H,
    t: &Target,
    call: &Call,
    old: &str,
    new: &str,
) -> Result<Renamed> {
    refs::validate_ref_name(new)?;
    let txn = txn::Transaction::begin(t, "branch-rename");
    syncfs(&t.mount)?;
    let mut last = None;
    for attempt in 0..TRIES {
        if attempt > 0 {
            backoff(attempt);
        }
        match attempt_once(h, t, &txn, call, old, new)? {
            Ok(done) => return Ok(done),
            Err(again) => {
                let (Again::Busy(who) | Again::Moved(who)) = &again;
                ::log::debug!(
                    "branch rename {old} -> {new}: attempt {attempt} gave way to session {who}"
                );
                last = Some(again)
            }
        }
    }
    let why = match last {
        Some(Again::Busy(s)) => format!(
            "session {s} is attached to {old:?} and stayed busy (a flush, a mount or unmount, or another operation held it)"
        ),
        Some(Again::Moved(s)) => format!("session {s}'s record kept changing"),
        None => "no attempt was made".into(),
    };
    Err(Error::Busy(format!(
        "branch rename {old} -> {new}: {why} through {TRIES} attempts; nothing was changed, retry"
    )))
}

/// Sleep before attempt `n` (from 1): about 1 ms doubling to 64 ms, spread
/// by ±50% so that two renames that keep meeting stop meeting.
fn backoff(n: u32) {
    let base = 1u64 << n.min(6);
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let us = base * 500 + r % (base * 1000);
    std::thread::sleep(Duration::from_micros(us));
}

/// One attempt: `Ok(Err(_))` when it gave up to try again (nothing changed).
fn attempt_once<H: Host>(
    h: &H,
    t: &Target,
    txn: &txn::Transaction<'_>,
    call: &Call,
    old: &str,
    new: &str,
) -> Result<std::result::Result<Renamed, Again>> {
    let store = h.store();
    let (old_shown, new_shown) = (old, new);
    let s = &t.session;
    // Declared first, dropped last: the followers' batches borrow their sessions.
    let live: BTreeMap<String, Target> = h
        .live()
        .into_iter()
        .filter(|o| o.session.name() != s.name())
        .map(|o| (o.session.name().to_string(), o))
        .collect();
    let mut tx = s.txn();
    let root = tx.flush()?;
    let mut before = view_of(tx.before(), root);
    let _names = h.name_lock();
    // The new name is in the old one's owner's namespace; a store-wide
    // branch moves into this session's (its way into per-session names).
    let (old_full, _) = crate::ops::refctx::find_branch(t, old)?
        .ok_or_else(|| Error::NotFound(format!("no branch named {old:?}")))?;
    let owner = refs::names::split(&old_full)
        .0
        .unwrap_or(s.name())
        .to_string();
    refs::names::refuse_taken(&*store, &owner, new, Some(&old_full))?;
    let new_full = refs::names::owned(&owner, new);
    let (old, new) = (&old_full[..], &new_full[..]);
    let raw = branch_raw(&*store, old)?;
    let r = refs::RefRecord::decode(old, &raw)?;
    if tx.record().branch.as_deref() == Some(old) {
        tx.edit(&mut |rec| rec.branch = Some(new.to_string()));
    }
    let mut ops = vec![
        MetaOp::Expect(meta::ref_key(old), Some(raw)),
        MetaOp::Expect(meta::ref_key(new), None),
        refs::delete_ref_op(old),
        refs::ref_op(new, &r),
    ];
    let mut f = match followers(h, &*store, &live, s.name(), old, new)? {
        Ok(f) => f,
        Err(again) => return Ok(Err(again)),
    };
    ops.append(&mut f.ops);
    // The owner's agent keeps seeing it under its new name.
    ops.push(crate::visibility::grant_op(
        &owner, new, r.created, "created",
    ));
    before.branches.insert(old.to_string(), Some(r.checkpoint));
    before.branches.insert(new.to_string(), None);
    let committed = txn.commit(&mut tx, Log::Next, &mut |_, rec| {
        let mut after = View {
            head: rec.head,
            branch: rec.branch.clone(),
            workspace: before.workspace,
            branches: BTreeMap::new(),
        };
        after.branches.insert(old.to_string(), None);
        after.branches.insert(new.to_string(), Some(r.checkpoint));
        Ok((call.op("branch-rename", before.clone(), after), ops.clone()))
    });
    let op = match committed {
        Ok(op) => op,
        Err(e @ Error::Conflict(_)) => {
            // A guarded live session's record moved: try again (it may have
            // attached to `old`); any other refusal is the op's answer.
            for (name, key, was) in &f.guards {
                if store.meta_get(key)?.as_deref() != Some(&was[..]) {
                    ::log::debug!("branch rename {old} -> {new}: session {name} moved ({e})");
                    return Ok(Err(Again::Moved(name.clone())));
                }
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    // Committed: the live followers' in-memory records follow, their flush
    // locks still held (released as `f` drops).
    for ftx in &mut f.held {
        ftx.joined();
    }
    Ok(Ok(Renamed {
        renamed: old_shown.to_string(),
        to: new_shown.to_string(),
        checkpoint: r.checkpoint.to_hex(),
        op: op.seq,
    }))
}

/// What the other sessions add to the rename's batch.
struct Followers<'a, H: Host + 'a> {
    /// Their records' ops and guards.
    ops: Vec<MetaOp>,
    /// The live followers' batches (their flush locks), held until after the commit.
    held: Vec<Txn<'a>>,
    /// The stored followers' names, owned until after the commit: one being
    /// mounted or unmounted (not live, its record loaded or about to be
    /// written back by its last flush) is never rewritten under it.
    #[allow(dead_code)]
    claims: Vec<H::Claim<'a>>,
    /// The other live sessions' stored records as read: (name, key, value).
    guards: Vec<(String, Vec<u8>, Vec<u8>)>,
}

/// Every session record but `this` one's, in name order: the sessions attached
/// to `old` attached to `new`, each guarded by its record (a live one's through
/// its `Txn`, tried, never waited for); the other live sessions' guarded as read.
/// `Err(Busy)` when a live follower's flush lock is held or a stored follower's
/// name is owned (being mounted or unmounted); `corrupt` for a record that does
/// not decode.
fn followers<'a, H: Host>(
    h: &'a H,
    store: &dyn ObjectStore,
    live: &'a BTreeMap<String, Target>,
    this: &str,
    old: &str,
    new: &str,
) -> Result<std::result::Result<Followers<'a, H>, Again>> {
    let mut f = Followers {
        ops: Vec::new(),
        held: Vec::new(),
        claims: Vec::new(),
        guards: Vec::new(),
    };
    for (k, v) in store.meta_scan(meta::SESSION_PREFIX)? {
        let Some(name) = meta::session_name(&k) else {
            return Err(Error::corrupt(
                format!("session record {}", String::from_utf8_lossy(&k)),
                "its key is not UTF-8",
            ));
        };
        if name == this {
            continue;
        }
        // Whether it may be attached to `old` is in the record: one that does
        // not decode fails the rename rather than being left behind.
        let mut rec = SessionRecord::decode(name, &v)?;
        let attached = rec.branch.as_deref() == Some(old);
        match live.get(name) {
            Some(o) if attached => {
                let Some(mut ftx) = o.session.try_txn() else {
                    return Ok(Err(Again::Busy(name.to_string())));
                };
                // Under its flush lock its in-memory record is what it committed.
                if ftx.record().branch.as_deref() == Some(old) {
                    ftx.edit(&mut |r| r.branch = Some(new.to_string()));
                    f.ops.extend(ftx.joining_ops()?);
                    f.held.push(ftx);
                } else {
                    f.ops.push(MetaOp::Expect(k.clone(), Some(v.clone())));
                    f.guards.push((name.to_string(), k, v));
                }
            }
            Some(_) => {
                f.ops.push(MetaOp::Expect(k.clone(), Some(v.clone())));
                f.guards.push((name.to_string(), k, v));
            }
            None if attached => {
                let Ok(claim) = h.claim(name) else {
                    return Ok(Err(Again::Busy(name.to_string())));
                };
                f.claims.push(claim);
                rec.branch = Some(new.to_string());
                f.ops.push(MetaOp::Expect(k.clone(), Some(v)));
                f.ops.push(crate::session::record_op(&rec));
            }
            None => {}
        }
    }
    Ok(Ok(f))
}
