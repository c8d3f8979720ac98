//! The client the CLI uses: one connection, one request at a time, events fed to a
//! callback, then the response.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use serde::Serialize;

use super::protocol::encode_request;
use crate::error::{Error, Result};

/// A connected client.
pub struct Client {
    stream: BufReader<UnixStream>,
}

impl Client {
    /// Connect to a socket.
    pub fn connect(path: &Path) -> std::io::Result<Client> {
        let s = UnixStream::connect(path)?;
        Ok(Client {
            stream: BufReader::new(s),
        })
    }

    /// Send `op` (a `verbs::Request`) with this process's explanation; feed event lines
    /// to `on_event`; return the final response.
    pub fn call<T: Serialize + ?Sized>(
        &mut self,
        op: &T,
        on_event: &mut dyn FnMut(&Value),
    ) -> Result<Value> {
        self.call_explained(op, None, on_event)
    }

    /// Like [`call`](Self::call), with the free text recorded with the operation
    /// in the session's log (the CLI's `--explanation`, or a relayed client's own,
    /// as the MCP bridge sends).
    pub fn call_explained<T: Serialize + ?Sized>(
        &mut self,
        op: &T,
        explanation: Option<&str>,
        on_event: &mut dyn FnMut(&Value),
    ) -> Result<Value> {
        self.send(&encode_request(op, explanation), on_event)
    }

    fn send(&mut self, line: &[u8], on_event: &mut dyn FnMut(&Value)) -> Result<Value> {
        let io = |e| Error::io("control socket", e);
        if let Err(e) = self.stream.get_mut().write_all(line) {
            // A refused connection (`forbidden`, `busy`) is answered and closed at
            // once, possibly before the request is written: read that answer.
            let mut line = String::new();
            return match self.stream.read_line(&mut line) {
                Ok(n) if n > 0 => serde_json::from_str(&line).map_err(|_| io(e)),
                _ => Err(io(e)),
            };
        }
        loop {
            let mut line = String::new();
            let n = self.stream.read_line(&mut line).map_err(io)?;
            if n == 0 {
                return Err(Error::io(
                    "control socket",
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "daemon closed the connection",
                    ),
                ));
            }
            let v: Value = serde_json::from_str(&line)
                .map_err(|e| Error::corrupt("daemon response", e.to_string()))?;
            if v.get("event").is_some() {
                on_event(&v);
                continue;
            }
            return Ok(v);
        }
    }

    /// Set a read timeout.
    pub fn set_timeout(&self, d: Option<Duration>) {
        let _ = self.stream.get_ref().set_read_timeout(d);
    }
}

/// Why a typed request ([`send`]) got no answer of its type.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The daemon answered with an error (`{"ok": false, "error": {...}}`).
    #[error("{message}")]
    Refused {
        /// The error's code (`invalid`, `not_found`, ...).
        code: String,
        /// Its message.
        message: String,
        /// The whole error object (with any extra fields).
        error: Value,
    },
    /// The socket failed, or the answer was not the verb's response.
    #[error(transparent)]
    Transport(#[from] Error),
}

/// A typed answer and the raw one it was read from (notices such as
/// `branch_moved` beside the response's own fields).
#[derive(Debug)]
pub struct Answered<R> {
    /// The verb's response.
    pub response: R,
    /// The answer as sent (`ok` included).
    pub raw: Value,
}

/// Send request `req` of verb `V` on `client` and type its answer (the CLI's and
/// the MCP server's one typed call).
pub fn send<V: crate::control::Verb>(
    client: &mut Client,
    req: &V,
) -> std::result::Result<V::Response, SendError> {
    send_with(client, req, None, &mut |_| {}).map(|a| a.response)
}

/// Like [`send`], with an explanation recorded with the operation, event lines
/// fed to `on_event`, and the raw answer kept.
pub fn send_with<V: crate::control::Verb>(
    client: &mut Client,
    req: &V,
    explanation: Option<&str>,
    on_event: &mut dyn FnMut(&Value),
) -> std::result::Result<Answered<V::Response>, SendError> {
    let mut op = serde_json::to_value(req)
        .map_err(|e| Error::Invalid(format!("{}: request: {e}", V::NAME)))?;
    match op.as_object_mut() {
        Some(o) => o.insert("op".into(), Value::from(V::NAME)),
        None => {
            return Err(Error::Invalid(format!("{}: a request is an object", V::NAME)).into());
        }
    };
    let raw = client.call_explained(&op, explanation, on_event)?;
    if raw.get("ok").and_then(Value::as_bool) != Some(true) {
        let s = |p: &str| {
            raw.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        return Err(SendError::Refused {
            code: s("/error/code"),
            message: s("/error/message"),
            error: raw.get("error").cloned().unwrap_or(Value::Null),
        });
    }
    let response = serde_json::from_value(raw.clone())
        .map_err(|e| Error::corrupt(format!("{} answer", V::NAME), format!("{e}: {raw}")))?;
    Ok(Answered { response, raw })
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;

    /// A daemon that answers each request line with the next of `answers`;
    /// the requests it read.
    fn daemon(dir: &Path, answers: Vec<Value>) -> std::thread::JoinHandle<Vec<Value>> {
        let l = UnixListener::bind(dir.join("s.sock")).unwrap();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            for a in answers {
                let (s, _) = l.accept().unwrap();
                let mut r = BufReader::new(s);
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                seen.push(serde_json::from_str(&line).unwrap());
                let mut out = serde_json::to_vec(&a).unwrap();
                out.push(b'\n');
                r.get_mut().write_all(&out).unwrap();
            }
            seen
        })
    }

    #[derive(Serialize, serde::Deserialize, schemars::JsonSchema)]
    struct Probe {
        id: String,
    }

    #[derive(Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
    struct Probed {
        n: u32,
    }

    impl crate::control::Verb for Probe {
        const NAME: &'static str = "probe";
        const KIND: crate::control::Kind = crate::control::Kind::Store;
        const AGENT: crate::control::Agent = crate::control::Agent::Yes;
        const RECORDS: bool = false;
        type Response = Probed;

        fn agent_may(&self) -> bool {
            true
        }
    }

    #[test]
    fn send_names_the_verb_and_types_the_answer_or_the_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let answers = vec![
            serde_json::json!({"ok": true, "n": 7}),
            serde_json::json!({"ok": true, "n": "seven"}),
            serde_json::json!({"ok": false,
                "error": {"code": "not_found", "message": "no such bisect", "extra": 1}}),
        ];
        let t = daemon(dir.path(), answers);
        let sock = dir.path().join("s.sock");
        let probe = || Probe {
            id: "3fa2c1".into(),
        };
        let mut sent = Vec::new();
        for _ in 0..3 {
            let mut c = Client::connect(&sock).unwrap();
            sent.push(send(&mut c, &probe()));
        }
        let seen = t.join().unwrap();
        assert!(
            seen.iter()
                .all(|v| v["op"] == "probe" && v["id"] == "3fa2c1" && v["v"] == 1)
        );
        let mut sent = sent.into_iter();
        assert_eq!(sent.next().unwrap().unwrap().n, 7);
        assert!(matches!(
            sent.next().unwrap(),
            Err(SendError::Transport(Error::Corrupt { .. }))
        ));
        match sent.next().unwrap() {
            Err(SendError::Refused { code, error, .. }) => {
                assert_eq!(code, "not_found");
                assert_eq!(error["extra"], 1);
            }
            r => panic!("{r:?}"),
        }
    }
}
