//! A session's side of a push: its state made durable (a live session is flushed
//! first), the log entries the remote lacks, and the session ref value.
//!
//! Owns: reading a session for a push ([`load`], which also records the first
//! upstream), the new log segment ([`new_log`]: operation records, their
//! attachments and the conversation's messages with a sequence number above what
//! the remote ref includes, plus every touched path) and the ref value
//! ([`ref_value`]).
//!
//! Invariants: the pushed record is the session's durable record after a flush
//! taken under its op lock (pending changes included); a segment only ever holds
//! entries above the remote's `*_seq`, so a push costs O(changes) in log size
//! too; the checkpoints and workspace roots the new entries name are returned for
//! the closure.

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::host::Serving;
use crate::messages::Stream;
use crate::meta::{self, KeyRange};
use crate::remote::segment::{SegEntry, Segment};
use crate::session::{self, SessionRecord};
use crate::store::ObjectStore;

/// The record key holding a session's upstream.
pub const UPSTREAM: &str = "upstream";

/// A session's upstream (`meta.upstream` of its record): where a plain `push`
/// sends it.
pub fn upstream(rec: &SessionRecord) -> Option<(String, String)> {
    let u = rec.meta.get(UPSTREAM)?;
    Some((
        u.get("remote")?.as_str()?.to_string(),
        u.get("session")?.as_str()?.to_string(),
    ))
}

/// The durable record of session `name` (a live one flushed first, under its op
/// lock). When it has no upstream yet, `(remote, dst)` becomes it.
pub fn load(
    store: &dyn ObjectStore,
    env: &dyn Serving,
    name: &str,
    first_upstream: (&str, &str),
) -> Result<SessionRecord> {
    let set = |rec: &mut SessionRecord| {
        if upstream(rec).is_none() {
            rec.meta.insert(
                UPSTREAM.into(),
                json!({"remote": first_upstream.0, "session": first_upstream.1}),
            );
        }
    };
    if let Ok(t) = env.mounted(Some(name)) {
        let s = &t.session;
        let _lock = s.op_lock.lock().unwrap_or_else(|e| e.into_inner());
        crate::host::syncfs_at(&t.mount)?;
        let (_, rec) = s.flush_with(Some(&mut |rec: &mut SessionRecord, _| {
            set(rec);
            Ok(vec![])
        }))?;
        return Ok(rec);
    }
    let missing = || Error::NotFound(format!("no session named {name}"));
    let rec = session::load_record(store, name)?.ok_or_else(missing)?;
    if upstream(&rec).is_some() {
        return Ok(rec);
    }
    // Unmounted: write the upstream while owning the name (no mount meanwhile).
    let mut out = None;
    env.with_claim(name, &mut || {
        let mut rec = session::load_record(store, name)?.ok_or_else(missing)?;
        set(&mut rec);
        store.commit(vec![session::record_op(&rec)])?;
        out = Some(rec);
        Ok(())
    })?;
    out.ok_or_else(missing)
}

/// What the remote's session ref already includes: the highest sequence numbers of
/// operations, messages and transcript messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seqs {
    /// Operations.
    pub op: u64,
    /// Conversation messages.
    pub message: u64,
    /// Transcript messages.
    pub transcript: u64,
}

impl Seqs {
    /// The sequence numbers a remote session ref names (`Error::Corrupt` when
    /// it is not a valid session ref).
    pub fn of(v: &Value) -> Result<Seqs> {
        let s = session_ref(v)?;
        Ok(Seqs {
            op: s.op_seq,
            message: s.message_seq,
            transcript: s.transcript_seq,
        })
    }
}

/// The remote session ref `v`, decoded and validated (`refval`).
fn session_ref(v: &Value) -> Result<crate::remote::refval::SessionRef> {
    match crate::remote::refval::from_json(v.clone())? {
        crate::remote::refval::RefValue::Session(s) => Ok(s),
        _ => Err(Error::corrupt("remote ref", "not a session ref")),
    }
}

/// A session's log entries the remote lacks.
#[derive(Debug, Default)]
pub struct NewLog {
    /// Segment entries (touched paths included).
    pub entries: Vec<SegEntry>,
    /// Whether any operation or message is new.
    pub changed: bool,
    /// Sequence numbers once these entries are included.
    pub seqs: Seqs,
    /// Checkpoints (hex) the new entries name.
    pub checkpoints: Vec<String>,
    /// Workspace roots (hex) the new entries name.
    pub roots: Vec<String>,
}

/// The entries of `session` above `since`.
pub fn new_log(store: &dyn ObjectStore, session: &str, since: Seqs) -> Result<NewLog> {
    let mut log = NewLog {
        seqs: since,
        ..NewLog::default()
    };
    let ops = KeyRange::ops_from(session, since.op + 1);
    for (k, v) in store.meta_range(&ops, usize::MAX)? {
        let Some((_, seq)) = meta::op_parts(&k) else {
            continue;
        };
        let owner = format!("operation {session}#{seq}");
        let op = crate::oplog::Operation::decode(&owner, &v)?;
        log.checkpoints.extend(op.checkpoints().map(|c| c.to_hex()));
        log.roots
            .extend([op.before.workspace.to_hex(), op.after.workspace.to_hex()]);
        let v: Value =
            serde_json::from_slice(&v).map_err(|e| Error::corrupt(owner, e.to_string()))?;
        log.entries.push(SegEntry::Op { seq, v });
        log.seqs.op = seq;
        log.changed = true;
    }
    let attach = KeyRange {
        start: meta::attach_key(session, since.op + 1, 0),
        end: KeyRange::attachments(session, None).end,
    };
    for (k, v) in store.meta_range(&attach, usize::MAX)? {
        if let Some((_, seq, tag)) = meta::attach_parts(&k) {
            log.entries.push(SegEntry::Attach { seq, tag, bytes: v });
        }
    }
    // The session's whole view: records a fork shares with its parent are
    // materialized in the segment (`messages::share`), so the pushed session
    // carries its conversation.
    for (stream, from) in [
        (Stream::Messages, since.message),
        (Stream::Transcript, since.transcript),
    ] {
        let chain = crate::messages::share::chain(store, session, stream)?;
        let last = crate::messages::last_seq(store, session, stream)?;
        let ranges = [[from + 1, last]];
        let ranges = if from < last { &ranges[..] } else { &[][..] };
        crate::messages::share::walk(store, &chain, stream, ranges, false, &mut |seq, v| {
            let tag = stream.tag();
            let owner = format!("message {session}#{}{seq}", tag as char);
            let m = crate::messages::Message::decode(&owner, &v)?;
            log.checkpoints.extend(m.checkpoint.map(|c| c.to_hex()));
            log.roots.push(m.workspace.to_hex());
            let v: Value =
                serde_json::from_slice(&v).map_err(|e| Error::corrupt(owner, e.to_string()))?;
            log.entries.push(SegEntry::Msg { tag, seq, v });
            match stream {
                Stream::Messages => log.seqs.message = seq,
                Stream::Transcript => log.seqs.transcript = seq,
            }
            log.changed = true;
            Ok(true)
        })?;
    }
    for (k, _) in store.meta_range(&KeyRange::touched(session), usize::MAX)? {
        if let Some(p) = meta::touched_path(&k) {
            log.entries.push(SegEntry::Touched { path: p.to_vec() });
        }
    }
    Ok(log)
}

/// The segment holding `log`'s entries, named for remote session `dst`.
pub fn segment(dst: &str, log: NewLog) -> Segment {
    Segment {
        session: dst.to_string(),
        entries: log.entries,
    }
}

/// A JSON record read from `key`, if any.
fn json_at(store: &dyn ObjectStore, key: &[u8]) -> Result<Option<Value>> {
    match store.meta_get(key)? {
        None => Ok(None),
        Some(v) => serde_json::from_slice(&v).map(Some).map_err(|e| {
            Error::corrupt(
                format!("record {}", String::from_utf8_lossy(key)),
                e.to_string(),
            )
        }),
    }
}

/// The branch `rec` is attached to, as a remote session record names it.
fn pushed_branch(rec: &SessionRecord) -> Option<&str> {
    rec.branch.as_deref().map(crate::refs::names::short)
}

/// The session ref value for remote session `dst` of local session `rec`.
pub fn ref_value(
    store: &dyn ObjectStore,
    dst: &str,
    rec: &SessionRecord,
    logs: Vec<String>,
    seqs: Seqs,
) -> Result<Value> {
    let mut record = serde_json::to_value(rec).map_err(|e| Error::Invalid(e.to_string()))?;
    // The branch as the session writes it (its own namespace is local: a pull
    // makes it the pulling session's own again).
    record["branch"] = json!(pushed_branch(rec));
    Ok(json!({
        "version": 1,
        "kind": "session",
        "session": dst,
        "record": record,
        "info": json_at(store, &meta::info_key(&rec.name))?,
        "conversation": json_at(store, &meta::conversation_key(&rec.name))?,
        "logs": logs,
        "op_seq": seqs.op,
        "message_seq": seqs.message,
        "transcript_seq": seqs.transcript,
        "time": crate::clock::unix_secs(),
    }))
}

/// Whether the remote session ref `remote` holds the same state as `rec`
/// (root, HEAD, branch).
pub fn same_state(remote: &Value, rec: &SessionRecord) -> bool {
    let r = remote.get("record").cloned().unwrap_or(Value::Null);
    let s = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
    s("root") == json!(rec.root)
        && s("head") == json!(rec.head)
        && s("branch") == json!(pushed_branch(rec))
}

/// The segment hashes a remote session ref lists (`Error::Corrupt` when it is
/// not a valid session ref: a push building on a list it misread would write a
/// ref that drops the remote's log).
pub fn logs_of(remote: &Value) -> Result<Vec<String>> {
    Ok(session_ref(remote)?.logs)
}
