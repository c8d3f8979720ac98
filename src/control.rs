//! Control protocol: versioned newline-delimited JSON over a Unix socket.
//!
//! Owns: request parsing (bounded, never panics), response framing, socket paths,
//! the mount registry, roles ([`Role::allows`], the one place ops are classified as
//! user-only or also allowed to agents), the per-connection limits ([`RateLimit`],
//! [`MAX_CONNECTIONS`]), and the client used by the CLI. A request is one line `{"v":1,"op":"...",...}`;
//! the server may send event lines (`{"event":"progress",...}`) and then exactly one
//! response line: `{"ok":true,...}` or `{"ok":false,"error":{"code":..,"message":..}}`.
//! See docs/protocol.md.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// Protocol version spoken by this build.
pub const PROTOCOL_VERSION: u64 = 1;
/// Largest request line accepted, in bytes.
pub const MAX_REQUEST: usize = 1 << 20;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Liveness check; answers the daemon's pid and store.
    Ping,
    /// Mount a session (creating it, optionally from a host directory).
    Mount {
        /// Session name.
        session: String,
        /// Absolute mountpoint.
        mountpoint: PathBuf,
        /// Host directory to import when the session is created.
        #[serde(default)]
        from: Option<PathBuf>,
        /// Also serve the session on an agent-role socket at this absolute path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_socket: Option<PathBuf>,
        /// A uid allowed on the agent socket besides the daemon's and root (the socket
        /// file is then owned by it, mode 0600).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_uid: Option<u32>,
    },
    /// Flush and unmount.
    Umount {
        /// Absolute mountpoint.
        mountpoint: PathBuf,
    },
    /// List sessions.
    Sessions,
    /// Flush everything, unmount everything, exit.
    Shutdown,
    /// Take a checkpoint of the session.
    Checkpoint {
        /// Message.
        #[serde(default)]
        message: String,
        /// Why: manual, auto, before-risky, milestone.
        #[serde(default = "default_trigger")]
        trigger: String,
    },
    /// The session's checkpoints, newest first.
    Log {
        /// At most this many.
        #[serde(default)]
        limit: Option<usize>,
    },
    /// Paths changed since the last checkpoint.
    Status,
    /// Create a branch at a ref (default: HEAD, checkpointing pending changes first).
    Branch {
        /// Branch name.
        name: String,
        /// Ref it points at.
        #[serde(default)]
        from: Option<String>,
    },
    /// List branches.
    Branches,
    /// Delete a branch.
    BranchDelete {
        /// Branch name.
        name: String,
    },
    /// Make the live mount show a ref's tree (saving pending changes first).
    Checkout {
        /// The ref.
        #[serde(rename = "ref")]
        target: String,
    },
    /// Create a new session from a ref (default: a fresh checkpoint) and mount it.
    Fork {
        /// New session name.
        name: String,
        /// Ref to start from.
        #[serde(default)]
        from: Option<String>,
        /// Where to mount it (absolute, empty directory).
        mountpoint: PathBuf,
        /// Also serve the session on an agent-role socket at this absolute path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_socket: Option<PathBuf>,
        /// A uid allowed on the agent socket besides the daemon's and root (the socket
        /// file is then owned by it, mode 0600).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_uid: Option<u32>,
    },
    /// Differences between two states (refs, or `WORKING`).
    Diff {
        /// Old side (default HEAD).
        #[serde(default)]
        a: Option<String>,
        /// New side (default WORKING).
        #[serde(default)]
        b: Option<String>,
        /// `name-status` (default), `stat` or `patch`.
        #[serde(default)]
        mode: Option<String>,
    },
    /// Rewind the tree, or some paths of it, to a ref.
    Restore {
        /// The ref.
        #[serde(rename = "ref")]
        target: String,
        /// Paths relative to the workspace root (empty: everything).
        #[serde(default)]
        paths: Vec<String>,
        /// Only report what would change.
        #[serde(default)]
        dry_run: bool,
    },
    /// Garbage-collect the store (mark & sweep from every root, then repack).
    Gc {
        /// Only report what would be reclaimed.
        #[serde(default)]
        dry_run: bool,
    },
    /// Verify the store (and with `repair`, fix what can be fixed; store offline only).
    Fsck {
        /// Rebuild the index from packs and move unusable records aside.
        #[serde(default)]
        repair: bool,
    },
    /// Delete a session record (not mounted); its checkpoints become reclaimable.
    SessionRm {
        /// Session name.
        name: String,
    },
    /// Show (and with `set`, change) the session's settings.
    Config {
        /// Fields to change.
        #[serde(default)]
        set: Option<serde_json::Map<String, Value>>,
    },
}

fn default_trigger() -> String {
    "manual".into()
}

impl Op {
    /// The op's wire name (`"branch_delete"`, ...).
    pub fn name(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("op").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_default()
    }
}

/// Who is calling, decided by the socket a request arrives on.
///
/// The store socket and each session's own socket serve the **user** (the mounting
/// user and root): every op. A session's optional agent socket serves the **agent**
/// role, which may only add history, never drop it ("nothing is ever lost"): it can
/// take checkpoints, create branches and forks, and check out or restore (both save
/// pending changes as an `auto/...` checkpoint first), but not delete branches,
/// unmount, mount, shut down, list the store's sessions, or change settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Full rights.
    User,
    /// Additive operations only.
    Agent,
}

impl Role {
    /// Whether this role may run `op`. The one place roles are decided: an
    /// exhaustive match over every op and every field (no `_`/`..`), so a new op or
    /// a new argument does not compile until it is classified here.
    pub fn allows(&self, op: &Op) -> bool {
        let agent = match op {
            Op::Ping
            | Op::Status
            | Op::Branches
            | Op::Checkpoint {
                message: _,
                trigger: _,
            }
            | Op::Log { limit: _ }
            | Op::Diff {
                a: _,
                b: _,
                mode: _,
            } => true,
            // Creates a new name only: an existing name is refused (`conflict`)
            // for every role, so no op moves or overwrites a branch.
            Op::Branch { name: _, from: _ } => true,
            // Both save pending changes as an `auto/before-...` checkpoint first.
            Op::Checkout { target: _ } => true,
            Op::Restore {
                target: _,
                paths: _,
                dry_run: _,
            } => true,
            // A fork adds a session; granting sockets to uids stays with the user.
            Op::Fork {
                name: _,
                from: _,
                mountpoint: _,
                agent_socket,
                agent_uid,
            } => agent_socket.is_none() && agent_uid.is_none(),
            // Showing is fine; changing settings is the user's.
            Op::Config { set } => set.is_none(),
            // Store-wide maintenance and anything that drops history.
            Op::BranchDelete { name: _ }
            | Op::SessionRm { name: _ }
            | Op::Gc { dry_run: _ }
            | Op::Fsck { repair: _ }
            | Op::Umount { mountpoint: _ }
            | Op::Sessions
            | Op::Shutdown
            | Op::Mount {
                session: _,
                mountpoint: _,
                from: _,
                agent_socket: _,
                agent_uid: _,
            } => false,
        };
        match self {
            Role::User => true,
            Role::Agent => agent,
        }
    }

    /// The refusal of `op` for this role.
    pub fn refusal(&self, op: &Op) -> Error {
        let what = match op {
            Op::Config { .. } => "config with \"set\"".to_string(),
            Op::Fork { .. } => "fork with agent_socket/agent_uid".to_string(),
            op => op.name(),
        };
        Error::Forbidden(format!(
            "{what} is not allowed on an agent socket (agent role: additive operations only)"
        ))
    }
}

/// Requests a connection may send at once before it is rate limited.
pub const RATE_BURST: f64 = 200.0;
/// Sustained requests per second per connection (the bucket's refill rate).
pub const RATE_PER_SEC: f64 = 1000.0;
/// Connections served at once per socket; the next one gets `busy` and is closed.
pub const MAX_CONNECTIONS: usize = 64;

/// A token bucket: `burst` requests at once, refilled at `per_sec`.
#[derive(Debug, Clone)]
pub struct RateLimit {
    tokens: f64,
    burst: f64,
    per_sec: f64,
    last: Instant,
}

impl RateLimit {
    /// A full bucket.
    pub fn new(burst: f64, per_sec: f64) -> RateLimit {
        RateLimit {
            tokens: burst,
            burst,
            per_sec,
            last: Instant::now(),
        }
    }

    /// Take one token at `now`; false when the bucket is empty.
    pub fn allow_at(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.per_sec).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Take one token now.
    pub fn allow(&mut self) -> bool {
        self.allow_at(Instant::now())
    }
}

/// A request: an op, optionally aimed at a session by name (on the store socket;
/// a session socket implies its session).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Target session.
    pub session: Option<String>,
    /// The operation.
    pub op: Op,
}

/// A protocol-level error before an op runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtoError {
    /// Machine-readable code.
    pub code: &'static str,
    /// Human message.
    pub message: String,
}

/// Parse one request line. Never panics.
pub fn parse_request(line: &[u8]) -> std::result::Result<Op, ProtoError> {
    parse(line).map(|r| r.op)
}

/// Parse one request line with its optional session. Never panics.
pub fn parse(line: &[u8]) -> std::result::Result<Request, ProtoError> {
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
    let op: Op = serde_json::from_value(Value::Object(body)).map_err(|e| {
        let m = e.to_string();
        if m.contains("unknown variant") {
            err("unknown_op", format!("unknown op {op:?}"))
        } else {
            err("bad_request", format!("bad arguments for {op:?}: {m}"))
        }
    })?;
    Ok(Request { session, op })
}

/// Encode a request line.
pub fn encode_request(op: &Op) -> Vec<u8> {
    let mut v = serde_json::to_value(op).expect("op serializes");
    v.as_object_mut()
        .unwrap()
        .insert("v".into(), json!(PROTOCOL_VERSION));
    let mut line = serde_json::to_vec(&v).unwrap();
    line.push(b'\n');
    line
}

/// Error response body.
pub fn error_response(code: &str, message: &str) -> Value {
    json!({"ok": false, "error": {"code": code, "message": message}})
}

/// The runtime directory for sockets: `$XDG_RUNTIME_DIR/treefork` or
/// `/tmp/treefork-<uid>`, created 0700.
pub fn runtime_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("treefork"),
        _ => PathBuf::from(format!("/tmp/treefork-{}", unsafe { libc::getuid() })),
    };
    std::fs::create_dir_all(&base).map_err(|e| Error::io(&base, e))?;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(&base, e))?;
    Ok(base)
}

/// The daemon socket of the store at `store` (an absolute, canonical path).
pub fn daemon_socket(store: &Path) -> Result<PathBuf> {
    let h = blake3::hash(store.as_os_str().as_encoded_bytes());
    Ok(runtime_dir()?.join(format!("d-{}.sock", &h.to_hex()[..16])))
}

/// What the daemon records about one of its mounts, for clients that start from a
/// path (`umount MOUNTPOINT`, and commands run inside a workspace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MountRecord {
    /// The mountpoint.
    pub mountpoint: PathBuf,
    /// The store serving it.
    pub store: PathBuf,
    /// The session mounted there.
    pub session: String,
    /// The session's control socket.
    #[serde(default)]
    pub socket: Option<PathBuf>,
    /// The session's agent-role socket, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_socket: Option<PathBuf>,
}

/// The control socket of the session mounted at `mp`.
pub fn session_socket(mp: &Path) -> Result<PathBuf> {
    let h = blake3::hash(mp.as_os_str().as_encoded_bytes());
    Ok(runtime_dir()?.join(format!("s-{}.sock", &h.to_hex()[..16])))
}

fn mount_record_path(mp: &Path) -> Result<PathBuf> {
    let h = blake3::hash(mp.as_os_str().as_encoded_bytes());
    Ok(runtime_dir()?.join(format!("m-{}.json", &h.to_hex()[..16])))
}

/// Register a mount (daemon side).
pub fn register_mount(rec: &MountRecord) -> Result<()> {
    let p = mount_record_path(&rec.mountpoint)?;
    std::fs::write(&p, serde_json::to_vec(rec).unwrap()).map_err(|e| Error::io(&p, e))
}

/// Remove a mount registration (daemon side).
pub fn unregister_mount(mp: &Path) {
    if let Ok(p) = mount_record_path(mp) {
        let _ = std::fs::remove_file(p);
    }
}

/// The registered mount at `path` or at its closest registered ancestor.
pub fn find_mount(path: &Path) -> Option<MountRecord> {
    let mut cur = Some(path);
    while let Some(p) = cur {
        if let Ok(bytes) = std::fs::read(mount_record_path(p).ok()?)
            && let Ok(r) = serde_json::from_slice::<MountRecord>(&bytes)
            && r.mountpoint == p
        {
            return Some(r);
        }
        cur = p.parent();
    }
    None
}

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

    /// Send `op`; feed event lines to `on_event`; return the final response.
    pub fn call(&mut self, op: &Op, on_event: &mut dyn FnMut(&Value)) -> Result<Value> {
        let io = |e| Error::io("control socket", e);
        if let Err(e) = self.stream.get_mut().write_all(&encode_request(op)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let op = Op::Mount {
            session: "a".into(),
            mountpoint: "/m".into(),
            from: None,
            agent_socket: None,
            agent_uid: None,
        };
        let line = encode_request(&op);
        assert_eq!(parse_request(line.trim_ascii_end()).unwrap(), op);
    }

    #[test]
    fn errors_are_precise() {
        assert_eq!(parse_request(b"{").unwrap_err().code, "bad_request");
        assert_eq!(
            parse_request(br#"{"v":2,"op":"ping"}"#).unwrap_err().code,
            "unsupported_version"
        );
        assert_eq!(
            parse_request(br#"{"v":1,"op":"dance"}"#).unwrap_err().code,
            "unknown_op"
        );
        assert_eq!(
            parse_request(br#"{"op":"ping"}"#).unwrap_err().code,
            "bad_request"
        );
        assert_eq!(
            parse_request(br#"{"v":1,"op":"umount"}"#).unwrap_err().code,
            "bad_request"
        );
        assert_eq!(parse_request(br#"[1]"#).unwrap_err().code, "bad_request");
        assert_eq!(parse_request(br#"{"v":1,"op":"ping"}"#).unwrap(), Op::Ping);
    }

    #[test]
    fn old_clients_and_old_daemons_interoperate() {
        // An old client's mount (no agent fields) parses.
        let op = parse_request(br#"{"v":1,"op":"mount","session":"a","mountpoint":"/m"}"#).unwrap();
        assert!(matches!(
            op,
            Op::Mount {
                agent_socket: None,
                agent_uid: None,
                ..
            }
        ));
        // A new client without agent fields sends none (old daemons deny unknown fields).
        let line = encode_request(&op);
        assert!(!String::from_utf8_lossy(&line).contains("agent"));
        let op = parse_request(
            br#"{"v":1,"op":"fork","name":"f","mountpoint":"/m","agent_socket":"/a.sock","agent_uid":7}"#,
        )
        .unwrap();
        assert!(matches!(
            op,
            Op::Fork {
                agent_uid: Some(7),
                ..
            }
        ));
    }

    #[test]
    fn roles() {
        let p = |s: &str| parse_request(s.as_bytes()).unwrap();
        let additive = [
            r#"{"v":1,"op":"ping"}"#,
            r#"{"v":1,"op":"checkpoint","message":"m"}"#,
            r#"{"v":1,"op":"log"}"#,
            r#"{"v":1,"op":"status"}"#,
            r#"{"v":1,"op":"diff","a":"HEAD~1"}"#,
            r#"{"v":1,"op":"branch","name":"b"}"#,
            r#"{"v":1,"op":"branches"}"#,
            r#"{"v":1,"op":"fork","name":"f","mountpoint":"/m"}"#,
            r#"{"v":1,"op":"checkout","ref":"HEAD~1"}"#,
            r#"{"v":1,"op":"restore","ref":"HEAD","paths":["a"]}"#,
            r#"{"v":1,"op":"config"}"#,
        ];
        let destructive = [
            r#"{"v":1,"op":"branch_delete","name":"b"}"#,
            r#"{"v":1,"op":"umount","mountpoint":"/m"}"#,
            r#"{"v":1,"op":"mount","session":"s","mountpoint":"/m"}"#,
            r#"{"v":1,"op":"shutdown"}"#,
            r#"{"v":1,"op":"sessions"}"#,
            r#"{"v":1,"op":"config","set":{"auto_checkpoint_ops":1}}"#,
            r#"{"v":1,"op":"fork","name":"f","mountpoint":"/m","agent_socket":"/a"}"#,
            r#"{"v":1,"op":"fork","name":"f","mountpoint":"/m","agent_uid":1}"#,
        ];
        for l in additive {
            assert!(Role::Agent.allows(&p(l)), "agent refused {l}");
            assert!(Role::User.allows(&p(l)), "user refused {l}");
        }
        for l in destructive {
            assert!(!Role::Agent.allows(&p(l)), "agent allowed {l}");
            assert!(Role::User.allows(&p(l)), "user refused {l}");
            let e = Role::Agent.refusal(&p(l));
            assert_eq!(e.code(), "forbidden");
            assert!(
                e.to_string().contains("not allowed on an agent socket"),
                "{e}"
            );
        }
        assert!(
            Role::Agent
                .refusal(&p(destructive[0]))
                .to_string()
                .starts_with("branch_delete is not allowed")
        );
    }

    #[test]
    fn rate_limit_bucket() {
        let t0 = Instant::now();
        let mut r = RateLimit::new(3.0, 10.0);
        r.last = t0;
        assert!((0..3).all(|_| r.allow_at(t0)));
        assert!(!r.allow_at(t0));
        // 100 ms refills one token; never more than the burst.
        assert!(r.allow_at(t0 + Duration::from_millis(100)));
        assert!(!r.allow_at(t0 + Duration::from_millis(100)));
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| r.allow_at(later)).count(), 3);
    }

    proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_request(&bytes);
        }

        #[test]
        fn parser_never_panics_on_jsonish(s in r#"\{"v":1,"op":"[a-z_]{0,8}"(,"[a-z]{1,10}":("[^"]{0,10}"|[0-9]{1,5}|null|\[\]))*\}"#) {
            let _ = parse_request(s.as_bytes());
        }
    }
}
