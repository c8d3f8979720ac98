//! The bridge: one session control socket, and tool errors.
//!
//! Every tool call becomes control requests on the one socket the server was
//! started with (a session socket or an agent socket), so the daemon applies that
//! socket's role to each of them; the bridge decides nothing itself. A request is
//! a typed [`Request`] (a verb of the table in `treefork::verbs`), sent through
//! [`Client`] (the CLI's client) with the request's own `explanation`, on a new
//! connection per request; event lines go to a callback and the response comes
//! back with `ok` removed.
//!
//! A refusal comes back as a [`ToolError`] carrying the daemon's whole error
//! object (`code`, `message` and detail fields such as `BASELINE_CONFLICT`'s
//! `paths`), never rewritten.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use treefork::control::{Client, Role, SendError};
use treefork::verbs::Request;

/// A failed tool call: the protocol's error object.
#[derive(Debug, Clone)]
pub struct ToolError {
    /// `{"code", "message", ...detail}`.
    pub error: Value,
}

impl ToolError {
    /// An error with a protocol code and a message.
    pub fn new(code: &str, message: impl Into<String>) -> ToolError {
        ToolError {
            error: json!({"code": code, "message": message.into()}),
        }
    }

    /// Invalid arguments of a tool (`bad_request`).
    pub fn bad_args(message: impl std::fmt::Display) -> ToolError {
        ToolError::new("bad_request", format!("bad arguments: {message}"))
    }

    /// The protocol code.
    pub fn code(&self) -> &str {
        self.error["code"].as_str().unwrap_or("")
    }

    /// The message.
    pub fn message(&self) -> &str {
        self.error["message"].as_str().unwrap_or("")
    }
}

/// A tool's outcome: the structured result, or the error.
pub type Outcome = Result<Value, ToolError>;

/// The session behind the socket: where it is, and the socket's role.
#[derive(Debug, Clone)]
pub struct Bridge {
    socket: PathBuf,
    /// The socket's role, as the daemon answered `ping`.
    pub role: Role,
    /// The workspace root (the session's mountpoint).
    pub root: PathBuf,
}

impl Bridge {
    /// Ask the daemon on `socket` which session and role it serves.
    pub fn connect(socket: &Path) -> Result<Bridge, ToolError> {
        let mut b = Bridge {
            socket: socket.to_path_buf(),
            role: Role::Agent,
            root: PathBuf::new(),
        };
        let pong = b.call(&treefork::verbs::Ping {}.into(), None, &mut |_| {})?;
        b.role = match pong["role"].as_str() {
            Some("user") => Role::User,
            // Anything else is treated as the narrower role.
            _ => Role::Agent,
        };
        b.root = match pong["mountpoint"].as_str() {
            Some(m) => PathBuf::from(m),
            None => {
                return Err(ToolError::new(
                    "invalid",
                    format!("{} is not a session's control socket", socket.display()),
                ));
            }
        };
        Ok(b)
    }

    /// Send `op` with an optional explanation; feed each event line to
    /// `on_event`; the response without `ok`, or its error.
    pub fn call(
        &self,
        op: &Request,
        explanation: Option<&str>,
        on_event: &mut dyn FnMut(&Value),
    ) -> Outcome {
        let failed = |e: treefork::Error| {
            ToolError::new(e.code(), format!("{}: {e}", self.socket.display()))
        };
        let mut client = Client::connect(&self.socket).map_err(|e| {
            ToolError::new(
                "io",
                format!("control socket {}: connect: {e}", self.socket.display()),
            )
        })?;
        checked(
            client
                .call_explained(op, explanation, on_event)
                .map_err(failed)?,
        )
    }
}

impl Bridge {
    /// Send request `req` of verb `V` (no explanation, events dropped) through
    /// the typed call `control::send`: its response, or its error.
    pub fn send<V: treefork::control::Verb>(&self, req: &V) -> Result<V::Response, ToolError> {
        let mut client = Client::connect(&self.socket).map_err(|e| {
            ToolError::new(
                "io",
                format!("control socket {}: connect: {e}", self.socket.display()),
            )
        })?;
        treefork::control::send(&mut client, req).map_err(|e| match e {
            SendError::Refused { error, .. } if error.is_object() => ToolError { error },
            SendError::Refused { code, message, .. } => ToolError::new(&code, message),
            SendError::Transport(e) => {
                ToolError::new(e.code(), format!("{}: {e}", self.socket.display()))
            }
        })
    }
}

/// `{"ok":true,...}` → the rest; else the error object.
fn checked(mut v: Value) -> Outcome {
    if v.get("ok").and_then(Value::as_bool) == Some(true) {
        if let Some(o) = v.as_object_mut() {
            o.remove("ok");
        }
        return Ok(v);
    }
    match v.get("error") {
        Some(e) if e.is_object() => Err(ToolError { error: e.clone() }),
        _ => Err(ToolError::new("corrupt", format!("unexpected answer: {v}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_the_daemons_detail() {
        let e = checked(json!({"ok": false, "error": {"code": "BASELINE_CONFLICT",
            "message": "m", "paths": [{"path": "a", "how": "committed"}]}}))
        .unwrap_err();
        assert_eq!(e.code(), "BASELINE_CONFLICT");
        assert_eq!(e.error["paths"][0]["path"], "a");
        let ok = checked(json!({"ok": true, "head": null})).unwrap();
        assert_eq!(ok, json!({"head": null}));
    }

    /// A request goes out as the typed op with `v` and this call's explanation;
    /// events reach the callback; the answer comes back without `ok`.
    #[test]
    fn calls_send_the_typed_op_with_its_explanation() {
        use std::io::{BufRead, BufReader, Write};
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let daemon = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut r = BufReader::new(conn);
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let w = r.get_mut();
            w.write_all(b"{\"event\":\"progress\",\"n\":1}\n{\"ok\":true,\"x\":2}\n")
                .unwrap();
            serde_json::from_str::<Value>(&line).unwrap()
        });
        let b = Bridge {
            socket: socket.clone(),
            role: Role::Agent,
            root: PathBuf::new(),
        };
        let mut events = Vec::new();
        let op = Request::from(treefork::verbs::OpLog { limit: Some(3) });
        let r = b
            .call(&op, Some("why"), &mut |e| events.push(e.clone()))
            .unwrap();
        assert_eq!(r, json!({"x": 2}));
        assert_eq!(events, vec![json!({"event": "progress", "n": 1})]);
        let sent = daemon.join().unwrap();
        assert_eq!(
            sent,
            json!({"v": 1, "op": "op_log", "limit": 3, "explanation": "why"})
        );
        // No daemon: an `io` error naming the socket.
        std::fs::remove_file(&socket).unwrap();
        let e = b.call(&op, None, &mut |_| {}).unwrap_err();
        assert_eq!(e.code(), "io");
        assert!(e.message().contains("s.sock"), "{}", e.message());
    }
}
