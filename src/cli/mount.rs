//! `mount`, `umount`, `sessions`: workspaces and the daemon that serves them.

use std::path::PathBuf;

use anyhow::Context;
use treefork::fs::ring::{InUse, Transport};

use super::flags::AgentArgs;
use super::output::{human_bytes, progress_bar};
use super::paths;
use super::plumbing;
use super::prelude::*;

/// Mount a session workspace (creating the session if needed).
#[derive(clap::Args)]
pub struct Mount {
    /// Empty directory to mount on.
    mountpoint: PathBuf,
    /// Session name.
    #[arg(long, default_value = "default")]
    session: String,
    /// Start a new session from a copy of this directory's tree.
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
    /// Create the session from a remote ref REMOTE/REF (a pushed session, or a
    /// new session at a remote branch); file contents arrive on first read.
    #[arg(long, value_name = "REMOTE/REF", conflicts_with = "from")]
    from_remote: Option<String>,
    /// Serve in this process (logs to stderr) instead of a background daemon.
    #[arg(long)]
    foreground: bool,
    #[command(flatten)]
    agent: AgentArgs,
    #[command(flatten)]
    policy: super::lifecycle::PolicyArgs,
    /// How the mount talks to the kernel: auto (FUSE over io_uring when
    /// /sys/module/fuse/parameters/enable_uring is Y, else /dev/fuse), uring (fail
    /// if the ring cannot be used) or dev. Default: $TREEFORK_TRANSPORT, else auto.
    #[arg(long, value_name = "auto|uring|dev", value_parser = parse_transport)]
    transport: Option<Transport>,
}

fn parse_transport(s: &str) -> std::result::Result<Transport, String> {
    Transport::parse(s).ok_or_else(|| format!("{s}: expected auto, uring or dev"))
}

/// `--transport`, else `TREEFORK_TRANSPORT` when it names one, else none (the
/// daemon's default).
fn transport_arg(arg: Option<Transport>) -> Result<Option<Transport>> {
    if arg.is_some() {
        return Ok(arg);
    }
    match std::env::var("TREEFORK_TRANSPORT") {
        Ok(v) if !v.trim().is_empty() => Ok(Some(
            parse_transport(v.trim()).map_err(|e| anyhow!("TREEFORK_TRANSPORT={e}"))?,
        )),
        _ => Ok(None),
    }
}

/// `mounted session NAME at MOUNTPOINT` (and, `--from-remote`, the origin the
/// remote named, not used until trusted).
type Mounted = treefork::verbs::mount::Mounted;

impl Human for Mounted {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let (s, mp) = (&self.session, self.mountpoint.display());
        writeln!(out, "mounted session {s} at {mp}")?;
        if let Some(o) = &self.untrusted_origin {
            writeln!(
                out,
                "the remote names {o} as its origin: NOT trusted, not used by promote or continue until `treefork remote trust {s}`"
            )?;
        }
        Ok(())
    }
}

impl Mount {
    #[cfg(test)]
    pub(super) fn agent(&self) -> &AgentArgs {
        &self.agent
    }
}

impl Run for Mount {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let mp = paths::mountpoint(&self.mountpoint)?;
        let from = match &self.from {
            Some(f) => Some(
                f.canonicalize()
                    .with_context(|| format!("--from {}: cannot resolve", f.display()))?,
            ),
            None => None,
        };
        let op = Request::Mount(treefork::verbs::Mount {
            session: self.session.clone(),
            mountpoint: mp.clone(),
            from,
            agent_socket: paths::absolute_arg(&self.agent.agent_socket)?,
            agent_uid: self.agent.agent_uid,
            task: self.policy.task.clone(),
            ttl_idle: self.policy.ttl_idle.clone(),
            ttl_absolute: self.policy.ttl_absolute.clone(),
            until_promote: self.policy.until_promote(),
            manual: self.policy.manual.then_some(true),
            from_remote: self.from_remote.clone(),
            evict_to: self.policy.evict_to.clone(),
            transport: transport_arg(self.transport)?,
        });
        let reply: Reply<Mounted> = match cx.explicit(&op)? {
            Some(r) => r,
            None => {
                let store = cx.store_dir_create()?;
                if self.foreground {
                    plumbing::serve_foreground(store, op)?;
                    return Ok(Outcome::Silent);
                }
                let bar = progress_bar("importing {bar:40} {pos}/{len} entries", cx.json());
                let r = plumbing::call_with_daemon(&store, &op, &mut |p| {
                    bar.set_length(p.total);
                    bar.set_position(p.done);
                })?;
                bar.finish_and_clear();
                r
            }
        };
        Ok(reply.into())
    }
}

/// Flush everything and unmount.
#[derive(clap::Args)]
pub struct Umount {
    /// The mountpoint.
    mountpoint: PathBuf,
}

/// `unmounted MOUNTPOINT`.
struct Unmounted {
    mountpoint: PathBuf,
}

impl Human for Unmounted {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "unmounted {}", self.mountpoint.display())
    }
}

impl Run for Umount {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let mp = paths::mountpoint(&self.mountpoint)?;
        let op = Request::Umount(treefork::verbs::Umount {
            mountpoint: mp.clone(),
        });
        let done = || {
            let raw = serde_json::json!({
                "ok": true,
                "mountpoint": serde_json::to_value(&mp).unwrap_or_default(),
            });
            let body = Unmounted {
                mountpoint: mp.clone(),
            };
            Ok(Reply::new(raw, body).into())
        };
        if cx
            .explicit::<<treefork::verbs::Umount as treefork::control::Verb>::Response>(&op)?
            .is_some()
        {
            return done();
        }
        let store = cx.store_for_path(&mp)?;
        let stale =
            matches!(std::fs::metadata(&mp), Err(e) if e.raw_os_error() == Some(libc::ENOTCONN));
        let r = if plumbing::daemon_running(&store) {
            plumbing::call::<<treefork::verbs::Umount as treefork::control::Verb>::Response>(
                &store,
                &op,
                &mut |_| {},
            )
            .map(|r| {
                if r.body.daemon_exiting {
                    plumbing::wait_daemon_gone(&store);
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
            Err(_) if stale && plumbing::detach(&mp) => {
                eprintln!(
                    "treefork: detached stale mount {} (its daemon had died; flushed data is in the store)",
                    mp.display()
                );
            }
            Err(e) => return Err(e),
        }
        done()
    }
}

/// List sessions with their state and size.
#[derive(clap::Args)]
pub struct Sessions {}

/// The session table.
type SessionList = treefork::verbs::sessions::SessionList;

impl Human for SessionList {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "{:<24} {:<8} {:<9} {:>6} {:>6} {:>7} {:>10} {:>8}  MOUNTPOINT / TASK",
            "SESSION", "STATE", "LIFE", "AGE", "IDLE", "TOUCHED", "SIZE", "FILES"
        )?;
        for s in &self.sessions {
            writeln!(
                out,
                "{:<24} {:<8} {} {:>10} {:>8}  {}{}{}",
                s.name,
                s.state,
                super::lifecycle::columns(&s.life),
                human_bytes(s.bytes as f64),
                s.inodes,
                s.mountpoint
                    .as_deref()
                    .map_or("-".into(), |p| p.to_string_lossy()),
                // The ring is the exception worth a mark (/dev/fuse is the default).
                if s.transport == Some(InUse::Uring) {
                    " (io_uring)"
                } else {
                    ""
                },
                super::lifecycle::task_suffix(&s.life),
            )?;
        }
        Ok(())
    }
}

impl Run for Sessions {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<SessionList> =
            cx.store_op(Request::Sessions(treefork::verbs::Sessions {}), false)?;
        Ok(r.into())
    }
}
