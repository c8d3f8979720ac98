//! The `treefork` command line: a thin client of the store daemon's control socket.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::{Parser, Subcommand};
use serde_json::Value;

use treefork::control::{self, Client, Op};
use treefork::daemon;

#[derive(Parser)]
#[command(
    name = "treefork",
    version,
    about = "Copy-on-write workspaces for agent sessions, over FUSE"
)]
struct Cli {
    /// Store directory [default: $TREEFORK_STORE, else $XDG_DATA_HOME/treefork, else ~/.local/share/treefork]
    #[arg(long, global = true, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    json: bool,
    /// Act on the workspace containing PATH [default: the current directory].
    #[arg(short = 'C', global = true, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// Talk only to this control socket (e.g. a session's agent socket) instead of
    /// the one registered for the workspace [default: $TREEFORK_SOCKET].
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Mount a session workspace (creating the session if needed).
    Mount {
        /// Empty directory to mount on.
        mountpoint: PathBuf,
        /// Session name.
        #[arg(long, default_value = "default")]
        session: String,
        /// Start a new session from a copy of this directory's tree.
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        /// Serve in this process (logs to stderr) instead of a background daemon.
        #[arg(long)]
        foreground: bool,
        /// Also serve the session's control ops on an agent socket at PATH, where
        /// only additive operations are allowed (no branch deletion, unmount, settings).
        #[arg(long, value_name = "PATH")]
        agent_socket: Option<PathBuf>,
        /// Let this uid (besides yours and root) use the agent socket; it owns the file.
        #[arg(long, value_name = "UID", requires = "agent_socket")]
        agent_uid: Option<u32>,
    },
    /// Flush everything and unmount.
    Umount {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// List sessions with their state and size.
    Sessions,
    /// Take a checkpoint; prints its id.
    Checkpoint {
        /// Message.
        #[arg(short, long, default_value = "")]
        message: String,
        /// Why it is taken.
        #[arg(long, default_value = "manual", value_parser = ["manual", "auto", "before-risky", "milestone"])]
        trigger: String,
    },
    /// Checkpoints of this session, newest first.
    Log {
        /// Show at most N.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Paths added, modified or deleted since the last checkpoint.
    Status,
    /// Create a branch at REF (default: HEAD, checkpointing pending changes), or delete one.
    Branch {
        /// Branch name.
        name: String,
        /// Checkpoint id, branch, HEAD or HEAD~N.
        #[arg(value_name = "REF")]
        from: Option<String>,
        /// Delete the branch.
        #[arg(short = 'd', long)]
        delete: bool,
    },
    /// List branches.
    Branches,
    /// Show REF's tree in the live mount (pending changes are saved first).
    Checkout {
        /// Checkpoint id, branch, HEAD or HEAD~N.
        #[arg(value_name = "REF")]
        target: String,
    },
    /// Start a new session from REF (default: a fresh checkpoint) and mount it.
    Fork {
        /// New session name.
        name: String,
        /// Checkpoint id, branch, HEAD or HEAD~N.
        #[arg(long, value_name = "REF")]
        from: Option<String>,
        /// Empty directory to mount the fork on.
        #[arg(long = "mount", value_name = "DIR")]
        mountpoint: PathBuf,
        /// Also serve the session's control ops on an agent socket at PATH, where
        /// only additive operations are allowed (no branch deletion, unmount, settings).
        #[arg(long, value_name = "PATH")]
        agent_socket: Option<PathBuf>,
        /// Let this uid (besides yours and root) use the agent socket; it owns the file.
        #[arg(long, value_name = "UID", requires = "agent_socket")]
        agent_uid: Option<u32>,
    },
    /// Differences between two states (default: HEAD and the live working state).
    Diff {
        /// Old side: checkpoint id, branch, HEAD, HEAD~N or WORKING.
        a: Option<String>,
        /// New side [default: WORKING].
        b: Option<String>,
        /// Per-file line counts.
        #[arg(long, conflicts_with_all = ["name_status", "patch"])]
        stat: bool,
        /// One line per path with A/M/D (default).
        #[arg(long)]
        name_status: bool,
        /// Unified diff of text files.
        #[arg(long, short = 'p', conflicts_with = "name_status")]
        patch: bool,
    },
    /// Rewind the whole tree, or only PATHs, to REF (saving pending changes first).
    Restore {
        /// Checkpoint id, branch, HEAD or HEAD~N.
        #[arg(value_name = "REF")]
        target: String,
        /// Paths to restore (default: everything).
        paths: Vec<PathBuf>,
        /// Only list what would change.
        #[arg(long)]
        dry_run: bool,
    },
    /// Show or change session settings (KEY=VALUE, e.g. auto_checkpoint_ops=100).
    Config {
        /// Settings to change.
        settings: Vec<String>,
    },
    /// Reclaim space: drop objects no session, branch or live checkpoint reaches,
    /// rewrite packs that are mostly garbage. Safe while sessions are mounted.
    Gc {
        /// Only report what would be reclaimed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Verify every reachable object, the index and the records; exit 1 on damage.
    Fsck {
        /// Rebuild the index from the packs and move unusable records aside
        /// (store offline: unmount its sessions first). Never deletes data.
        #[arg(long)]
        repair: bool,
    },
    /// Manage sessions.
    Session {
        #[command(subcommand)]
        cmd: SessionCmd,
    },
    /// Run the store daemon (started automatically by `mount`).
    #[command(hide = true)]
    Daemon,
}

#[derive(Subcommand)]
enum SessionCmd {
    /// Delete a session (not mounted). Its checkpoints stay reachable through
    /// branches and forks that name them; the rest becomes reclaimable by `gc`.
    Rm {
        /// Session name.
        name: String,
    },
}

/// The control socket named explicitly (`--socket` or `$TREEFORK_SOCKET`), if any:
/// then every command talks to it alone (an agent's runtime sets it to the agent
/// socket; the agent cannot read the user's registry).
fn explicit_socket(cli: &Cli) -> Option<PathBuf> {
    cli.socket.clone().or_else(|| {
        std::env::var_os("TREEFORK_SOCKET")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    })
}

/// Absolute form of a path given on the command line (not resolved).
fn absolute_arg(p: &Option<PathBuf>) -> Result<Option<PathBuf>> {
    p.as_ref()
        .map(|p| std::path::absolute(p).with_context(|| format!("bad path {}", p.display())))
        .transpose()
}

/// Call `op` on an explicit socket.
fn socket_call(sock: &Path, op: &Op) -> Result<Value> {
    let mut c = Client::connect(sock)
        .with_context(|| format!("cannot connect to control socket {}", sock.display()))?;
    checked(c.call(op, &mut |_| {})?)
}

/// The store named explicitly (flag or environment), if any.
fn explicit_store(cli: &Cli) -> Option<PathBuf> {
    cli.store.clone().or_else(|| {
        std::env::var_os("TREEFORK_STORE")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    })
}

/// The store serving `path`: explicit, else the one registered for the mount
/// containing `path`, else the default.
fn store_for_path(cli: &Cli, path: &Path) -> Result<PathBuf> {
    if explicit_store(cli).is_none()
        && let Some(r) = control::find_mount(path)
    {
        return Ok(r.store);
    }
    store_dir(cli)
}

fn store_dir(cli: &Cli) -> Result<PathBuf> {
    let dir = if let Some(s) = explicit_store(cli) {
        s
    } else if let Some(s) = std::env::var_os("XDG_DATA_HOME").filter(|s| !s.is_empty()) {
        PathBuf::from(s).join("treefork")
    } else {
        let home =
            std::env::var_os("HOME").ok_or_else(|| anyhow!("HOME is not set; pass --store"))?;
        PathBuf::from(home).join(".local/share/treefork")
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create store directory {}", dir.display()))?;
    dir.canonicalize()
        .with_context(|| format!("cannot resolve store directory {}", dir.display()))
}

/// Absolute path of `p` without requiring it to be reachable (stale mounts).
fn absolute(p: &Path) -> Result<PathBuf> {
    match p.canonicalize() {
        Ok(c) => Ok(c),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("mountpoint {} does not exist", p.display())
        }
        Err(_) => {
            let abs = std::path::absolute(p)?;
            let parent = abs
                .parent()
                .ok_or_else(|| anyhow!("bad path {}", p.display()))?;
            Ok(parent
                .canonicalize()?
                .join(abs.file_name().unwrap_or_default()))
        }
    }
}

/// A failed call: the daemon's error code and message.
#[derive(Debug)]
struct DaemonError {
    code: String,
    message: String,
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DaemonError {}

fn call(store: &Path, op: &Op, on_event: &mut dyn FnMut(&Value)) -> Result<Value> {
    let sock = control::daemon_socket(store)?;
    let mut c = Client::connect(&sock).with_context(|| {
        format!(
            "no treefork daemon is running for store {}",
            store.display()
        )
    })?;
    let v = c.call(op, on_event)?;
    checked(v)
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
    }
    .into())
}

/// Wait (bounded) until the daemon of `store` is gone: not answering and its store
/// lock released (it removes its socket shortly before it exits).
fn wait_daemon_gone(store: &Path) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15)
        && (daemon::ping(store).is_some() || !treefork::lock::is_free(store))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ensure_daemon(store: &Path) -> Result<()> {
    let mut attempt = 0;
    loop {
        if daemon::ping(store).is_some() {
            return Ok(());
        }
        // A daemon that is still exiting holds the lock for a moment after its
        // socket is gone; wait for it rather than racing it.
        wait_daemon_gone(store);
        match spawn_daemon(store) {
            Err(e)
                if attempt < 5 && e.to_string().contains("in use by another treefork daemon") =>
            {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            r => return r,
        }
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
        if daemon::ping(store).is_some() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            if daemon::ping(store).is_some() {
                return Ok(());
            }
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail = text
                .get(log_len as usize..)
                .unwrap_or("")
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .to_string();
            let tail = tail.split("error: ").last().unwrap_or(&tail).to_string();
            bail!(
                "the treefork daemon exited ({status}): {}",
                if tail.is_empty() {
                    "see daemon.log".into()
                } else {
                    tail
                }
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    bail!(
        "the treefork daemon did not come up within 20 s (see {})",
        log_path.display()
    )
}

/// The workspace (mount record) that `-C PATH` or the current directory is in.
fn workspace(cli: &Cli) -> Result<control::MountRecord> {
    let start = match &cli.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let abs = std::path::absolute(&start)?;
    let probe = abs.canonicalize().unwrap_or(abs.clone());
    control::find_mount(&probe)
        .or_else(|| control::find_mount(&abs))
        .ok_or_else(|| {
            anyhow!(
                "{} is not inside a mounted treefork workspace (use -C PATH)",
                start.display()
            )
        })
}

/// Send a session op to the explicit socket, else to the workspace's session socket.
fn session_call(cli: &Cli, op: Op) -> Result<Value> {
    if let Some(sock) = explicit_socket(cli) {
        return socket_call(&sock, &op);
    }
    let ws = workspace(cli)?;
    let sock = match &ws.socket {
        Some(s) => s.clone(),
        None => control::session_socket(&ws.mountpoint)?,
    };
    let mut c = Client::connect(&sock).with_context(|| {
        format!(
            "the daemon serving {} does not answer (is it still mounted?)",
            ws.mountpoint.display()
        )
    })?;
    let v = c.call(&op, &mut |_| {})?;
    checked(v)
}

/// The root of the workspace the session commands act on: asked from the explicit
/// socket's daemon, else found in the registry.
fn workspace_root(cli: &Cli) -> Result<PathBuf> {
    if let Some(sock) = explicit_socket(cli) {
        let v = socket_call(&sock, &Op::Ping)?;
        return v["mountpoint"]
            .as_str()
            .map(PathBuf::from)
            .ok_or_else(|| anyhow!("{} is not a session's control socket", sock.display()));
    }
    Ok(workspace(cli)?.mountpoint)
}

/// `path` (relative to the current directory) as a path relative to the workspace
/// root `ws`: `..` is resolved lexically, and a path outside the workspace is refused
/// (the daemon refuses `..`, absolute paths and paths through symbolic links).
fn workspace_relative(ws: &Path, path: &Path) -> Result<String> {
    let abs = std::path::absolute(path)?;
    let mut norm = PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::ParentDir => {
                norm.pop();
            }
            std::path::Component::CurDir => {}
            other => norm.push(other),
        }
    }
    let rel = norm.strip_prefix(ws).map_err(|_| {
        anyhow!(
            "{} is outside the workspace {}",
            path.display(),
            ws.display()
        )
    })?;
    let rel = rel
        .to_str()
        .ok_or_else(|| anyhow!("{} is not valid UTF-8", path.display()))?;
    Ok(rel.to_string())
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

fn fmt_time(secs: i64) -> String {
    let out = Command::new("date")
        .arg("-d")
        .arg(format!("@{secs}"))
        .arg("+%Y-%m-%d %H:%M:%S")
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => secs.to_string(),
    }
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap());
}

fn human_bytes(n: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut n = n;
    let mut u = 0;
    while n >= 1024.0 && u < units.len() - 1 {
        n /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n:.0} {}", units[u])
    } else {
        format!("{n:.1} {}", units[u])
    }
}

fn run(cli: Cli) -> Result<()> {
    match &cli.cmd {
        Cmd::Daemon => {
            let store = store_dir(&cli)?;
            // Started by `mount` (see `ensure_daemon`), the one command that may create a store.
            daemon::run(daemon::DaemonOptions {
                store,
                initial: None,
                create: true,
            })?;
        }
        Cmd::Mount {
            mountpoint,
            session,
            from,
            foreground,
            agent_socket,
            agent_uid,
        } => {
            let mp = absolute(mountpoint)?;
            let from = match from {
                Some(f) => Some(
                    f.canonicalize()
                        .with_context(|| format!("--from {}: cannot resolve", f.display()))?,
                ),
                None => None,
            };
            let op = Op::Mount {
                session: session.clone(),
                mountpoint: mp.clone(),
                from,
                agent_socket: absolute_arg(agent_socket)?,
                agent_uid: *agent_uid,
            };
            if let Some(sock) = explicit_socket(&cli) {
                let v = socket_call(&sock, &op)?;
                if cli.json {
                    print_json(&v);
                } else {
                    println!("mounted session {session} at {}", mp.display());
                }
                return Ok(());
            }
            let store = store_dir(&cli)?;
            if *foreground {
                if daemon::ping(&store).is_some() {
                    bail!(
                        "a treefork daemon already serves store {}; mount without --foreground",
                        store.display()
                    );
                }
                daemon::run(daemon::DaemonOptions {
                    store,
                    initial: Some(op),
                    create: true,
                })?;
                return Ok(());
            }
            let bar = indicatif::ProgressBar::hidden();
            if std::io::stderr().is_terminal() && !cli.json {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "importing {bar:40} {pos}/{len} entries",
                    )
                    .unwrap(),
                );
            }
            let mut attempt = 0;
            let v = loop {
                ensure_daemon(&store)?;
                let r = call(&store, &op, &mut |ev| {
                    if let (Some(d), Some(t)) = (ev["done"].as_u64(), ev["total"].as_u64()) {
                        bar.set_length(t);
                        bar.set_position(d);
                    }
                });
                match r {
                    Err(e)
                        if attempt < 3
                            && e.downcast_ref::<DaemonError>()
                                .is_some_and(|d| d.code == "shutting_down") =>
                    {
                        attempt += 1;
                        wait_daemon_gone(&store);
                    }
                    r => break r?,
                }
            };
            bar.finish_and_clear();
            if cli.json {
                print_json(&v);
            } else {
                println!("mounted session {session} at {}", mp.display());
            }
        }
        Cmd::Umount { mountpoint } => {
            let mp = absolute(mountpoint)?;
            if let Some(sock) = explicit_socket(&cli) {
                socket_call(
                    &sock,
                    &Op::Umount {
                        mountpoint: mp.clone(),
                    },
                )?;
                println!("unmounted {}", mp.display());
                return Ok(());
            }
            let store = store_for_path(&cli, &mp)?;
            let stale = matches!(std::fs::metadata(&mp), Err(e) if e.raw_os_error() == Some(libc::ENOTCONN));
            let r = if daemon::ping(&store).is_some() {
                call(
                    &store,
                    &Op::Umount {
                        mountpoint: mp.clone(),
                    },
                    &mut |_| {},
                )
                .map(|v| {
                    if v["daemon_exiting"].as_bool() == Some(true) {
                        wait_daemon_gone(&store);
                    }
                })
            } else {
                Err(anyhow!(
                    "no treefork daemon is running for store {}",
                    store.display()
                ))
            };
            match r {
                Ok(()) => {}
                Err(_) if stale && daemon::detach(&mp) => {
                    eprintln!(
                        "treefork: detached stale mount {} (its daemon had died; flushed data is in the store)",
                        mp.display()
                    );
                }
                Err(e) => return Err(e),
            }
            if cli.json {
                print_json(&serde_json::json!({"ok": true, "mountpoint": mp}));
            } else {
                println!("unmounted {}", mp.display());
            }
        }
        Cmd::Checkpoint { message, trigger } => {
            let v = session_call(
                &cli,
                Op::Checkpoint {
                    message: message.clone(),
                    trigger: trigger.clone(),
                },
            )?;
            if cli.json {
                print_json(&v);
            } else {
                println!("{}", v["checkpoint"]["id"].as_str().unwrap_or(""));
            }
        }
        Cmd::Log { limit } => {
            let v = session_call(
                &cli,
                Op::Log {
                    limit: Some(*limit),
                },
            )?;
            if cli.json {
                print_json(&v);
            } else {
                for c in v["checkpoints"].as_array().cloned().unwrap_or_default() {
                    println!(
                        "{}  {}  {:<14} {:>5} changed  {}",
                        short(c["id"].as_str().unwrap_or("")),
                        fmt_time(c["time"].as_i64().unwrap_or(0)),
                        c["trigger"].as_str().unwrap_or(""),
                        c["files_changed"].as_u64().unwrap_or(0),
                        c["message"].as_str().unwrap_or(""),
                    );
                }
            }
        }
        Cmd::Status => {
            let v = session_call(&cli, Op::Status)?;
            if cli.json {
                print_json(&v);
            } else {
                for c in v["changes"].as_array().cloned().unwrap_or_default() {
                    let letter = match c["change"].as_str() {
                        Some("added") => 'A',
                        Some("deleted") => 'D',
                        _ => 'M',
                    };
                    println!("{letter} {}", c["path"].as_str().unwrap_or(""));
                }
            }
        }
        Cmd::Branch { name, from, delete } => {
            let op = if *delete {
                Op::BranchDelete { name: name.clone() }
            } else {
                Op::Branch {
                    name: name.clone(),
                    from: from.clone(),
                }
            };
            let v = session_call(&cli, op)?;
            if cli.json {
                print_json(&v);
            } else if *delete {
                println!("deleted branch {name}");
            } else {
                println!(
                    "branch {name} -> {}",
                    short(v["checkpoint"].as_str().unwrap_or(""))
                );
            }
        }
        Cmd::Branches => {
            let v = session_call(&cli, Op::Branches)?;
            if cli.json {
                print_json(&v);
            } else {
                for b in v["branches"].as_array().cloned().unwrap_or_default() {
                    println!(
                        "{:<40} {}  {}",
                        b["name"].as_str().unwrap_or(""),
                        short(b["checkpoint"].as_str().unwrap_or("")),
                        b["message"].as_str().unwrap_or(""),
                    );
                }
            }
        }
        Cmd::Checkout { target } => {
            let v = session_call(
                &cli,
                Op::Checkout {
                    target: target.clone(),
                },
            )?;
            if cli.json {
                print_json(&v);
            } else {
                if let Some(r) = v["saved"]["ref"].as_str() {
                    println!("saved pending changes as {r}");
                }
                println!(
                    "the workspace now shows {}",
                    short(v["checkpoint"]["id"].as_str().unwrap_or(""))
                );
            }
        }
        Cmd::Fork {
            name,
            from,
            mountpoint,
            agent_socket,
            agent_uid,
        } => {
            // A missing mountpoint is created by the daemon (as `git worktree add` does).
            let mp = absolute(mountpoint).or_else(|_| std::path::absolute(mountpoint))?;
            let v = session_call(
                &cli,
                Op::Fork {
                    name: name.clone(),
                    from: from.clone(),
                    mountpoint: mp.clone(),
                    agent_socket: absolute_arg(agent_socket)?,
                    agent_uid: *agent_uid,
                },
            )?;
            if cli.json {
                print_json(&v);
            } else {
                println!(
                    "forked session {name} from {} at {}",
                    short(v["checkpoint"].as_str().unwrap_or("")),
                    mp.display()
                );
            }
        }
        Cmd::Diff {
            a,
            b,
            stat,
            name_status: _,
            patch,
        } => {
            let mode = if *stat {
                "stat"
            } else if *patch {
                "patch"
            } else {
                "name-status"
            };
            let v = session_call(
                &cli,
                Op::Diff {
                    a: a.clone(),
                    b: b.clone(),
                    mode: Some(mode.into()),
                },
            )?;
            if cli.json {
                print_json(&v);
            } else if *patch {
                print!("{}", v["patch"].as_str().unwrap_or(""));
            } else {
                let entries = v["entries"].as_array().cloned().unwrap_or_default();
                let (mut adds, mut dels) = (0, 0);
                for e in &entries {
                    let path = e["path"].as_str().unwrap_or("");
                    if *stat {
                        if e["binary"].as_bool() == Some(true) {
                            println!(" {path} | binary");
                        } else {
                            let (a, d) = (
                                e["added"].as_u64().unwrap_or(0),
                                e["removed"].as_u64().unwrap_or(0),
                            );
                            adds += a;
                            dels += d;
                            println!(
                                " {path} | {} {}{}",
                                a + d,
                                "+".repeat(a.min(40) as usize),
                                "-".repeat(d.min(40) as usize)
                            );
                        }
                    } else {
                        let letter = match e["change"].as_str() {
                            Some("added") => 'A',
                            Some("deleted") => 'D',
                            _ => 'M',
                        };
                        println!("{letter}\t{path}");
                    }
                }
                if *stat {
                    println!(
                        " {} paths changed, {adds} insertions(+), {dels} deletions(-)",
                        entries.len()
                    );
                }
            }
        }
        Cmd::Restore {
            target,
            paths,
            dry_run,
        } => {
            let ws = workspace_root(&cli)?;
            let rel: Vec<String> = paths
                .iter()
                .map(|p| workspace_relative(&ws, p))
                .collect::<Result<_>>()?;
            let v = session_call(
                &cli,
                Op::Restore {
                    target: target.clone(),
                    paths: rel,
                    dry_run: *dry_run,
                },
            )?;
            if cli.json {
                print_json(&v);
            } else {
                if let Some(r) = v["saved"]["ref"].as_str() {
                    println!("saved pending changes as {r}");
                }
                let verb = if *dry_run { "would" } else { "did" };
                for c in v["changes"].as_array().cloned().unwrap_or_default() {
                    let what = match c["change"].as_str() {
                        Some("added") => "restore",
                        Some("deleted") => "remove",
                        _ => "rewind",
                    };
                    println!("{verb} {what} {}", c["path"].as_str().unwrap_or(""));
                }
            }
        }
        Cmd::Config { settings } => {
            let set = if settings.is_empty() {
                None
            } else {
                let mut m = serde_json::Map::new();
                for s in settings {
                    let (k, val) = s
                        .split_once('=')
                        .ok_or_else(|| anyhow!("expected KEY=VALUE, got {s:?}"))?;
                    let val: Value = serde_json::from_str(val).unwrap_or(Value::String(val.into()));
                    m.insert(k.to_string(), val);
                }
                Some(m)
            };
            let v = session_call(&cli, Op::Config { set })?;
            if cli.json {
                print_json(&v);
            } else if let Some(o) = v["config"].as_object() {
                for (k, val) in o {
                    println!("{k}={val}");
                }
            }
        }
        Cmd::Gc { dry_run } => {
            let dry_run = *dry_run;
            let v = store_op(&cli, Op::Gc { dry_run }, |s, p| {
                let r = treefork::gc::gc(s, &treefork::gc::Offline, dry_run, p)?;
                Ok(serde_json::json!({ "gc": r }))
            })?;
            if cli.json {
                print_json(&v);
            } else {
                let g = &v["gc"];
                let n = |k: &str| g[k].as_u64().unwrap_or(0);
                println!(
                    "{}{} of {} objects unreachable ({}), {} checkpoint(s); packs: {} deleted, {} rewritten ({} copied); store {} -> {}",
                    if dry_run { "dry run: " } else { "" },
                    n("objects_reclaimed"),
                    n("objects_before"),
                    human_bytes(n("bytes_reclaimed") as f64),
                    n("checkpoints_reclaimed"),
                    n("packs_deleted"),
                    n("packs_repacked"),
                    human_bytes(n("bytes_copied") as f64),
                    human_bytes(n("disk_before") as f64),
                    human_bytes(n("disk_after") as f64),
                );
            }
        }
        Cmd::Fsck { repair } => {
            let repair = *repair;
            let v = store_op(&cli, Op::Fsck { repair }, |s, p| {
                let r = treefork::fsck::fsck(s, repair, p)?;
                let clean = r.clean();
                Ok(serde_json::json!({ "fsck": r, "clean": clean }))
            })?;
            let f = &v["fsck"];
            if cli.json {
                print_json(&v);
            } else {
                let n = |k: &str| f[k].as_u64().unwrap_or(0);
                println!(
                    "{} packs, {} records, {} index entries; {} reachable objects verified ({}); {} unindexed records (garbage)",
                    n("packs"),
                    n("records"),
                    n("index_entries"),
                    n("objects_verified"),
                    human_bytes(n("bytes_verified") as f64),
                    n("unindexed_records"),
                );
                for t in f["torn_tails"].as_array().into_iter().flatten() {
                    println!(
                        "note: torn tail (crash leftover, harmless): {}",
                        t.as_str().unwrap_or("")
                    );
                }
                for r in f["repaired"].as_array().into_iter().flatten() {
                    println!("repaired: {}", r.as_str().unwrap_or(""));
                }
                for p in f["problems"].as_array().into_iter().flatten() {
                    let s = |k: &str| p[k].as_str().unwrap_or("");
                    println!(
                        "DAMAGED: {}{}{}: {}",
                        s("owner"),
                        if s("path").is_empty() {
                            String::new()
                        } else {
                            format!(" path {}", s("path"))
                        },
                        if s("object").is_empty() {
                            String::new()
                        } else {
                            format!(" object {}", s("object"))
                        },
                        s("error")
                    );
                }
            }
            let problems = f["problems"].as_array().map_or(0, |a| a.len());
            if problems > 0 {
                bail!(
                    "the store has {problems} problem(s){}",
                    if repair {
                        " left after repair"
                    } else {
                        "; `treefork fsck --repair` rebuilds what can be rebuilt"
                    }
                );
            }
            if !cli.json {
                println!("store is clean");
            }
        }
        Cmd::Session {
            cmd: SessionCmd::Rm { name },
        } => {
            let name = name.clone();
            let v = store_op(&cli, Op::SessionRm { name: name.clone() }, |s, _| {
                treefork::session::remove_record(s, &name)?;
                Ok(serde_json::json!({ "removed": name }))
            })?;
            if cli.json {
                print_json(&v);
            } else {
                println!("removed session {name} (run `treefork gc` to reclaim its space)");
            }
        }
        Cmd::Sessions => {
            let v = if let Some(sock) = explicit_socket(&cli) {
                socket_call(&sock, &Op::Sessions)?
            } else if let store = store_dir(&cli)?
                && daemon::ping(&store).is_some()
            {
                call(&store, &Op::Sessions, &mut |_| {})?
            } else {
                let store = store_dir(&cli)?;
                let _lock = treefork::lock::StoreLock::acquire(&store)?;
                let s = treefork::store::PackStore::open(&store)?;
                let list: Vec<Value> = treefork::session::list_records(&s)?
                    .into_iter()
                    .map(|r| {
                        serde_json::json!({"name": r.name, "state": "stopped", "mountpoint": null,
                        "bytes": r.bytes, "inodes": r.inodes, "updated": r.updated, "root": r.root})
                    })
                    .collect();
                serde_json::json!({"ok": true, "sessions": list})
            };
            if cli.json {
                print_json(&v);
            } else {
                println!(
                    "{:<24} {:<8} {:>10} {:>8}  MOUNTPOINT",
                    "SESSION", "STATE", "SIZE", "FILES"
                );
                for s in v["sessions"].as_array().cloned().unwrap_or_default() {
                    println!(
                        "{:<24} {:<8} {:>10} {:>8}  {}",
                        s["name"].as_str().unwrap_or(""),
                        s["state"].as_str().unwrap_or(""),
                        human_bytes(s["bytes"].as_f64().unwrap_or(0.0)),
                        s["inodes"].as_i64().unwrap_or(0),
                        s["mountpoint"].as_str().unwrap_or("-"),
                    );
                }
            }
        }
    }
    Ok(())
}

/// Run a store-level op: through the daemon when one serves the store, else in
/// this process (holding the store lock), with a progress bar on a terminal.
fn store_op(
    cli: &Cli,
    op: Op,
    offline: impl FnOnce(
        &treefork::store::PackStore,
        &mut dyn FnMut(&str, u64, u64),
    ) -> treefork::Result<Value>,
) -> Result<Value> {
    if let Some(sock) = explicit_socket(cli) {
        return socket_call(&sock, &op);
    }
    let store = store_dir(cli)?;
    let bar = indicatif::ProgressBar::hidden();
    if std::io::stderr().is_terminal() && !cli.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg:8} {bar:40} {pos}/{len}").unwrap(),
        );
    }
    let mut show = |phase: &str, done: u64, total: u64| {
        bar.set_message(phase.to_string());
        bar.set_length(total);
        bar.set_position(done);
    };
    let v = if daemon::ping(&store).is_some() {
        call(&store, &op, &mut |ev| {
            if let (Some(p), Some(d), Some(t)) = (
                ev["phase"].as_str(),
                ev["done"].as_u64(),
                ev["total"].as_u64(),
            ) {
                show(p, d, t);
            }
        })?
    } else {
        if !store.join(treefork::store::STORE_FILE).exists() {
            bail!("{} is not a treefork store", store.display());
        }
        let _lock = treefork::lock::StoreLock::acquire(&store)?;
        let s = if matches!(op, Op::Fsck { repair: true }) {
            treefork::store::PackStore::open_for_repair(&store)?
        } else {
            treefork::store::PackStore::open(&store)?
        };
        offline(&s, &mut show)?
    };
    bar.finish_and_clear();
    Ok(v)
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp_millis()
        .init();
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("treefork: error: {e:#}");
        std::process::exit(1);
    }
}
