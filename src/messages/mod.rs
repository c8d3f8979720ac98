//! The conversation log: per session, an append-only log of messages (stream
//! `messages`) and of raw SDK messages (stream `transcript`), each record tied to
//! the operation, checkpoint and workspace root current when it was written, so a
//! rewind can bring files and conversation back to the same moment.
//!
//! Owns: the record format ([`Message`], [`MSG_VERSION`]), validation of what a
//! client sends ([`Draft::validate`]), reading in bounded pages ([`page`]:
//! [`list`]; [`by_id`], [`last_seq`]), the conversation's hidden ranges
//! ([`conversation`]), sharing a conversation with forks by reference and the
//! usage counted for quotas ([`share`]) and the per-session writer ([`writer`]).
//!
//! Keys (spelled in `crate::meta`): `g/<session>\0<tag><seq BE>` a record (tag `m`
//! messages, `t` transcript), `k/<session>\0<id>` the id index, `v/<session>` the
//! hidden ranges, `f/<session>` the bases a fork shares, `u/<session>` the usage.
//!
//! Invariants:
//! - Only the session's writer ([`writer`]) appends, so sequence numbers of a stream
//!   start at 1 and grow by one; each slot is claimed with a `MetaOp::Expect` in the
//!   same batch as its id index entry, so an id names at most one record.
//! - Records are immutable. A rewind hides messages (ranges in `v/`), never deletes
//!   them; `session rm` deletes everything ([`delete_ops`]), after handing what
//!   forks share of it to them ([`share::release`]).
//! - No reader loads a whole stream: listings are pages, lookups are by key.
//! - The workspace root and checkpoint a record names are kept by `gc` (see
//!   `crate::reach`), so a rewind to any message can restore its files.

pub mod conversation;
pub mod page;
pub mod share;
pub mod writer;

pub use page::{Page, Query, list, visible_count};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;

/// Record format version.
pub const MSG_VERSION: u32 = 1;
/// Largest `content` (and `tool_calls`), as JSON text.
pub const MAX_CONTENT: usize = 1 << 20;
/// Largest `meta`, as JSON text.
pub const MAX_META: usize = 64 << 10;
/// Longest `tool_call_id`.
pub const MAX_TOOL_CALL_ID: usize = 256;
/// The roles a message may have.
pub const ROLES: [&str; 4] = ["user", "assistant", "tool", "system"];

/// A stream of a session's conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// The conversation (what `rewind` and `fork --from-message` act on).
    Messages,
    /// Raw SDK messages, for replay.
    Transcript,
}

impl Stream {
    /// The key tag byte.
    pub fn tag(self) -> u8 {
        match self {
            Stream::Messages => b'm',
            Stream::Transcript => b't',
        }
    }

    /// Its protocol name.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Messages => "messages",
            Stream::Transcript => "transcript",
        }
    }

    /// From a protocol name (default: messages).
    pub fn parse(s: Option<&str>) -> Result<Stream> {
        match s {
            None | Some("messages") => Ok(Stream::Messages),
            Some("transcript") => Ok(Stream::Transcript),
            Some(o) => Err(Error::Invalid(format!(
                "unknown stream {o:?}: expected messages or transcript"
            ))),
        }
    }
}

/// What a client appends; the writer turns it into a [`Message`].
#[derive(Debug, Clone)]
pub struct Draft {
    /// The message id (a UUID).
    pub id: String,
    /// The stream.
    pub stream: Stream,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// Any JSON.
    pub content: Value,
    /// Tool calls the message makes.
    pub tool_calls: Option<Value>,
    /// The tool call a `tool` message answers.
    pub tool_call_id: Option<String>,
    /// Caller data.
    pub meta: Option<Map<String, Value>>,
    /// When it was appended (unix ns).
    pub time_ns: i128,
}

impl Draft {
    /// Check what a client sent: role, sizes, id.
    pub fn validate(&self) -> Result<()> {
        if !ROLES.contains(&self.role.as_str()) {
            return Err(Error::Invalid(format!(
                "role {:?}: expected one of user, assistant, tool, system",
                self.role
            )));
        }
        validate_id(&self.id)?;
        let size = |v: &Value| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
        if size(&self.content) > MAX_CONTENT {
            return Err(Error::Invalid(format!(
                "message content is larger than {MAX_CONTENT} bytes as JSON"
            )));
        }
        if self
            .tool_calls
            .as_ref()
            .is_some_and(|t| size(t) > MAX_CONTENT)
        {
            return Err(Error::Invalid(format!(
                "tool_calls is larger than {MAX_CONTENT} bytes as JSON"
            )));
        }
        if let Some(m) = &self.meta
            && size(&Value::Object(m.clone())) > MAX_META
        {
            return Err(Error::Invalid(format!(
                "message meta is larger than {MAX_META} bytes as JSON"
            )));
        }
        if let Some(t) = &self.tool_call_id
            && (t.len() > MAX_TOOL_CALL_ID || t.chars().any(char::is_control))
        {
            return Err(Error::Invalid(format!(
                "tool_call_id must be at most {MAX_TOOL_CALL_ID} bytes without control characters"
            )));
        }
        Ok(())
    }
}

/// A message id: a UUID in its 36-character form (`8-4-4-4-12` hex digits).
pub fn validate_id(id: &str) -> Result<()> {
    let ok = id.len() == 36
        && id.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "message id {:?} is not a UUID (like 123e4567-e89b-12d3-a456-426614174000)",
            id.chars().take(64).collect::<String>()
        )))
    }
}

/// A new random (version 4) UUID.
pub fn new_id() -> String {
    let mut b = crate::id::random16();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = crate::id::hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// A message of the conversation log: its stored record without the format version
/// (the record is `{"version": MSG_VERSION, ...message}`), and what answers show
/// (`ops::views::MessageView` adds its time in seconds).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, schemars::JsonSchema)]
pub struct Message {
    /// The id (a UUID).
    pub id: String,
    /// Sequence number in its stream (from 1).
    pub seq: u64,
    /// When it was appended, unix ns, as a decimal string.
    #[serde(with = "crate::oplog::time_ns")]
    #[schemars(with = "String")]
    pub time_ns: i128,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// Any JSON.
    pub content: Value,
    /// Tool calls the message makes (absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    /// The tool call a `tool` message answers (absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Caller data (absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// The session's newest operation when it was written; `null`: none yet.
    pub op: Option<u64>,
    /// HEAD (hex in JSON) when it was written.
    pub checkpoint: Option<CheckpointId>,
    /// The workspace root (hex in JSON) when it was written.
    pub workspace: NodeId,
}

/// A message's stored record: its format version, then the message's fields.
#[derive(Serialize, Deserialize)]
struct Record<M> {
    /// Format version ([`MSG_VERSION`]).
    version: u32,
    #[serde(flatten)]
    message: M,
}

impl Message {
    /// Parse a stored record.
    pub fn decode(owner: &str, bytes: &[u8]) -> Result<Message> {
        let r: Record<Message> = serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt(format!("message {owner}"), e.to_string()))?;
        if r.version != MSG_VERSION {
            return Err(Error::corrupt(
                format!("message {owner}"),
                format!("unsupported version {}", r.version),
            ));
        }
        Ok(r.message)
    }

    /// The protocol form (MSG in docs/protocol.md).
    pub fn json(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("message serializes");
        let o = v.as_object_mut().expect("an object");
        o.insert("time".into(), json!((self.time_ns / 1_000_000_000) as i64));
        v
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let r = Record {
            version: MSG_VERSION,
            message: self,
        };
        serde_json::to_vec(&r).expect("message serializes")
    }
}

/// Where an id index entry points.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdEntry {
    stream: char,
    seq: u64,
}

/// The ops storing `m` in `session`'s stream `stream`: the slot claimed (must be
/// empty), the record, the id index entry (must be new).
pub fn put_ops(session: &str, stream: Stream, m: &Message) -> Vec<MetaOp> {
    let key = meta::message_key(session, stream.tag(), m.seq);
    let idx = meta::message_id_key(session, &m.id);
    let entry = IdEntry {
        stream: stream.tag() as char,
        seq: m.seq,
    };
    vec![
        MetaOp::Expect(key.clone(), None),
        MetaOp::Expect(idx.clone(), None),
        MetaOp::Put(key, m.encode()),
        MetaOp::Put(idx, serde_json::to_vec(&entry).expect("serializes")),
    ]
}

/// The highest sequence number of `session`'s view of a stream (0: empty),
/// shared records included.
pub fn last_seq(store: &dyn ObjectStore, session: &str, stream: Stream) -> Result<u64> {
    share::last_seq(store, session, stream)
}

/// Whether `id` is in `session`'s view (its own records or shared ones).
pub fn exists(store: &dyn ObjectStore, session: &str, id: &str) -> Result<bool> {
    Ok(share::locate(store, session, id)?.is_some())
}

/// The message `id` of `session`'s view with its stream.
pub fn by_id(store: &dyn ObjectStore, session: &str, id: &str) -> Result<(Stream, Message)> {
    validate_id(id)?;
    let missing = || Error::NotFound(format!("session {session} has no message {id}"));
    let (stream, seq, owner) = share::locate(store, session, id)?.ok_or_else(missing)?;
    let v = store
        .meta_get(&meta::message_key(&owner, stream.tag(), seq))?
        .ok_or_else(missing)?;
    Ok((stream, Message::decode(&format!("{owner}/{id}"), &v)?))
}

/// The ops deleting every record of `session`'s conversation (`session rm`),
/// after handing what other sessions share of it to them ([`share::release`]:
/// commits copies first). Reads keys a page at a time.
pub fn delete_ops(store: &dyn ObjectStore, session: &str) -> Result<Vec<MetaOp>> {
    let mut ops = share::release(store, session)?;
    ops.extend([
        MetaOp::Delete(meta::conversation_key(session)),
        MetaOp::Delete(meta::conversation_base_key(session)),
        MetaOp::Delete(meta::conversation_usage_key(session)),
    ]);
    for r in [
        KeyRange::all_messages(session),
        KeyRange::message_ids(session),
    ] {
        let mut r = r;
        loop {
            let got = store.meta_range(&r, share::CHUNK)?;
            let n = got.len();
            for (k, _) in got {
                r.start = k.clone();
                r.start.push(0);
                ops.push(MetaOp::Delete(k));
            }
            if n < share::CHUNK {
                break;
            }
        }
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(role: &str) -> Draft {
        Draft {
            id: new_id(),
            stream: Stream::Messages,
            role: role.into(),
            content: json!("hi"),
            tool_calls: None,
            tool_call_id: None,
            meta: None,
            time_ns: crate::clock::unix_ns(),
        }
    }

    #[test]
    fn validation() {
        assert!(draft("user").validate().is_ok());
        assert!(draft("robot").validate().is_err());
        let mut d = draft("user");
        d.id = "not-a-uuid".into();
        assert!(d.validate().is_err());
        let mut d = draft("user");
        d.content = json!("x".repeat(MAX_CONTENT));
        assert!(d.validate().is_err());
        let mut d = draft("tool");
        d.tool_call_id = Some("a\nb".into());
        assert!(d.validate().is_err());
        assert!(validate_id(&new_id()).is_ok());
        assert_ne!(new_id(), new_id());
    }

    #[test]
    fn record_round_trip() {
        let m = Message {
            id: new_id(),
            seq: 3,
            time_ns: 1_700_000_000_123_456_789,
            role: "assistant".into(),
            content: json!({"text": "ok"}),
            tool_calls: Some(json!([{"id": "c1"}])),
            tool_call_id: None,
            meta: None,
            op: Some(4),
            checkpoint: None,
            workspace: crate::id::NodeId([0; 32]),
        };
        assert_eq!(Message::decode("t", &m.encode()).unwrap(), m);
        let j = m.json();
        assert_eq!(j["time"], json!(1_700_000_000));
        assert_eq!(j["time_ns"], json!("1700000000123456789"));
        assert!(j.get("version").is_none());
    }
}
