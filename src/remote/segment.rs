//! Session log segments (`logs/<H>`): the op records, exec attachments, messages
//! and touched paths of a session, as pushed to a remote.
//!
//! Owns: the segment codec (docs/design.md, "Remote tier: formats"). Pure: no
//! store, no network.
//!
//! Format: one zstd frame of JSON lines. First line
//! `{"format":"treefork-log-segment","version":1,"session":"<name>"}`, then one
//! entry per line: `{"f":"op","seq":N,"v":<op record>}`,
//! `{"f":"attach","seq":N,"tag":"o"|"e","v":"<base64>"}`,
//! `{"f":"msg","tag":"m"|"t","seq":N,"v":<message record>}`,
//! `{"f":"touched","path":"<base64>"}`. `H` is the blake3 hex of the compressed bytes.
//!
//! Invariants: [`decode`] checks the hash before decompressing anything, refuses a
//! decompressed size over [`MAX_SEGMENT_RAW`], never panics, and skips lines whose
//! `f` it does not know (forward compatibility); a known entry that is malformed is
//! [`Error::Corrupt`].

use std::io::Read;

use serde_json::{Value, json};

use crate::control::{b64_decode, b64_encode};
use crate::error::{Error, Result};

/// First-line `format` value.
pub const SEGMENT_FORMAT: &str = "treefork-log-segment";
/// First-line `version` value.
pub const SEGMENT_VERSION: u64 = 1;
/// Largest decompressed segment accepted.
pub const MAX_SEGMENT_RAW: u64 = 256 << 20;

/// A decoded segment.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// The session it was pushed from (its name on the remote).
    pub session: String,
    /// Entries in file order.
    pub entries: Vec<SegEntry>,
}

/// One line of a segment.
#[derive(Clone, Debug, PartialEq)]
pub enum SegEntry {
    /// An operation record (`o/`-family value JSON, stored as is).
    Op {
        /// Its seq.
        seq: u64,
        /// The record JSON.
        v: Value,
    },
    /// An exec attachment (`tag` b'o' stdout / b'e' stderr) of op `seq`.
    Attach {
        /// The op's seq.
        seq: u64,
        /// b'o' or b'e'.
        tag: u8,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// A message (`tag` b'm') or transcript entry (b't').
    Msg {
        /// b'm' or b't'.
        tag: u8,
        /// Its seq in its family.
        seq: u64,
        /// The message record JSON.
        v: Value,
    },
    /// A path the session touched.
    Touched {
        /// The path bytes.
        path: Vec<u8>,
    },
}

impl SegEntry {
    fn to_json(&self) -> Value {
        let tag = |t: u8| (t as char).to_string();
        match self {
            SegEntry::Op { seq, v } => json!({"f": "op", "seq": seq, "v": v}),
            SegEntry::Attach { seq, tag: t, bytes } => {
                json!({"f": "attach", "seq": seq, "tag": tag(*t), "v": b64_encode(bytes)})
            }
            SegEntry::Msg { tag: t, seq, v } => {
                json!({"f": "msg", "tag": tag(*t), "seq": seq, "v": v})
            }
            SegEntry::Touched { path } => json!({"f": "touched", "path": b64_encode(path)}),
        }
    }
}

/// Encode a segment: (blake3 hex of the bytes = its name, the bytes).
pub fn encode(s: &Segment) -> (String, Vec<u8>) {
    let mut text =
        json!({"format": SEGMENT_FORMAT, "version": SEGMENT_VERSION, "session": s.session})
            .to_string();
    for e in &s.entries {
        text.push('\n');
        text.push_str(&e.to_json().to_string());
    }
    text.push('\n');
    let bytes = zstd::bulk::compress(text.as_bytes(), 3).expect("zstd compression of a buffer");
    (blake3::hash(&bytes).to_hex().to_string(), bytes)
}

fn bad(why: impl Into<String>) -> Error {
    Error::corrupt("remote log segment", why)
}

/// Decode a segment whose name is `expected_hash_hex` (see the module docs).
pub fn decode(bytes: &[u8], expected_hash_hex: &str) -> Result<Segment> {
    if blake3::hash(bytes).to_hex().as_str() != expected_hash_hex {
        return Err(bad(format!("{expected_hash_hex}: hash mismatch")));
    }
    let mut raw = Vec::new();
    zstd::stream::read::Decoder::new(bytes)
        .map_err(|e| bad(format!("zstd: {e}")))?
        .take(MAX_SEGMENT_RAW + 1)
        .read_to_end(&mut raw)
        .map_err(|e| bad(format!("zstd: {e}")))?;
    if raw.len() as u64 > MAX_SEGMENT_RAW {
        return Err(bad("larger than 256 MiB decompressed"));
    }
    let text = std::str::from_utf8(&raw).map_err(|_| bad("not UTF-8"))?;
    let mut lines = text.lines();
    let head: Value = serde_json::from_str(lines.next().ok_or_else(|| bad("no header line"))?)
        .map_err(|e| bad(format!("header line: {e}")))?;
    if head.get("format").and_then(Value::as_str) != Some(SEGMENT_FORMAT)
        || head.get("version").and_then(Value::as_u64) != Some(SEGMENT_VERSION)
    {
        return Err(bad("not a version 1 treefork log segment"));
    }
    let session = head
        .get("session")
        .and_then(Value::as_str)
        .filter(|s| crate::session::validate_session_name(s).is_ok())
        .ok_or_else(|| bad("bad session name"))?
        .to_string();
    let mut entries = Vec::new();
    for (i, line) in lines.enumerate() {
        if line.is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).map_err(|e| bad(format!("line {}: {e}", i + 2)))?;
        if let Some(e) = entry(v).map_err(|why| bad(format!("line {}: {why}", i + 2)))? {
            entries.push(e);
        }
    }
    Ok(Segment { session, entries })
}

/// One entry line; `Ok(None)` for an unknown `f`.
fn entry(mut v: Value) -> std::result::Result<Option<SegEntry>, String> {
    let seq = |v: &Value| v.get("seq").and_then(Value::as_u64).ok_or("bad seq");
    let tag = |v: &Value, allowed: &[u8]| {
        let t = v.get("tag").and_then(Value::as_str).ok_or("bad tag")?;
        match t.as_bytes() {
            [b] if allowed.contains(b) => Ok(*b),
            _ => Err(format!("bad tag {t:?}")),
        }
    };
    let b64 = |v: &Value, field: &str| {
        v.get(field)
            .and_then(Value::as_str)
            .and_then(b64_decode)
            .ok_or_else(|| format!("bad base64 {field}"))
    };
    let Some(f) = v.get("f").and_then(Value::as_str).map(str::to_string) else {
        return Err("no f".into());
    };
    Ok(Some(match f.as_str() {
        "op" => SegEntry::Op {
            seq: seq(&v)?,
            v: v.get_mut("v").map(Value::take).ok_or("no v")?,
        },
        "attach" => SegEntry::Attach {
            seq: seq(&v)?,
            tag: tag(&v, b"oe")?,
            bytes: b64(&v, "v")?,
        },
        "msg" => SegEntry::Msg {
            tag: tag(&v, b"mt")?,
            seq: seq(&v)?,
            v: v.get_mut("v").map(Value::take).ok_or("no v")?,
        },
        "touched" => SegEntry::Touched {
            path: b64(&v, "path")?,
        },
        _ => return Ok(None),
    }))
}

#[cfg(test)]
mod tests;
