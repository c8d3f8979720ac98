//! The daemon process from the client's side: starting it on demand (detached,
//! logging to `STORE/daemon.log`), waiting for one that is exiting, and running it
//! in this process (`treefork daemon`, `mount --foreground`).
//!
//! Contract between `treefork daemon` and the client that spawned it: the daemon
//! exits with [`EXIT_STORE_LOCKED`] when another daemon holds the store lock (the
//! client then waits for that one and retries), and with 1 on any other error.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::de::DeserializeOwned;

use treefork::daemon::{self, DaemonOptions};

use super::super::Exit;
use super::super::output::Reply;
use super::{DaemonError, Progress, Request, call, daemon_running, offline};

/// Exit status of `treefork daemon` when another daemon holds the store lock
/// (EX_TEMPFAIL).
pub const EXIT_STORE_LOCKED: i32 = 75;

/// The spawned daemon exited before it answered.
#[derive(Debug)]
struct SpawnFailed {
    /// It exited because another daemon holds the store lock.
    locked: bool,
    message: String,
}

impl std::fmt::Display for SpawnFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SpawnFailed {}

/// Wait (bounded) until the daemon of `store` is gone: not answering and its store
/// lock released (it removes its socket shortly before it exits).
pub fn wait_daemon_gone(store: &Path) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15)
        && (daemon_running(store) || !treefork::lock::is_free(store))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How long [`settle`] waits for a daemon that holds the store lock to answer.
const SETTLE_LIMIT: Duration = Duration::from_secs(15);

/// Wait (bounded) until a daemon answers for `store` (true) or none holds its lock
/// (false). A daemon that is exiting holds the lock for a moment after its socket
/// is gone, and one that is starting (spawned by another client) holds it before
/// its socket answers: wait for either rather than racing it.
fn settle(store: &Path) -> bool {
    let start = Instant::now();
    loop {
        if daemon_running(store) {
            return true;
        }
        if treefork::lock::is_free(store) || start.elapsed() >= SETTLE_LIMIT {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ensure_daemon(store: &Path) -> Result<()> {
    let mut attempt = 0;
    loop {
        if settle(store) {
            return Ok(());
        }
        match spawn_daemon(store) {
            Err(e) if attempt < 5 && e.downcast_ref::<SpawnFailed>().is_some_and(|s| s.locked) => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

/// Whether the daemon refused a request because it is shutting down.
fn shutting_down(e: &anyhow::Error) -> bool {
    e.downcast_ref::<DaemonError>()
        .is_some_and(|d| d.is(&treefork::Error::ShuttingDown))
}

/// Whether the request never reached a daemon: the daemon that answered a moment
/// before exited and its socket is gone (connect refused or missing). Nothing was
/// sent, so the request may be tried again on a new daemon.
fn daemon_gone(e: &anyhow::Error) -> bool {
    e.root_cause()
        .downcast_ref::<std::io::Error>()
        .is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            )
        })
}

/// Whether another daemon held the store lock.
fn locked(e: &anyhow::Error) -> bool {
    e.downcast_ref::<treefork::Error>()
        .is_some_and(|e| matches!(e, treefork::Error::Locked { .. }))
}

/// Call `op` on the daemon of `store`, starting one if none runs, and again on a
/// new one if the daemon answering was shutting down or exited before the request
/// reached it.
pub fn call_with_daemon<T: DeserializeOwned>(
    store: &Path,
    op: &Request,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<Reply<T>> {
    let mut attempt = 0;
    loop {
        ensure_daemon(store)?;
        match call(store, op, on_progress) {
            Err(e) if attempt < 3 && (shutting_down(&e) || daemon_gone(&e)) => {
                attempt += 1;
                wait_daemon_gone(store);
            }
            r => return r,
        }
    }
}

/// Run a store-wide op on the daemon of `store` when one serves it, else in this
/// process under the store lock ([`offline::run`]). A daemon that is starting or
/// exiting holds the lock without answering: wait for it to settle rather than
/// fail with "in use by another daemon"; a daemon that starts between the wait and
/// the lock, or answers that it is shutting down, gets the op tried again.
pub fn call_or_offline<T: DeserializeOwned>(
    store: &Path,
    op: &Request,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<Reply<T>> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let start = Instant::now();
        let answering = settle(store);
        // A daemon that held the lock for the whole wait without answering is
        // not on its way out: its "in use" error is the answer, not a retry.
        let retry = attempt < 4 && start.elapsed() < SETTLE_LIMIT;
        if answering {
            match call(store, op, on_progress) {
                Err(e) if retry && (shutting_down(&e) || daemon_gone(&e)) => {
                    wait_daemon_gone(store);
                    continue;
                }
                r => return r,
            }
        }
        match offline::run(store, op, on_progress) {
            Err(e) if retry && locked(&e) => continue,
            r => return Reply::parse(r?),
        }
    }
}

/// The last non-empty line the daemon logged since `from`, without its
/// `treefork: error: ` prefix.
fn last_log_line(log_path: &Path, from: u64) -> String {
    let text = std::fs::read_to_string(log_path).unwrap_or_default();
    let tail = text
        .get(from as usize..)
        .unwrap_or("")
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string();
    // The daemon's own failure line is `treefork: error: MESSAGE`; a log line
    // carries its level before the message.
    match tail.split_once("treefork: error: ") {
        Some((_, m)) => m.to_string(),
        None => tail.split("error: ").last().unwrap_or(&tail).to_string(),
    }
}

fn spawn_daemon(store: &Path) -> Result<()> {
    let log_path = store.join("daemon.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let log_len = log.metadata().map(|m| m.len()).unwrap_or(0);
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg("--store")
        .arg(store)
        .arg("daemon")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    if std::env::var_os("RUST_LOG").is_none() {
        cmd.env("RUST_LOG", "info,fuser::mnt=error");
    }
    // SAFETY: setsid is async-signal-safe; detaches the daemon from our terminal.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().context("cannot start the treefork daemon")?;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if daemon_running(store) {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            if daemon_running(store) {
                return Ok(());
            }
            let tail = last_log_line(&log_path, log_len);
            if status.code() == Some(super::super::failure::DAMAGED) {
                // The store's metadata failed its check at open: its line as is.
                return Err(super::super::failure::Failure::coded("damaged", tail));
            }
            return Err(SpawnFailed {
                locked: status.code() == Some(EXIT_STORE_LOCKED),
                message: format!(
                    "the treefork daemon exited ({status}): {}",
                    if tail.is_empty() {
                        "see daemon.log".into()
                    } else {
                        tail
                    }
                ),
            }
            .into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    bail!(
        "the treefork daemon did not come up within 20 s (see {})",
        log_path.display()
    )
}

/// Run the daemon of `store` in this process (`treefork daemon`); another daemon
/// holding the store ends it with [`EXIT_STORE_LOCKED`].
pub fn run_daemon(store: std::path::PathBuf) -> Result<()> {
    daemon::run(DaemonOptions {
        store,
        initial: None,
        // Started by `mount` (see `ensure_daemon`), the one command that may create a store.
        create: true,
    })
    .map_err(|e| {
        let locked = matches!(e, treefork::Error::Locked { .. });
        let e = anyhow::Error::from(e);
        if locked {
            Exit {
                status: EXIT_STORE_LOCKED,
                error: e,
            }
            .into()
        } else {
            e
        }
    })
}

/// Serve `store` in this process, performing `mount` first (`mount --foreground`).
pub fn serve_foreground(store: std::path::PathBuf, mount: Request) -> Result<()> {
    if daemon_running(&store) {
        bail!(
            "a treefork daemon already serves store {}; mount without --foreground",
            store.display()
        );
    }
    daemon::run(DaemonOptions {
        store,
        initial: Some(mount),
        create: true,
    })?;
    Ok(())
}
