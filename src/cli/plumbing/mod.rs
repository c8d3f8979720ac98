//! Plumbing: the CLI's one way to the daemon, or to the store when no daemon
//! serves it, so how a request travels is decided here and nowhere else. Commands
//! build an [`Request`] and hand it to [`Ctx`]:
//!
//! - [`Ctx::session`]: a session op, sent to the explicit socket (`--socket`,
//!   `$TREEFORK_SOCKET`) if there is one, else to the session socket of the
//!   workspace containing `-C PATH` or the current directory;
//! - [`Ctx::store_op`]: a store-wide op, through the daemon serving the store, or
//!   in this process (holding the store lock) when none does;
//! - [`Ctx::explicit`], [`call`], [`call_with_daemon`]: the pieces `mount` and
//!   `umount` combine themselves.
//!
//! Every call returns a typed [`Reply`]. A refusal by the daemon is a
//! [`DaemonError`] carrying the protocol's error code; callers decide on the code
//! ([`DaemonError::is`]), never on message text.
//!
//! Other commands use the library directly only for types, constants and helpers
//! that do no I/O (`Error` in `failure`, duration syntax, the exec capture cap,
//! the output encoding of `runner`, experiment result fitting), never to open the
//! store or reach the daemon.

mod offline;
mod spawn;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use serde::de::DeserializeOwned;
use serde_json::Value;

use treefork::control::{self, Client};

pub use super::failure::DaemonError;
use super::failure::Failure;
use super::flags::Globals;
use super::output::{Reply, progress_bar};

pub use spawn::{call_with_daemon, run_daemon, serve_foreground, wait_daemon_gone};
pub use treefork::command::runner;
pub use treefork::command::{RunCommand, RunResult as ExpResult, RunSpec};
pub use treefork::control::b64_decode;
pub use treefork::verbs::{Request, exec_report};

/// The `--explanation` of this invocation, sent with each of its requests.
static EXPLANATION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Send `text` as the `explanation` of every request this invocation makes.
pub fn set_explanation(text: String) {
    let _ = EXPLANATION.set(text);
}

/// A daemon response as a result: `ok:true` → the response, else its error.
fn checked(v: Value) -> Result<Value> {
    if v.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(v);
    }
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Err(DaemonError {
        code: s("/error/code"),
        message: s("/error/message"),
        error: v.get("error").cloned().unwrap_or(Value::Null),
    }
    .into())
}

/// A progress event of a long request (`mount --from`, `gc`, `fsck`).
pub struct Progress<'a> {
    /// The phase, when the op has several.
    pub phase: Option<&'a str>,
    /// Units done.
    pub done: u64,
    /// Units in all.
    pub total: u64,
    /// Bytes moved so far, when the op counts them (remote transfers).
    pub bytes: Option<u64>,
}

fn progress_of(ev: &Value) -> Option<Progress<'_>> {
    Some(Progress {
        phase: ev["phase"].as_str(),
        done: ev["done"].as_u64()?,
        total: ev["total"].as_u64()?,
        bytes: ev["bytes"].as_u64(),
    })
}

/// Send `op` on the socket at `sock` and type its answer; progress events go to
/// `on_progress`.
fn call_socket<T: DeserializeOwned>(
    sock: &Path,
    op: &Request,
    on_progress: &mut dyn FnMut(Progress),
    no_answer: impl FnOnce() -> String,
) -> Result<Reply<T>> {
    let mut on_event = |ev: &Value| {
        if let Some(p) = progress_of(ev) {
            on_progress(p)
        }
    };
    call_socket_events(sock, op, &mut on_event, no_answer)
}

/// Send `op` on the socket at `sock`, feed every event line to `on_event` as it
/// arrives, and type the answer.
fn call_socket_events<T: DeserializeOwned>(
    sock: &Path,
    op: &Request,
    on_event: &mut dyn FnMut(&Value),
    no_answer: impl FnOnce() -> String,
) -> Result<Reply<T>> {
    let mut c = Client::connect(sock).with_context(no_answer)?;
    let v = checked(c.call_explained(op, EXPLANATION.get().map(String::as_str), on_event)?)?;
    // Someone else moved the session's branch: every command says so (`status`
    // shows it in its own output).
    if let Some(m) = v.pointer("/branch_moved/message").and_then(Value::as_str)
        && !matches!(op, Request::Status(_))
    {
        eprintln!("treefork: warning: {m}");
    }
    Reply::parse(v)
}

/// Call `op` on the control socket `sock` (another session's, e.g. a fork's).
pub fn call_at<T: DeserializeOwned>(sock: &Path, op: &Request) -> Result<Reply<T>> {
    call_socket(sock, op, &mut |_| {}, || {
        format!("nothing answers on {}", sock.display())
    })
}

/// Call `op` on the daemon serving `store`.
pub fn call<T: DeserializeOwned>(
    store: &Path,
    op: &Request,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<Reply<T>> {
    let sock = control::daemon_socket(store)?;
    call_socket(&sock, op, on_progress, || {
        format!(
            "no treefork daemon is running for store {}",
            store.display()
        )
    })
}

/// Whether a daemon answers for `store`.
pub fn daemon_running(store: &Path) -> bool {
    treefork::daemon::ping(store).is_some()
}

/// Detach the dead FUSE mount at `mp` (reached without symlinks); whether it was
/// detached.
pub fn detach(mp: &Path) -> bool {
    treefork::daemon::detach_dead(mp)
}

/// The command's context: the global options and what they resolve to.
pub struct Ctx {
    g: Globals,
}

impl Ctx {
    /// The context of one invocation.
    pub fn new(g: Globals) -> Ctx {
        Ctx { g }
    }

    /// The global options (for a command that runs another command line).
    pub fn globals(&self) -> &Globals {
        &self.g
    }

    /// Whether `--json` was given.
    pub fn json(&self) -> bool {
        self.g.json
    }

    /// The control socket named explicitly (`--socket` or `$TREEFORK_SOCKET`), if
    /// any: then every command talks to it alone (an agent's runtime sets it to the
    /// agent socket; the agent cannot read the user's registry).
    fn explicit_socket(&self) -> Option<PathBuf> {
        self.g.socket.clone().or_else(|| {
            std::env::var_os("TREEFORK_SOCKET")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        })
    }

    /// `v`, unless a socket is named explicitly (`--socket`, `TREEFORK_SOCKET`):
    /// for what may go only to the store's own daemon socket (in the user's
    /// private runtime directory) or stay in this process, never to a socket
    /// someone else may serve (an agent socket, or one an agent planted).
    pub fn own_socket_only<T>(&self, v: Option<T>) -> Option<T> {
        if self.explicit_socket().is_some() {
            None
        } else {
            v
        }
    }

    /// Call `op` on the explicit socket, if one is named.
    pub fn explicit<T: DeserializeOwned>(&self, op: &Request) -> Result<Option<Reply<T>>> {
        let Some(sock) = self.explicit_socket() else {
            return Ok(None);
        };
        call_socket(&sock, op, &mut |_| {}, || {
            format!("cannot connect to control socket {}", sock.display())
        })
        .map(Some)
    }

    /// The store named explicitly (flag or environment), if any.
    fn explicit_store(&self) -> Option<PathBuf> {
        self.g.store.clone().or_else(|| {
            std::env::var_os("TREEFORK_STORE")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        })
    }

    /// The directory of an existing store, canonical. Only `mount` creates a store
    /// ([`store_dir_create`](Self::store_dir_create)): a mistyped `--store` must be an
    /// error naming the path, never an empty store that reports "clean".
    pub fn store_dir(&self) -> Result<PathBuf> {
        let dir = self.store_location()?;
        treefork::daemon::require_store(&dir)?;
        dir.canonicalize()
            .with_context(|| format!("cannot resolve store directory {}", dir.display()))
    }

    /// The store a store-wide op acts on: the explicit one, else the store of the
    /// workspace `-C PATH` or the current directory is in, else the default.
    pub fn op_store_dir(&self) -> Result<PathBuf> {
        if self.explicit_store().is_none()
            && let Ok(ws) = self.workspace()
        {
            return Ok(ws.store);
        }
        self.store_dir()
    }

    /// The store directory, created if absent (for `mount`), canonical.
    pub fn store_dir_create(&self) -> Result<PathBuf> {
        let dir = self.store_location()?;
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create store directory {}", dir.display()))?;
        dir.canonicalize()
            .with_context(|| format!("cannot resolve store directory {}", dir.display()))
    }

    /// Where the store is: `--store`, `$TREEFORK_STORE`, else the XDG default.
    fn store_location(&self) -> Result<PathBuf> {
        let dir = if let Some(s) = self.explicit_store() {
            s
        } else if let Some(s) = std::env::var_os("XDG_DATA_HOME").filter(|s| !s.is_empty()) {
            PathBuf::from(s).join("treefork")
        } else {
            let home =
                std::env::var_os("HOME").ok_or_else(|| anyhow!("HOME is not set; pass --store"))?;
            PathBuf::from(home).join(".local/share/treefork")
        };
        Ok(dir)
    }

    /// The store serving `path`: explicit, else the one registered for the mount
    /// containing `path`, else the default.
    pub fn store_for_path(&self, path: &Path) -> Result<PathBuf> {
        if self.explicit_store().is_none()
            && let Some(r) = control::find_mount(path)
        {
            return Ok(r.store);
        }
        self.store_dir()
    }

    /// The workspace (mount record) that `-C PATH` or the current directory is in.
    fn workspace(&self) -> Result<control::MountRecord> {
        let start = match &self.g.dir {
            Some(d) => d.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let abs = std::path::absolute(&start)?;
        let probe = abs.canonicalize().unwrap_or(abs.clone());
        control::find_mount(&probe)
            .or_else(|| control::find_mount(&abs))
            .ok_or_else(|| {
                Failure::not_found(format!(
                    "{} is not inside a mounted treefork workspace (use -C PATH)",
                    start.display()
                ))
            })
    }

    /// The session of the workspace containing `-C PATH` or the current
    /// directory, if it is inside one.
    pub fn current_session(&self) -> Option<String> {
        self.workspace().ok().map(|w| w.session)
    }

    /// The root of the workspace the session commands act on: asked from the
    /// explicit socket's daemon, else found in the registry.
    pub fn workspace_root(&self) -> Result<PathBuf> {
        type Pong = <treefork::verbs::Ping as control::Verb>::Response;
        if let Some(pong) = self.explicit::<Pong>(&Request::Ping(treefork::verbs::Ping {}))? {
            return pong.body.mountpoint.ok_or_else(|| {
                let sock = self.explicit_socket().unwrap_or_default();
                anyhow!("{} is not a session's control socket", sock.display())
            });
        }
        Ok(self.workspace()?.mountpoint)
    }

    /// The control socket session ops go to: the explicit one, else the session
    /// socket of the workspace (`-C PATH` or the current directory).
    pub fn session_socket(&self) -> Result<PathBuf> {
        if let Some(sock) = self.explicit_socket() {
            return Ok(sock);
        }
        let ws = self.workspace()?;
        match ws.socket {
            Some(s) => Ok(s),
            None => Ok(control::session_socket(&ws.mountpoint)?),
        }
    }

    /// Send a session op to the explicit socket, else to the workspace's session
    /// socket.
    pub fn session<T: DeserializeOwned>(&self, op: Request) -> Result<Reply<T>> {
        self.session_events(op, &mut |_| {})
    }

    /// Like [`session`](Self::session), feeding each event line (e.g. a streamed
    /// `diff` patch) to `on_event` as it arrives.
    pub fn session_events<T: DeserializeOwned>(
        &self,
        op: Request,
        on_event: &mut dyn FnMut(&Value),
    ) -> Result<Reply<T>> {
        let (sock, no_answer) = self.session_endpoint()?;
        call_socket_events(&sock, &op, on_event, || no_answer)
    }

    /// Send request `req` of verb `V` to the session's socket (as
    /// [`session`](Self::session)) through the typed call `control::send_with`:
    /// its response.
    pub fn send<V: control::Verb>(&self, req: &V) -> Result<V::Response> {
        let (sock, no_answer) = self.session_endpoint()?;
        let mut c = Client::connect(&sock).with_context(|| no_answer)?;
        let explanation = EXPLANATION.get().map(String::as_str);
        match control::send_with(&mut c, req, explanation, &mut |_| {}) {
            Ok(a) => {
                if let Some(m) = a
                    .raw
                    .pointer("/branch_moved/message")
                    .and_then(Value::as_str)
                {
                    eprintln!("treefork: warning: {m}");
                }
                Ok(a.response)
            }
            Err(control::SendError::Refused {
                code,
                message,
                error,
            }) => Err(DaemonError {
                code,
                message,
                error,
            }
            .into()),
            Err(control::SendError::Transport(e)) => Err(e.into()),
        }
    }

    /// The socket session ops go to, and what to say when nothing answers there.
    fn session_endpoint(&self) -> Result<(PathBuf, String)> {
        if let Some(sock) = self.explicit_socket() {
            let msg = format!("cannot connect to control socket {}", sock.display());
            return Ok((sock, msg));
        }
        let ws = self.workspace()?;
        let sock = match &ws.socket {
            Some(s) => s.clone(),
            None => control::session_socket(&ws.mountpoint)?,
        };
        let msg = format!(
            "the daemon serving {} does not answer (is it still mounted?)",
            ws.mountpoint.display()
        );
        Ok((sock, msg))
    }

    /// Like [`store_op`](Self::store_op), creating the store first when there is
    /// none (`remote add`: a new machine's first step before `mount --from-remote`).
    pub fn store_op_creating<T: DeserializeOwned>(
        &self,
        op: Request,
        progress: bool,
    ) -> Result<Reply<T>> {
        if self.explicit_socket().is_none() && self.workspace().is_err() {
            let dir = self.store_dir_create()?;
            if !dir.join(treefork::store::STORE_FILE).exists() {
                let _lock = treefork::lock::StoreLock::acquire(&dir)?;
                treefork::store::PackStore::open(&dir)?;
            }
        }
        self.store_op(op, progress)
    }

    /// Run a store-wide op (`sessions`, `gc`, `fsck`, `session rm`): on the explicit
    /// socket if one is named, else through the daemon when one serves the store,
    /// else in this process holding the store lock. With `progress`, phases are
    /// shown as a bar on a terminal, else as a plain line on stderr every few
    /// seconds (`PlainProgress`; neither with `--json`).
    pub fn store_op<T: DeserializeOwned>(&self, op: Request, progress: bool) -> Result<Reply<T>> {
        if let Some(r) = self.explicit(&op)? {
            return Ok(r);
        }
        let store = self.op_store_dir()?;
        let bar = if progress {
            progress_bar("{msg:8} {bar:40} {pos}/{len}", self.json())
        } else {
            indicatif::ProgressBar::hidden()
        };
        let mut plain = super::output::PlainProgress::new(op.name(), progress && !self.json());
        let mut show = |p: Progress| {
            if let Some(phase) = p.phase {
                bar.set_message(phase.to_string());
                bar.set_length(p.total);
                bar.set_position(p.done);
            }
            plain.tick(p.phase, p.done, p.total, p.bytes);
        };
        let r = spawn::call_or_offline(&store, &op, &mut show)?;
        bar.finish_and_clear();
        Ok(r)
    }
}
