//! Values of the remote's rewritable objects: refs (`refs/branches/*`,
//! `refs/sessions/*`), the gc lock and condemned list (`gc/*`), and the descriptor.
//!
//! Owns: their JSON shapes (docs/design.md, "Remote tier: formats") and their
//! validation on read.
//!
//! Invariants: [`decode`] accepts only version 1 values of a known kind whose ids
//! are 64 lowercase hex digits and whose names pass the local naming rules
//! (`refs::validate_ref_name` for branches, `session::validate_session_name` for
//! sessions): a remote is shared storage, so whatever it returns is checked before
//! it names anything locally. Anything else is [`Error::Corrupt`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::layout::is_hex64;
use crate::error::{Error, Result};
use crate::id::CheckpointId;

/// Version of every value in this module.
pub const REF_VERSION: u32 = 1;

/// `refs/branches/<name>`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct BranchRef {
    /// 1.
    pub version: u32,
    /// `"branch"`.
    pub kind: String,
    /// The checkpoint id (hex).
    pub checkpoint: String,
    /// When it was written (unix seconds).
    pub time: i64,
}

impl BranchRef {
    /// A version-1 branch ref.
    pub fn new(checkpoint: &CheckpointId, time: i64) -> BranchRef {
        BranchRef {
            version: REF_VERSION,
            kind: "branch".into(),
            checkpoint: checkpoint.to_hex(),
            time,
        }
    }

    /// The checkpoint id.
    pub fn checkpoint_id(&self) -> CheckpointId {
        CheckpointId(super::layout::parse_hex32(&self.checkpoint).unwrap_or([0; 32]))
    }
}

/// `refs/sessions/<name>`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SessionRef {
    /// 1.
    pub version: u32,
    /// `"session"`.
    pub kind: String,
    /// The session's name on the remote.
    pub session: String,
    /// The session record (`s/` value JSON: root, base, head, branch, config, ...).
    pub record: Value,
    /// The lifecycle info (`i/` value JSON), if any.
    #[serde(default)]
    pub info: Option<Value>,
    /// The conversation visibility (`v/` value JSON), if any.
    #[serde(default)]
    pub conversation: Option<Value>,
    /// Log segments (`logs/<H>`), oldest first.
    #[serde(default)]
    pub logs: Vec<String>,
    /// Highest op record seq in the segments (0 = none).
    #[serde(default)]
    pub op_seq: u64,
    /// Highest message seq in the segments (0 = none).
    #[serde(default)]
    pub message_seq: u64,
    /// Highest transcript seq in the segments (0 = none).
    #[serde(default)]
    pub transcript_seq: u64,
    /// When it was written (unix seconds).
    pub time: i64,
}

impl SessionRef {
    /// The session record, parsed and checked (`SessionRecord::decode`), without
    /// an origin.
    pub fn session_record(&self) -> Result<crate::session::SessionRecord> {
        let bytes = serde_json::to_vec(&self.record).map_err(|e| {
            Error::corrupt(
                format!("remote session ref {}", self.session),
                e.to_string(),
            )
        })?;
        let mut rec = crate::session::SessionRecord::decode(&self.session, &bytes)?;
        // Where a session came from is the local daemon's word only
        // (`refs::origin`): a remote's is dropped.
        rec.origin = None;
        Ok(rec)
    }

    /// The workspace root (`record.root`, hex).
    pub fn root(&self) -> Option<&str> {
        self.record.get("root").and_then(Value::as_str)
    }

    /// HEAD (`record.head`, hex), if the session has a checkpoint.
    pub fn head(&self) -> Option<&str> {
        self.record.get("head").and_then(Value::as_str)
    }
}

/// A remote ref value, by its `kind`.
#[derive(Debug, Clone, PartialEq)]
pub enum RefValue {
    /// `refs/branches/*`.
    Branch(BranchRef),
    /// `refs/sessions/*`.
    Session(SessionRef),
}

impl RefValue {
    /// `"branch"` or `"session"`.
    pub fn kind(&self) -> &'static str {
        match self {
            RefValue::Branch(_) => "branch",
            RefValue::Session(_) => "session",
        }
    }

    /// The checkpoint it names: a branch's checkpoint, a session's HEAD (hex).
    pub fn checkpoint(&self) -> Option<&str> {
        match self {
            RefValue::Branch(b) => Some(&b.checkpoint),
            RefValue::Session(s) => s.head(),
        }
    }

    /// The value as JSON (what tracking refs keep as `value`).
    pub fn to_json(&self) -> Value {
        match self {
            RefValue::Branch(b) => serde_json::to_value(b),
            RefValue::Session(s) => serde_json::to_value(s),
        }
        .unwrap_or(Value::Null)
    }
}

fn bad(why: impl Into<String>) -> Error {
    Error::corrupt("remote ref", why)
}

/// Encode a ref value (compact JSON).
pub fn encode(v: &RefValue) -> Vec<u8> {
    serde_json::to_vec(&v.to_json()).expect("a JSON value serializes")
}

/// Decode and validate a ref value (see the module docs).
pub fn decode(bytes: &[u8]) -> Result<RefValue> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    from_json(v)
}

/// Validate a ref value already parsed as JSON (tracking refs' `value`).
pub fn from_json(v: Value) -> Result<RefValue> {
    let version = v.get("version").and_then(Value::as_u64);
    if version != Some(REF_VERSION as u64) {
        return Err(bad(format!("unsupported version {version:?}")));
    }
    match v.get("kind").and_then(Value::as_str) {
        Some("branch") => {
            let b: BranchRef = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
            if !is_hex64(&b.checkpoint) {
                return Err(bad("branch checkpoint is not a checkpoint id"));
            }
            Ok(RefValue::Branch(b))
        }
        Some("session") => {
            let s: SessionRef = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
            check_session(&s)?;
            Ok(RefValue::Session(s))
        }
        k => Err(bad(format!("unknown kind {k:?}"))),
    }
}

fn check_session(s: &SessionRef) -> Result<()> {
    crate::session::validate_session_name(&s.session)
        .map_err(|_| bad(format!("bad session name {:?}", s.session)))?;
    if !s.record.is_object() {
        return Err(bad("session record is not an object"));
    }
    if !s.root().is_some_and(is_hex64) {
        return Err(bad("session root is not a node id"));
    }
    if let Some(b) = s.record.get("base")
        && !b.as_str().is_some_and(is_hex64)
    {
        return Err(bad("session base is not a node id"));
    }
    match s.record.get("head") {
        None | Some(Value::Null) => {}
        Some(Value::String(h)) if is_hex64(h) => {}
        Some(_) => return Err(bad("session head is not a checkpoint id")),
    }
    if let Some(b) = s.record.get("branch").filter(|b| !b.is_null()) {
        let ok = b
            .as_str()
            .is_some_and(|b| crate::refs::validate_ref_name(b).is_ok());
        if !ok {
            return Err(bad("session branch is not a branch name"));
        }
    }
    if let Some(l) = s.logs.iter().find(|l| !is_hex64(l)) {
        return Err(bad(format!("log segment name {l:?} is not a hash")));
    }
    for (what, v) in [("info", &s.info), ("conversation", &s.conversation)] {
        if v.as_ref().is_some_and(|v| !v.is_object() && !v.is_null()) {
            return Err(bad(format!("session {what} is not an object")));
        }
    }
    Ok(())
}

/// `gc/condemned`: what a remote gc marked for deletion (phase one), and when.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct GcCondemned {
    /// 1.
    pub version: u32,
    /// When they were condemned (unix seconds).
    pub time: i64,
    /// Pack hashes (hex).
    #[serde(default)]
    pub packs: Vec<String>,
    /// Log segment hashes (hex).
    #[serde(default)]
    pub logs: Vec<String>,
    /// Checkpoint ids (hex).
    #[serde(default)]
    pub checkpoints: Vec<String>,
}

impl GcCondemned {
    /// Decode and validate (version 1, every name 64 lowercase hex digits).
    pub fn decode(bytes: &[u8]) -> Result<GcCondemned> {
        let c: GcCondemned = serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt("remote gc/condemned", e.to_string()))?;
        if c.version != REF_VERSION {
            return Err(Error::corrupt(
                "remote gc/condemned",
                format!("unsupported version {}", c.version),
            ));
        }
        let all = c.packs.iter().chain(&c.logs).chain(&c.checkpoints);
        if let Some(h) = all.into_iter().find(|h| !is_hex64(h)) {
            return Err(Error::corrupt(
                "remote gc/condemned",
                format!("{h:?} is not a hash"),
            ));
        }
        Ok(c)
    }

    /// Encode as JSON.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("string-keyed fields serialize")
    }
}

/// `gc/lock`: who runs a remote gc, until when.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GcLock {
    /// A random token naming this gc run.
    pub owner: String,
    /// Its process.
    pub pid: u32,
    /// Its host name.
    pub host: String,
    /// When it was taken (unix seconds).
    pub started: i64,
    /// After this (unix seconds) another gc may take it over.
    pub expires: i64,
}

impl GcLock {
    /// Decode.
    pub fn decode(bytes: &[u8]) -> Result<GcLock> {
        serde_json::from_slice(bytes).map_err(|e| Error::corrupt("remote gc/lock", e.to_string()))
    }

    /// Encode as JSON.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("string-keyed fields serialize")
    }
}

/// `treefork-remote.json`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    /// `"treefork-remote"`.
    pub format: String,
    /// 1.
    pub version: u32,
    /// When the remote was first added (unix seconds).
    pub created: i64,
}

impl Descriptor {
    /// The descriptor a new remote gets.
    pub fn new(created: i64) -> Descriptor {
        Descriptor {
            format: super::layout::DESCRIPTOR_FORMAT.into(),
            version: super::layout::DESCRIPTOR_VERSION,
            created,
        }
    }

    /// Decode; another format or version is [`Error::Invalid`] (refused by
    /// `remote add`, naming what was found).
    pub fn decode(bytes: &[u8]) -> Result<Descriptor> {
        let d: Descriptor = serde_json::from_slice(bytes).map_err(|e| {
            Error::Invalid(format!(
                "the remote's {} is not ours: {e}",
                super::layout::DESCRIPTOR
            ))
        })?;
        if d.format != super::layout::DESCRIPTOR_FORMAT
            || d.version != super::layout::DESCRIPTOR_VERSION
        {
            return Err(Error::Invalid(format!(
                "the remote holds format {:?} version {}; this treefork reads {:?} version {}",
                d.format,
                d.version,
                super::layout::DESCRIPTOR_FORMAT,
                super::layout::DESCRIPTOR_VERSION
            )));
        }
        Ok(d)
    }

    /// Encode as JSON.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("string-keyed fields serialize")
    }
}

#[cfg(test)]
mod tests;
