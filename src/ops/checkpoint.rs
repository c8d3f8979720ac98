//! `checkpoint`: save the live tree as a checkpoint of the session (moving the
//! branch HEAD is attached to), recorded as an operation in the same commit.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::record::{Call, view_of};
use super::txn::{self, Log};
use super::views::CheckpointView;
use super::{Target, syncfs};
use crate::error::{Error, Result};
use crate::oplog::{Operation, View};
use crate::refs::{self, Checkpoint};
use crate::session::{Session, SessionRecord};

/// The answer to `checkpoint`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointAnswer {
    /// The checkpoint taken.
    pub checkpoint: CheckpointView,
    /// The branch HEAD is attached to (moved to it); `null` when detached.
    pub branch: Option<String>,
}

pub(crate) fn run(
    t: &Target,
    call: &Call,
    message: &str,
    trigger: &str,
    meta: serde_json::Map<String, Value>,
) -> Result<CheckpointAnswer> {
    refs::validate_requested_trigger(trigger)?;
    syncfs(&t.mount)?;
    refs::validate_meta(&meta)?;
    let what = Taking {
        meta,
        ..Taking::new(message, trigger)
    };
    let (c, _) = take(&t.session, call, &what)?;
    let rec = t.session.record();
    Ok(CheckpointAnswer {
        checkpoint: CheckpointView::from(&c),
        branch: rec
            .branch
            .map(|b| crate::refs::names::display(&b, Some(&rec.name))),
    })
}

/// What a checkpoint of the live state is: its message and trigger, the
/// checkpoint's own `meta`, and the kind of the operation recording it
/// (`checkpoint` unless said).
pub(crate) struct Taking<'a> {
    pub message: &'a str,
    pub trigger: &'a str,
    pub kind: &'a str,
    pub meta: serde_json::Map<String, Value>,
}

impl<'a> Taking<'a> {
    /// A checkpoint with this message and trigger, recorded as `checkpoint`.
    pub fn new(message: &'a str, trigger: &'a str) -> Taking<'a> {
        Taking {
            message,
            trigger,
            kind: "checkpoint",
            meta: serde_json::Map::new(),
        }
    }

    /// Recorded as an operation of kind `kind`.
    pub fn recorded_as(self, kind: &'a str) -> Taking<'a> {
        Taking { kind, ..self }
    }
}

/// Take a checkpoint of the live state of `s` (call after `syncfs`) that HEAD and
/// its attached branch move to, recorded as an operation of kind `what.kind`
/// (asked by `call`; the metrics count it), in ONE batch (`super::txn`).
/// Every checkpoint an op takes of the live state goes through here: the
/// `checkpoint` verb, automatic, message, eviction, before-exec and save-first
/// checkpoints. A batch refused because the attached branch moved meanwhile is
/// tried again (the branch is then left alone and HEAD detached: see
/// `session::Txn::checkpoint`).
pub(crate) fn take(s: &Session, call: &Call, what: &Taking) -> Result<(Checkpoint, Operation)> {
    let mut tries = 0;
    loop {
        match take_once(s, call, what) {
            Err(Error::Conflict(e)) if tries < 3 => {
                tries += 1;
                ::log::info!("session {}: checkpoint raced ({e}); retrying", s.name());
            }
            r => return r,
        }
    }
}

fn take_once(s: &Session, call: &Call, what: &Taking) -> Result<(Checkpoint, Operation)> {
    let mut tx = s.txn();
    let c = tx.checkpoint_with(what.message, what.trigger, &[], what.meta.clone())?;
    let txn = txn::Transaction::on(s, what.kind);
    let op = txn.commit(&mut tx, Log::Next, &mut |b, a| {
        let (before, after) = checkpoint_views(b, a, &c);
        Ok((call.op(what.kind, before, after), Vec::new()))
    })?;
    Ok((c, op))
}

/// The views before and after a checkpoint `c` of the session whose record was
/// `b` and is `a`: the workspace is the checkpoint's tree on both sides, and the
/// branch HEAD was attached to is named on both (moved to `c` when HEAD is still
/// attached; left where it was when it moved away and HEAD was detached).
fn checkpoint_views(b: &SessionRecord, a: &SessionRecord, c: &Checkpoint) -> (View, View) {
    let mut before = view_of(b, c.root);
    let mut after = view_of(a, c.root);
    if let Some(br) = &b.branch {
        before.branches.insert(br.clone(), b.head);
        let now = if a.branch.is_some() {
            Some(c.id)
        } else {
            b.head
        };
        after.branches.insert(br.clone(), now);
    }
    (before, after)
}
