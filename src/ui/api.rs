//! `POST /api/call`: one allowed verb relayed to the daemon.
//!
//! The body is a request as the control protocol spells it (`{"op": NAME,
//! "session": S, ...fields}`, without `v`). Only the verbs in [`READS`] and
//! [`WRITES`] pass; `promote` always goes as a dry run and `diff` never streams.
//! The fields are checked by parsing them as the verb table's request type (the
//! daemon checks them again). The answer is the daemon's, as JSON, with HTTP 200
//! whether it is `ok` or an error object; a request refused here is a 400 with
//! the same error shape. A file `show` sends as events comes back in the answer's
//! `text` (its first MiB; `null` when it is not UTF-8, `truncated` when cut).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use treefork::control::{Client, b64_decode};
use treefork::verbs::Request;

/// Verbs that read: what the pages show.
pub(crate) const READS: &[&str] = &[
    "sessions",
    "session_show",
    "timeline",
    "op_log",
    "log",
    "branches",
    "status",
    "diff",
    "show",
    "experiment_show",
    "messages",
    "history",
    "history_show",
    "promote",
];

/// Verbs that change a session: the page's buttons.
pub(crate) const WRITES: &[&str] = &["checkpoint", "undo"];

/// What the UI records as the reason of its mutations.
const EXPLANATION: &str = "from treefork ui";

/// A checked request: the line to send, and whether it changes anything.
#[derive(Debug, PartialEq)]
pub(crate) struct Checked {
    pub request: Value,
    pub writes: bool,
}

/// Check `body` against the lists and the verb's request type.
pub(crate) fn check(body: Value) -> Result<Checked, String> {
    let Value::Object(mut o) = body else {
        return Err("the request must be a JSON object".into());
    };
    let name = match o.get("op") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err("the request needs \"op\" (a verb name)".into()),
    };
    let writes = WRITES.contains(&name.as_str());
    if !writes && !READS.contains(&name.as_str()) {
        return Err(format!("{name} is not available in the web UI"));
    }
    let session = match o.remove("session") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err("\"session\" must be a string".into()),
    };
    match name.as_str() {
        "promote" => {
            o.insert("dry_run".into(), Value::Bool(true));
        }
        "diff" => {
            o.remove("stream");
        }
        _ => {}
    }
    let op: Request =
        serde_json::from_value(Value::Object(o)).map_err(|e| format!("{name}: {e}"))?;
    let mut request = serde_json::to_value(&op).map_err(|e| e.to_string())?;
    if let (Some(s), Some(r)) = (session, request.as_object_mut()) {
        r.insert("session".into(), Value::String(s));
    }
    Ok(Checked { request, writes })
}

fn error(code: &str, message: &str) -> Value {
    json!({"ok": false, "error": {"code": code, "message": message}})
}

/// Send `c` on the daemon's socket (a new connection per request) and return its
/// answer; a daemon that does not answer is an `io` error object naming the store.
pub(crate) fn relay(st: &super::State, c: &Checked) -> Value {
    let mut client = match Client::connect(&st.socket) {
        Ok(c) => c,
        Err(e) => {
            return error(
                "no_daemon",
                &format!(
                    "no treefork daemon is running for store {} ({e}): mount a session to start one",
                    st.store
                ),
            );
        }
    };
    let explanation = c.writes.then_some(EXPLANATION);
    // `show` sends a file's bytes as `data` events (base64): keep the first
    // SHOW_LIMIT of them for the page.
    let mut content = Vec::new();
    let mut cut = false;
    let mut on_event = |ev: &Value| {
        if ev["event"] == "data"
            && let Some(bytes) = ev["data"].as_str().and_then(b64_decode)
        {
            let room = SHOW_LIMIT.saturating_sub(content.len());
            cut |= bytes.len() > room;
            content.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    };
    match client.call_explained(&c.request, explanation, &mut on_event) {
        Ok(mut v) => {
            if v["kind"] == "file" && c.request["op"] == "show" {
                v["text"] = match String::from_utf8(content) {
                    Ok(t) => Value::String(t),
                    Err(_) => Value::Null,
                };
                v["truncated"] = Value::Bool(cut);
            }
            v
        }
        Err(e) => error(e.code(), &e.to_string()),
    }
}

/// How much of a file the page shows.
const SHOW_LIMIT: usize = 1 << 20;

/// The handler.
pub(crate) async fn call(State(st): State<Arc<super::State>>, Json(body): Json<Value>) -> Response {
    let checked = match check(body) {
        Ok(c) => c,
        Err(why) => {
            return (StatusCode::BAD_REQUEST, Json(error("bad_request", &why))).into_response();
        }
    };
    let st2 = st.clone();
    match tokio::task::spawn_blocking(move || relay(&st2, &checked)).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(error("io", &format!("the request failed: {e}"))),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_verbs_pass() {
        for op in [
            "umount",
            "session_rm",
            "gc",
            "restore",
            "exec_begin",
            "shutdown",
        ] {
            assert!(check(json!({"op": op})).is_err(), "{op}");
        }
        assert!(check(json!({"op": "sessions"})).is_ok());
        assert!(
            check(json!({"op": "checkpoint", "session": "s"}))
                .unwrap()
                .writes
        );
        assert!(
            !check(json!({"op": "timeline", "session": "s"}))
                .unwrap()
                .writes
        );
    }

    #[test]
    fn promote_is_always_a_dry_run_and_diff_never_streams() {
        let c = check(json!({"op": "promote", "session": "s", "dry_run": false})).unwrap();
        assert_eq!(c.request["dry_run"], json!(true));
        assert_eq!(c.request["session"], json!("s"));
        let d = check(json!({"op": "diff", "session": "s", "stream": true, "mode": "patch"}));
        assert!(d.unwrap().request.get("stream").is_none());
    }

    #[test]
    fn malformed_requests_are_refused_with_a_reason() {
        assert!(check(json!([1])).unwrap_err().contains("object"));
        assert!(check(json!({"session": "s"})).unwrap_err().contains("op"));
        assert!(check(json!({"op": "timeline", "session": 3})).is_err());
        let e = check(json!({"op": "timeline", "bogus": 1})).unwrap_err();
        assert!(e.contains("timeline"), "{e}");
    }
}
