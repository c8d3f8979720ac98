//! The operation log: one record per change of a session's state, so any step can
//! be undone, redone or returned to, and a reviewer sees who did what.
//!
//! Owns: the operation record format ([`Operation`], [`View`], [`Actor`]), its keys
//! (`p/<session>\0<seq>`, built by `crate::meta`), attachments of an operation
//! (`x/<session>\0<seq><tag>`: captured output and other large payloads), appending
//! ([`append`]), reading ([`get`], [`list`], [`last`]; bounded walks in pages:
//! [`walk`]), the undo/redo stacks ([`stack`]) and retention ([`retention`]).
//!
//! Invariants:
//! - Sequence numbers of a session start at 1 and grow by one; an append claims its
//!   slot with a [`MetaOp::Expect`] that the slot is empty, in the same atomic batch
//!   as the state change it records when the caller has one, so two appenders never
//!   share a number and a recorded change is never without its record.
//! - Records are immutable. Undo, redo and restore append; nothing but retention
//!   (`gc`, by the user's settings) and `session rm` deletes a record.
//! - A [`View`] names checkpoints and tree roots; `gc` keeps everything a retained
//!   record names (see `crate::reach`).
//! - The format is JSON with a version and an open `meta` map: later features
//!   (exec, experiment, promote, messages) add fields without a format change.

pub mod retention;
pub mod stack;
pub mod walk;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;

/// Operation record format version.
pub const OP_VERSION: u32 = 1;

/// Attachment tags (one byte after the sequence number in the key).
pub mod tag {
    /// Captured standard output of an exec.
    pub const STDOUT: u8 = b'o';
    /// Captured standard error of an exec.
    pub const STDERR: u8 = b'e';
}

/// Who asked for an operation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
pub struct Actor {
    /// `user` (the store or session socket), `agent` (an agent socket) or `daemon`
    /// (automatic checkpoints and other work the daemon starts itself).
    pub role: String,
    /// Peer uid (absent for the daemon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Peer pid (absent for the daemon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

impl Actor {
    /// The daemon itself.
    pub fn daemon() -> Actor {
        Actor {
            role: "daemon".into(),
            uid: None,
            pid: None,
        }
    }

    /// A peer of a socket of `role` (`user` or `agent`).
    pub fn peer(role: &str, uid: u32, pid: u32) -> Actor {
        Actor {
            role: role.into(),
            uid: Some(uid),
            pid: Some(pid),
        }
    }

    /// Whether this is an agent socket's peer.
    pub fn is_agent(&self) -> bool {
        self.role == "agent"
    }
}

/// The state an operation started from or left: HEAD, the branches it touched, and
/// the workspace's contents.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
pub struct View {
    /// The checkpoint HEAD names (hex); `None` before the session's first one.
    #[serde(default)]
    pub head: Option<CheckpointId>,
    /// The branch HEAD is attached to (`None`: detached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The root of the workspace's tree (hex): what a restore of this view grafts.
    pub workspace: NodeId,
    /// The branches the operation touched: name to checkpoint (hex), `None` where the
    /// branch did not exist.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub branches: BTreeMap<String, Option<CheckpointId>>,
}

/// One operation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, schemars::JsonSchema)]
pub struct Operation {
    /// Format version ([`OP_VERSION`]).
    pub version: u32,
    /// Session it changed.
    pub session: String,
    /// Sequence number in the session's log (from 1).
    pub seq: u64,
    /// The previous operation (`seq - 1`; `None` for the first).
    #[serde(default)]
    pub parent: Option<u64>,
    /// Unix time in nanoseconds (a string in JSON: it does not fit a double).
    #[serde(with = "time_ns")]
    #[schemars(with = "String")]
    pub time_ns: i128,
    /// Who asked.
    pub actor: Actor,
    /// What kind: `checkpoint`, `checkout`, `restore`, `branch`, `branch-delete`,
    /// `branch-rename`, `fork`, `config`, `undo`, `redo`, `op-restore`, `exec`,
    /// `experiment`, `adopt`, `note`, ... (an open set).
    pub kind: String,
    /// The request as received (its protocol form), or what the daemon did.
    #[serde(default)]
    pub request: Value,
    /// Free text the caller gave (`--explanation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    /// The state before.
    pub before: View,
    /// The state after.
    pub after: View,
    /// For an undo: the operation it undid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoes: Option<u64>,
    /// For a redo: the undo it reverted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redoes: Option<u64>,
    /// Whether undo and redo skip it (a note, or an operation that changed nothing
    /// of the view).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inert: bool,
    /// Feature-defined data (exec records, experiment results, note type, ...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub meta: Map<String, Value>,
}

/// Serde for a unix time in nanoseconds as a JSON string (it does not fit a
/// double); shared by the records that carry one (operations, messages).
pub mod time_ns {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Write it.
    pub fn serialize<S: Serializer>(t: &i128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_string())
    }

    /// Read it.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i128, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The longest explanation kept.
pub const MAX_EXPLANATION: usize = 4096;

/// What a caller fills in; [`append`] numbers and stamps it.
#[derive(Debug, Clone)]
pub struct NewOp {
    /// Who asked.
    pub actor: Actor,
    /// Kind (see [`Operation::kind`]).
    pub kind: String,
    /// The request.
    pub request: Value,
    /// Explanation.
    pub explanation: Option<String>,
    /// State before.
    pub before: View,
    /// State after.
    pub after: View,
    /// Undo target.
    pub undoes: Option<u64>,
    /// Redo target.
    pub redoes: Option<u64>,
    /// Skipped by undo and redo.
    pub inert: bool,
    /// Feature data.
    pub meta: Map<String, Value>,
}

impl NewOp {
    /// An operation of `kind` by `actor` with everything else empty.
    pub fn new(actor: &Actor, kind: &str, request: Value, before: View, after: View) -> NewOp {
        NewOp {
            actor: actor.clone(),
            kind: kind.into(),
            request,
            explanation: None,
            before,
            after,
            undoes: None,
            redoes: None,
            inert: false,
            meta: Map::new(),
        }
    }

    /// The record with sequence number `seq`, stamped now.
    pub fn build(self, session: &str, seq: u64) -> Operation {
        let time_ns = crate::clock::unix_ns();
        let mut explanation = self.explanation;
        if let Some(e) = explanation.as_mut()
            && e.len() > MAX_EXPLANATION
        {
            let mut cut = MAX_EXPLANATION;
            while !e.is_char_boundary(cut) {
                cut -= 1;
            }
            e.truncate(cut);
        }
        let reverses = self.undoes.is_some() || self.redoes.is_some();
        // A change of the conversation's visible messages (`crate::messages`,
        // recorded in `meta.conversation`) is a change even with equal views.
        let conversation = self.meta.contains_key("conversation");
        let inert = self.inert || (self.before == self.after && !reverses && !conversation);
        Operation {
            version: OP_VERSION,
            session: session.into(),
            seq,
            parent: seq.checked_sub(1).filter(|&p| p > 0),
            time_ns,
            actor: self.actor,
            kind: self.kind,
            request: self.request,
            explanation,
            before: self.before,
            after: self.after,
            undoes: self.undoes,
            redoes: self.redoes,
            inert,
            meta: self.meta,
        }
    }
}

impl Operation {
    /// Parse a stored record.
    pub fn decode(what: &str, bytes: &[u8]) -> Result<Operation> {
        let op: Operation = serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt(format!("operation {what}"), e.to_string()))?;
        if op.version != OP_VERSION {
            return Err(Error::corrupt(
                format!("operation {what}"),
                format!("unsupported version {}", op.version),
            ));
        }
        Ok(op)
    }

    /// The ops that store this record, claiming its slot (fails with
    /// [`Error::Conflict`] at commit if another record took the number).
    pub fn ops(&self) -> Vec<MetaOp> {
        let k = meta::op_key(&self.session, self.seq);
        vec![
            MetaOp::Expect(k.clone(), None),
            MetaOp::Put(k, serde_json::to_vec(self).expect("operation serializes")),
        ]
    }

    /// Every checkpoint the record names.
    pub fn checkpoints(&self) -> impl Iterator<Item = CheckpointId> + '_ {
        [&self.before, &self.after]
            .into_iter()
            .flat_map(|v| v.head.iter().chain(v.branches.values().flatten()).copied())
    }
}

/// The newest operation of `session`.
pub fn last(store: &dyn ObjectStore, session: &str) -> Result<Option<Operation>> {
    let got = store.meta_range_rev(&KeyRange::ops(session), 1)?;
    got.first().map(|(k, v)| decode_kv(k, v)).transpose()
}

/// Operation `seq` of `session`.
pub fn get(store: &dyn ObjectStore, session: &str, seq: u64) -> Result<Operation> {
    match store.meta_get(&meta::op_key(session, seq))? {
        Some(v) => Operation::decode(&format!("{session}#{seq}"), &v),
        None => Err(Error::NotFound(format!(
            "session {session} has no operation {seq} (see `treefork op log`)"
        ))),
    }
}

/// At most `limit` operations of `session`, newest first.
pub fn list(store: &dyn ObjectStore, session: &str, limit: usize) -> Result<Vec<Operation>> {
    store
        .meta_range_rev(&KeyRange::ops(session), limit)?
        .iter()
        .map(|(k, v)| decode_kv(k, v))
        .collect()
}

#[cfg(test)]
thread_local! {
    /// Records decoded by this thread (tests count what a read costs).
    pub(crate) static DECODED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn decode_kv(k: &[u8], v: &[u8]) -> Result<Operation> {
    #[cfg(test)]
    DECODED.with(|d| d.set(d.get() + 1));
    let what = match meta::op_parts(k) {
        Some((s, n)) => format!("{s}#{n}"),
        None => format!("key {}", String::from_utf8_lossy(k)),
    };
    Operation::decode(&what, v)
}

/// Append `op` to `session`'s log together with `extra` (the state change it records),
/// in one atomic commit. Numbers it after the newest record; if a concurrent append
/// took that number, retries with the next (at most a few times).
pub fn append(
    store: &dyn ObjectStore,
    session: &str,
    op: NewOp,
    extra: Vec<MetaOp>,
) -> Result<Operation> {
    append_with(store, session, op, &|_| extra.clone())
}

/// [`append`] with state-change ops that depend on the sequence number the record
/// gets (its attachments: `extra(seq)`), all in one atomic commit.
pub fn append_with(
    store: &dyn ObjectStore,
    session: &str,
    op: NewOp,
    extra: &dyn Fn(u64) -> Vec<MetaOp>,
) -> Result<Operation> {
    let mut seq = last(store, session)?.map_or(1, |o| o.seq + 1);
    for _ in 0..8 {
        let rec = op.clone().build(session, seq);
        let mut ops = extra(seq);
        ops.extend(rec.ops());
        match store.commit(ops) {
            Ok(()) => return Ok(rec),
            Err(Error::Conflict(_)) if store.meta_get(&meta::op_key(session, seq))?.is_some() => {
                seq += 1;
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::Busy(format!(
        "session {session}: the operation log kept moving while appending; retry"
    )))
}

/// Store an attachment of operation `seq` (not durable until the next commit: put
/// it in the same batch as the record, or commit it alone).
pub fn attachment_op(session: &str, seq: u64, tag: u8, bytes: Vec<u8>) -> MetaOp {
    MetaOp::Put(meta::attach_key(session, seq, tag), bytes)
}

/// Read an attachment.
pub fn attachment(
    store: &dyn ObjectStore,
    session: &str,
    seq: u64,
    tag: u8,
) -> Result<Option<Vec<u8>>> {
    store.meta_get(&meta::attach_key(session, seq, tag))
}

/// The ops that delete every record and attachment of `session` (`session rm`).
pub fn delete_all_ops(store: &dyn ObjectStore, session: &str) -> Result<Vec<MetaOp>> {
    let mut ops = Vec::new();
    for range in [KeyRange::ops(session), KeyRange::attachments(session, None)] {
        ops.extend(store.meta_delete_range_ops(&range)?);
    }
    Ok(ops)
}

#[cfg(test)]
pub(crate) mod tests;
