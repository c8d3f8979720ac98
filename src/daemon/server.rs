//! The control server: listening sockets, connections and requests.
//!
//! Owns: the acceptor of the store's socket (a thread of its own; every mount's
//! session and agent sockets share one, `acceptor.rs`), with a connection cap; per connection the peer
//! check (uid from `SO_PEERCRED`), the rate bound and the request size bound; per
//! request parsing, the session binding of session sockets and the role check, then
//! [`Daemon::handle_request`]. (Agent socket files are bound by
//! [`super::agent_socket`].)

use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use super::Daemon;
use crate::control::{self, MountFor, Role};
use crate::error::{Error, Result};
use crate::verbs::Request;

/// What one listening control socket serves.
pub(crate) struct SocketCtx {
    /// The session it is bound to (`None`: the store socket).
    pub(crate) bound: Option<String>,
    pub(crate) role: Role,
    /// A uid allowed besides the daemon's and root (agent sockets only).
    pub(crate) extra_uid: Option<u32>,
    /// Connections being served.
    pub(crate) conns: AtomicUsize,
}

/// The uid, gid and pid of the process at the other end of a Unix socket
/// (SO_PEERCRED).
fn peer_cred(s: &UnixStream) -> Option<(u32, u32, u32)> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some((cred.uid, cred.gid, cred.pid as u32))
}

impl Daemon {
    /// Serve `listener` on its own thread: one thread per connection, at most
    /// [`control::MAX_CONNECTIONS`] at once (the next gets `busy` and is closed).
    /// Session sockets (`stop_on_error`) stop when their listening socket is shut
    /// down at unmount. Returns the socket's context (its open connection count).
    pub(crate) fn accept(
        self: Arc<Self>,
        listener: UnixListener,
        ctx: SocketCtx,
        stop_on_error: bool,
    ) -> Arc<SocketCtx> {
        let ctx = Arc::new(ctx);
        let served = ctx.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => self.take(stream, &ctx),
                    Err(_) if stop_on_error => break,
                    Err(e) => log::warn!("accept: {e}"),
                }
            }
        });
        served
    }

    /// Serve one accepted connection on a thread of its own, unless its socket
    /// already serves [`control::MAX_CONNECTIONS`] (it then gets `busy`).
    pub(crate) fn take(self: &Arc<Self>, mut stream: UnixStream, ctx: &Arc<SocketCtx>) {
        if ctx.conns.fetch_add(1, Ordering::SeqCst) >= control::MAX_CONNECTIONS {
            ctx.conns.fetch_sub(1, Ordering::SeqCst);
            let e = Error::Busy(format!(
                "this socket already serves {} connections; retry later",
                control::MAX_CONNECTIONS
            ));
            log::warn!("control connection refused: {e}");
            let _ = control::write_line(
                &mut stream,
                &control::error_response(e.code(), &e.to_string()),
            );
            return;
        }
        // An accepted stream may inherit the listener's O_NONBLOCK (the shared
        // acceptor's listeners are non-blocking); connections block.
        let _ = stream.set_nonblocking(false);
        let d = self.clone();
        let c = ctx.clone();
        let spawned = std::thread::Builder::new().spawn(move || {
            d.connection(stream, &c);
            c.conns.fetch_sub(1, Ordering::SeqCst);
        });
        // Out of threads (a pids limit): this connection is closed, the acceptor
        // (shared by every mount) goes on.
        if let Err(e) = spawned {
            ctx.conns.fetch_sub(1, Ordering::SeqCst);
            log::error!("control connection dropped: cannot start its thread: {e}");
        }
    }

    fn connection(&self, stream: UnixStream, ctx: &SocketCtx) {
        let _ = stream.set_nonblocking(false);
        let Ok(mut out) = stream.try_clone() else {
            return;
        };
        // Besides the 0600 socket in a 0700 directory: only the user who runs the
        // daemon (who mounted) and root may drive it, and on an agent socket the
        // agent's uid when one was given.
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let peer = match peer_cred(&stream) {
            Some(p) if p.0 == me || p.0 == 0 || Some(p.0) == ctx.extra_uid => p,
            who => {
                let who = who.map(|(uid, _, _)| uid);
                log::warn!("control connection from uid {who:?} refused (daemon runs as uid {me})");
                let also = ctx
                    .extra_uid
                    .map(|u| format!(", uid {u}"))
                    .unwrap_or_default();
                let e = Error::Forbidden(format!(
                    "only uid {me} (the mounting user){also} or root may use this socket"
                ));
                let _ = control::write_line(
                    &mut out,
                    &control::error_response(e.code(), &e.to_string()),
                );
                return;
            }
        };
        let mut limit = control::RateLimit::new(control::RATE_BURST, control::RATE_PER_SEC);
        let mut reader = BufReader::new(stream);
        loop {
            let mut line = Vec::new();
            let n = match (&mut reader)
                .take(control::MAX_REQUEST as u64 + 1)
                .read_until(b'\n', &mut line)
            {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if n > control::MAX_REQUEST {
                // Too large: answer and drop the connection (the rest is unread).
                let r = control::error_response(
                    "too_large",
                    &format!("request exceeds {} bytes", control::MAX_REQUEST),
                );
                let _ = control::write_line(&mut out, &r);
                return;
            }
            self.unanswered.fetch_add(1, Ordering::SeqCst);
            let resp = match self.request(ctx, peer, &line, &mut limit, &out) {
                Ok(v) => v,
                Err(e) => control::error_of(&e),
            };
            let written = control::write_line(&mut out, &resp).is_ok();
            self.unanswered.fetch_sub(1, Ordering::SeqCst);
            if !written {
                return;
            }
        }
    }

    /// Answer one request line received on a socket described by `ctx`: rate bound,
    /// parse, session binding, role, then the op. Events go to `out`.
    fn request(
        &self,
        ctx: &SocketCtx,
        peer: (u32, u32, u32),
        line: &[u8],
        limit: &mut control::RateLimit,
        out: &UnixStream,
    ) -> Result<Value> {
        if !limit.allow() {
            return Err(Error::RateLimited(format!(
                "too many requests: at most {} per second per connection (bursts of {}); retry shortly",
                control::RATE_PER_SEC,
                control::RATE_BURST
            )));
        }
        let req = match control::parse::<Request>(line.trim_ascii()) {
            Ok(r) => r,
            Err(e) => return Ok(control::error_response(e.code, &e.message)),
        };
        if !req.op.allowed(ctx.role) {
            log::info!(
                "session {}: refused {} on an agent socket",
                ctx.bound.as_deref().unwrap_or("?"),
                req.op.name()
            );
            return Err(req.op.refusal());
        }
        // An agent mounts only onto directories its socket's uid owns, whatever
        // the peer's uid (checked on the resolved directory itself, see
        // `mountpoint`).
        let who = MountFor::of(
            ctx.role,
            (peer.0, peer.1),
            ctx.extra_uid,
            // SAFETY: geteuid has no preconditions.
            unsafe { libc::geteuid() },
        );
        let role = match ctx.role {
            Role::User => "user",
            Role::Agent => "agent",
        };
        let actor = crate::oplog::Actor::peer(role, peer.0, peer.2);
        let target = match (&ctx.bound, &req.session) {
            (Some(b), Some(s)) if b != s => {
                return Err(Error::Invalid(format!(
                    "this socket serves session {b}, not {s}"
                )));
            }
            (Some(b), _) => Some(b.clone()),
            (None, s) => s.clone(),
        };
        let is_ping = matches!(req.op, Request::Ping(_));
        let mut ev_out = out.try_clone().ok();
        let mut events = |v: Value| {
            if let Some(o) = ev_out.as_mut() {
                let _ = control::write_line(o, &v);
            }
        };
        let mut v = self.handle_request(
            who,
            &actor,
            req.explanation.as_deref(),
            target.as_deref(),
            req.op,
            &mut events,
        )?;
        let o = v.as_object_mut().unwrap();
        o.insert("ok".into(), json!(true));
        if is_ping {
            o.insert("role".into(), json!(role));
        }
        Ok(v)
    }
}
