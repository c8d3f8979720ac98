//! `rewind`: bring the workspace back to a message's recorded workspace root
//! (pending changes saved first, through `save_and_graft`) and hide the messages
//! after it, as one operation of kind `rewind` (undoable: its views hold the
//! files, its meta the conversation's hidden ranges before and after), committed
//! in one batch with the new tree and ranges (`crate::ops::txn`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::super::record::{Call, view_of};
use super::super::txn::{self, Log};
use super::super::views::{PathChange, Saved};
use super::super::{Target, save_and_graft, syncfs, working_root};
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::messages::{self, Stream, conversation};
use crate::session::Txn;

/// The answer to `rewind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rewound {
    /// Whether it only reported what would change.
    pub dry_run: bool,
    /// The `rewind` operation; `null` for a dry run or when nothing changed.
    pub op: Option<u64>,
    /// The message rewound to (its id).
    pub message: String,
    /// Its sequence number in the conversation.
    pub seq: u64,
    /// What happened to the files.
    pub files: RewoundFiles,
    /// What happened to the conversation.
    pub conversation: RewoundConversation,
}

/// The files' part of a rewind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RewoundFiles {
    /// The paths brought back (or that would be).
    pub changes: Vec<PathChange>,
    /// Pending changes saved first; `null` when none (or a dry run).
    pub saved: Option<Saved>,
}

/// The conversation's part of a rewind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RewoundConversation {
    /// How many messages it hides (or would).
    pub dropped: usize,
}

/// What a rewind moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Files,
    Conversation,
    Both,
}

fn what_of(w: Option<&str>) -> Result<What> {
    match w {
        None | Some("both") => Ok(What::Both),
        Some("files") => Ok(What::Files),
        Some("conversation") => Ok(What::Conversation),
        Some(o) => Err(Error::Invalid(format!(
            "--what {o:?}: expected files, conversation or both"
        ))),
    }
}

/// What a rewind changes.
struct Plan {
    what: What,
    message: messages::Message,
    hidden: conversation::Hidden,
    new_hidden: conversation::Hidden,
    dropped: usize,
    changes: Vec<PathChange>,
}

/// Where a rewind goes: a message (kept, the ones after it hidden), or before
/// the `N`th prompt (it and what follows hidden, the files as it was given).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Point<'a> {
    Message(&'a str),
    BeforePrompt(u64),
}

fn plan(t: &Target, point: Point<'_>, what: What) -> Result<Plan> {
    let s = &t.session;
    let store = s.store().clone();
    let name = s.name();
    let (to, keep) = match point {
        Point::Message(id) => (id.to_string(), 1),
        Point::BeforePrompt(0) => {
            return Err(Error::Invalid("prompts count from 1".into()));
        }
        Point::BeforePrompt(n) => (crate::messages::page::nth_prompt(&*store, name, n)?.id, 0),
    };
    let to = to.as_str();
    let (stream, m) = messages::by_id(&*store, name, to)?;
    if stream != Stream::Messages {
        return Err(Error::Invalid(format!(
            "message {to} is in the transcript; rewind to a message of the conversation"
        )));
    }
    let (files, conv) = (what != What::Conversation, what != What::Files);
    let hidden = conversation::hidden(&*store, name)?;
    if conv && conversation::is_hidden(&hidden, m.seq) {
        return Err(Error::Invalid(format!(
            "message {to} was rewound away; undo that rewind first (`treefork undo`)"
        )));
    }
    let last = messages::last_seq(&*store, name, Stream::Messages)?;
    let from = m.seq + keep;
    let (new_hidden, dropped) = if conv && last >= from {
        let dropped = messages::share::visible(&hidden, from, last)
            .iter()
            .map(|[a, b]| (b - a + 1) as usize)
            .sum();
        (conversation::with_range(&hidden, from, last), dropped)
    } else {
        (hidden.clone(), 0)
    };
    let target = m.workspace;
    let changes: Vec<PathChange> = if files {
        crate::diff::diff_roots(&*store, working_root(t)?, target)?
            .iter()
            .map(PathChange::from)
            .collect()
    } else {
        Vec::new()
    };
    Ok(Plan {
        what,
        message: m,
        hidden,
        new_hidden,
        dropped,
        changes,
    })
}

pub(crate) fn run(
    t: &Target,
    call: &Call,
    point: Point<'_>,
    what: Option<&str>,
    dry_run: bool,
) -> Result<Rewound> {
    let p = plan(t, point, what_of(what)?)?;
    let to = p.message.id.clone();
    let to = to.as_str();
    let Plan {
        what,
        message: m,
        hidden,
        new_hidden,
        dropped,
        changes,
    } = p;
    let s = &t.session;
    let name = s.name();
    let target = m.workspace;
    let answer = |op: Option<u64>, saved: Option<Saved>| Rewound {
        dry_run,
        op,
        message: m.id.clone(),
        seq: m.seq,
        files: RewoundFiles {
            changes: changes.clone(),
            saved,
        },
        conversation: RewoundConversation { dropped },
    };
    if dry_run || (changes.is_empty() && new_hidden == hidden) {
        return Ok(answer(None, None));
    }
    let what_name = match what {
        What::Files => "files",
        What::Conversation => "conversation",
        What::Both => "both",
    };
    let txn = txn::Transaction::begin(t, "rewind");
    // The files, the conversation's hidden ranges and the record: one batch.
    let mut commit = |tx: &mut Txn<'_>, before_root: NodeId, after_root: NodeId| {
        let before = view_of(tx.before(), before_root);
        txn.commit(tx, Log::Next, &mut |_, rec| {
            let mut nop = call.op("rewind", before.clone(), view_of(rec, after_root));
            nop.meta.insert(
                "rewind".into(),
                json!({"to": m.id, "seq": m.seq, "what": what_name, "dropped": dropped}),
            );
            let mut extra = Vec::new();
            if new_hidden != hidden {
                nop.meta.insert(
                    "conversation".into(),
                    conversation::op_meta(&hidden, &new_hidden),
                );
                extra.push(conversation::put_op(name, &new_hidden));
            }
            Ok((nop, extra))
        })
    };
    let (rec, saved) = if !changes.is_empty() {
        let (sv, _, rec) = save_and_graft(
            t,
            "before-rewind",
            &format!("rewind to message {to}"),
            target,
            None,
            &mut commit,
        )?;
        (rec, sv)
    } else {
        syncfs(&t.mount)?;
        let mut tx = s.txn();
        let root = tx.flush()?;
        (commit(&mut tx, root, root)?, None)
    };
    Ok(answer(Some(rec.seq), Saved::of(&saved)))
}
