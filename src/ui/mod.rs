//! `treefork ui`: a local web page over the store daemon's control socket.
//!
//! Owns the HTTP face of a store: [`auth`] (the peer's uid, the one-time token in
//! the printed URL, the session cookie it is exchanged for, the Host/Origin and
//! CSRF checks, the security headers), [`peer`] (which uid a connection comes
//! from), [`open`] (`--open` without the token in any argv), [`api`] (one
//! endpoint that relays an allowed verb to the daemon), [`events`] (server-sent
//! events: a fingerprint of what a page shows, pushed when it changes) and
//! [`assets`] (the page, its script and its style, embedded in the binary: it
//! works with no network).
//!
//! The server is a client of the control socket like the CLI: it holds no store
//! state, sends requests as the user running it (the daemon's peer check applies),
//! and what it may send is a fixed list ([`api::READS`], [`api::WRITES`]): reads,
//! `promote` forced to a dry run, and two mutations (`checkpoint`, `undo`).
//!
//! Invariants: it listens on 127.0.0.1 only; every request must come from a
//! socket of this process's own uid, carry the session cookie the one-time token
//! was exchanged for (constant-time comparison) and name this server in `Host`
//! (no DNS rebinding); every `/api` request (but the read-only event stream, which
//! `EventSource` cannot give headers) must also carry the CSRF header the page was
//! served with, and a cross-origin `Origin` is refused; content from the store
//! (paths, messages, commands, file text) is rendered by the page as text, never
//! as markup; the token is in no process's argv or environment.

mod api;
mod assets;
mod auth;
mod events;
mod open;
mod peer;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::Router;
use axum::routing::{get, post};

/// How to serve.
pub struct Config {
    /// The store daemon's control socket.
    pub socket: PathBuf,
    /// The store directory (shown on the page).
    pub store: PathBuf,
    /// The port (`None`: 7878, or the next free one of the 20 after it; `Some(0)`:
    /// any free port).
    pub port: Option<u16>,
    /// Open the URL in a browser (`xdg-open` on a private file that redirects).
    pub open: bool,
}

/// What every handler shares.
pub(crate) struct State {
    socket: PathBuf,
    store: String,
    secrets: auth::Secrets,
    port: u16,
}

/// The default port, and how many after it are tried when it is taken.
const DEFAULT_PORT: u16 = 7878;
const PORT_TRIES: u16 = 20;

/// Serve until SIGINT, SIGTERM or SIGHUP (then remove `--open`'s file); prints
/// the URL (with its token) on stdout first.
pub fn serve(cfg: Config) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the web server's runtime")?;
    rt.block_on(run(cfg))
}

async fn bind(port: Option<u16>) -> Result<tokio::net::TcpListener> {
    let ports: Vec<u16> = match port {
        Some(p) => vec![p],
        None => (DEFAULT_PORT..DEFAULT_PORT + PORT_TRIES).collect(),
    };
    let mut last = None;
    for p in ports {
        match tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, p))).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some((p, e)),
        }
    }
    let (p, e) = last.expect("at least one port tried");
    Err(e).with_context(|| match port {
        Some(_) => format!("cannot listen on 127.0.0.1:{p}"),
        None => format!(
            "cannot listen on 127.0.0.1:{DEFAULT_PORT}..{p} (all taken): pass --port N (0: any free port)"
        ),
    })
}

async fn run(cfg: Config) -> Result<()> {
    // Caught from now on, so that `--open`'s file is removed however we stop.
    treefork::command::runner::install_signal_handlers();
    let listener = bind(cfg.port).await?;
    let port = listener.local_addr()?.port();
    let state = Arc::new(State {
        socket: cfg.socket,
        store: cfg.store.display().to_string(),
        secrets: auth::Secrets::new()?,
        port,
    });
    let url = format!(
        "http://127.0.0.1:{port}/?token={}",
        state.secrets.token_hex()
    );
    // Whoever started us may stop reading (a closed pipe must not stop the server).
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "treefork ui: serving store {} at {url}", state.store);
    let _ = writeln!(
        out,
        "(open that URL: it works once, then your browser holds the session. Stop with Ctrl-C.)"
    );
    let opened = if cfg.open {
        let f = open::OpenFile::write(&url)?;
        let _ = writeln!(out, "opening it through {}", f.path().display());
        Some(f)
    } else {
        None
    };
    let _ = out.flush();
    if let Some(f) = &opened {
        f.launch();
    }
    let app = Router::new()
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::asset))
        .route("/api/call", post(api::call))
        .route("/api/events", get(events::events))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::guard,
        ))
        .with_state(state);
    let serving = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<peer::Peer>(),
    );
    let serving = std::pin::pin!(serving.into_future());
    match futures::future::select(serving, std::pin::pin!(interrupted())).await {
        futures::future::Either::Left((r, _)) => r.context("the web server stopped"),
        futures::future::Either::Right(((), _)) => Ok(()),
    }
}

/// Resolves when SIGINT, SIGTERM or SIGHUP arrived.
async fn interrupted() {
    while treefork::command::runner::interrupted() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
