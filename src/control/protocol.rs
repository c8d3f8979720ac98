//! Protocol: request parsing (bounded, never panics) into the verb table's op
//! type (`crate::verbs::Request`), encoding and response framing, and the protocol
//! version.
//!
//! A request is one line `{"v":1,"op":"...",...}`; the server may send event lines
//! (`{"event":"progress",...}`) and then exactly one response line: `{"ok":true,...}`
//! or `{"ok":false,"error":{"code":..,"message":..}}`. See docs/protocol.md.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Protocol version spoken by this build.
pub const PROTOCOL_VERSION: u64 = 1;
/// Largest request line accepted, in bytes.
pub const MAX_REQUEST: usize = 1 << 20;

/// The envelope of one request line: its op (`T`: `verbs::Request`), optionally aimed
/// at a session by name (on the store socket; a session socket implies its session),
/// and its explanation.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope<T> {
    /// Target session.
    pub session: Option<String>,
    /// The operation.
    pub op: T,
    /// Free text recorded with the operation in the session's log.
    pub explanation: Option<String>,
}

/// A protocol-level error before an op runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtoError {
    /// Machine-readable code.
    pub code: &'static str,
    /// Human message.
    pub message: String,
}

/// Parse one request line into the op type `T`. Never panics.
pub fn parse_request<T: DeserializeOwned>(line: &[u8]) -> std::result::Result<T, ProtoError> {
    parse(line).map(|r| r.op)
}

/// Parse one request line with its optional session. Never panics.
pub fn parse<T: DeserializeOwned>(line: &[u8]) -> std::result::Result<Envelope<T>, ProtoError> {
    let err = |code, message: String| ProtoError { code, message };
    if line.len() > MAX_REQUEST {
        return Err(err(
            "too_large",
            format!("request exceeds {MAX_REQUEST} bytes"),
        ));
    }
    let v: Value = serde_json::from_slice(line)
        .map_err(|e| err("bad_request", format!("malformed JSON: {e}")))?;
    let Some(obj) = v.as_object() else {
        return Err(err("bad_request", "request must be a JSON object".into()));
    };
    match obj.get("v").and_then(Value::as_u64) {
        Some(PROTOCOL_VERSION) => {}
        Some(other) => {
            return Err(err(
                "unsupported_version",
                format!(
                    "protocol version {other} is not supported (this daemon speaks {PROTOCOL_VERSION})"
                ),
            ));
        }
        None => {
            return Err(err(
                "bad_request",
                "missing protocol version field \"v\"".into(),
            ));
        }
    }
    let op = obj
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| err("bad_request", "missing \"op\"".into()))?
        .to_string();
    let mut body = obj.clone();
    body.remove("v");
    // `session` names the target session of any op; `mount` takes it as its argument.
    let taken = if op == "mount" {
        body.get("session").cloned()
    } else {
        body.remove("session")
    };
    let session = match taken {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(err("bad_request", "\"session\" must be a string".into())),
    };
    let explanation = match body.remove("explanation") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(err(
                "bad_request",
                "\"explanation\" must be a string".into(),
            ));
        }
    };
    let op: T = serde_json::from_value(Value::Object(body)).map_err(|e| {
        let m = e.to_string();
        if m.contains("unknown variant") {
            err("unknown_op", format!("unknown op {op:?}"))
        } else {
            err("bad_request", format!("bad arguments for {op:?}: {m}"))
        }
    })?;
    Ok(Envelope {
        session,
        op,
        explanation,
    })
}

/// Encode a request line (`op`: a `verbs::Request`), with the free text recorded with
/// the operation in the session's log, if any.
pub fn encode_request<T: Serialize + ?Sized>(op: &T, explanation: Option<&str>) -> Vec<u8> {
    let mut v = serde_json::to_value(op).expect("op serializes");
    let o = v.as_object_mut().unwrap();
    o.insert("v".into(), json!(PROTOCOL_VERSION));
    if let Some(e) = explanation {
        o.insert("explanation".into(), json!(e));
    }
    let mut line = serde_json::to_vec(&v).unwrap();
    line.push(b'\n');
    line
}

/// Write `v` and a newline to `out` in one `write_all`: a JSON line on a socket
/// goes out as one message (`writeln!` with a `Value`'s `Display` issues one write
/// call per token, each a syscall and a wake-up of the reader).
pub fn write_line(out: &mut impl std::io::Write, v: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(v).expect("a JSON value serializes");
    line.push(b'\n');
    out.write_all(&line)
}

/// Error response body.
pub fn error_response(code: &str, message: &str) -> Value {
    json!({"ok": false, "error": {"code": code, "message": message}})
}

/// The error response for `e`: its code and message, plus the fields of
/// [`crate::Error::detail`] (e.g. `paths` of `BASELINE_CONFLICT`).
pub fn error_of(e: &crate::Error) -> Value {
    let mut v = error_response(e.code(), &e.to_string());
    if let Some(d) = e.detail() {
        v["error"].as_object_mut().unwrap().extend(d);
    }
    v
}
