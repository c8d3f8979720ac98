//! `bisect run`: find the first checkpoint of the session's first-parent history
//! (oldest to newest, between `--good` and `--bad`) where a command fails.
//!
//! The command runs here, in the CLI (as `exec` and `experiment` do: the daemon
//! never runs agent-supplied commands), once per candidate tested, each time in a
//! throwaway fork of that checkpoint made with the `fork` verb and removed after
//! (`umount`, `session_rm`) unless `--keep`. With `--jobs N` a round tests N
//! candidates at once (k-ary search, [`search`]). The session itself is never
//! changed: its HEAD and files stay where they are (each fork adds an inert `fork`
//! record to its operation log).
//!
//! Files: [`search`] (the pure k-ary search), [`trial`] (one round: fork, run and
//! remove, in parallel), [`render`] (the result document and its human form),
//! this file (the arguments and the candidates).
//!
//! Interruption: SIGINT, SIGTERM or SIGHUP are caught from the start (the shared
//! runner's handler) and forwarded to the running commands' process groups; no
//! fork is made after one, every fork made is removed (even with `--keep`), and
//! the command exits with 128 + the signal. Forks left by a crash of this process
//! are sessions named `S-bID-N` (listed by `sessions`, removed by `session rm`).

mod render;
mod search;
mod trial;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Exit;
use super::plumbing::runner;
use super::prelude::*;
use render::{Bisected, Point};
use search::Found;
use treefork::ops::views::CheckpointView;

/// Most checkpoints read along the first-parent chain of `--bad`.
const MAX_CANDIDATES: usize = 1_000_000;

/// Find the first checkpoint where a command fails (`bisect run`).
#[derive(clap::Args)]
pub struct Bisect {
    #[command(subcommand)]
    sub: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Run CMD in a throwaway fork of checkpoints of the first-parent history
    /// between --good and --bad and find the first one where it exits non-zero.
    Run(RunArgs),
}

/// `bisect run [--good REF] [--bad REF] [-j N] [--timeout S] [--keep] -- CMD...`.
#[derive(clap::Args)]
struct RunArgs {
    /// Where CMD passes [default: the oldest checkpoint on the first-parent chain
    /// of --bad].
    #[arg(long, value_name = "REF")]
    good: Option<String>,
    /// Where CMD fails [default: HEAD].
    #[arg(long, value_name = "REF")]
    bad: Option<String>,
    /// Test N checkpoints at once, each in its own fork (a k-ary search).
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 1)]
    jobs: usize,
    /// Stop a run (its whole process group) after S seconds; a run stopped so
    /// counts as a failure.
    #[arg(long, value_name = "S")]
    timeout: Option<f64>,
    /// Keep every fork mounted afterwards (sessions `S-bID-N`).
    #[arg(long)]
    keep: bool,
    /// The command and its arguments (run as given, not through a shell), at the
    /// caller's place in each fork.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

impl Run for Bisect {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        match &self.sub {
            Sub::Run(a) => a.run(cx),
        }
    }
}

/// The session a bisect runs against, from the socket's `ping`.
struct Source {
    session: String,
    mountpoint: PathBuf,
}

impl RunArgs {
    fn timeout(&self) -> Result<Option<Duration>> {
        match self.timeout {
            None => Ok(None),
            Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
            Some(s) => bail!("--timeout must be a positive number of seconds, not {s}"),
        }
    }

    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let t0 = Instant::now();
        let timeout = self.timeout()?;
        if self.jobs == 0 {
            bail!("--jobs must be at least 1");
        }
        runner::install_signal_handlers();
        let src = source(cx)?;
        let candidates = self.candidates(cx)?;
        let dir = forks_dir(&src.mountpoint)?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
        let trial = trial::Trial {
            cx,
            argv: self.command.clone(),
            cwd: caller_place(&src.mountpoint),
            dir: dir.clone(),
            prefix: trial::fork_prefix(&src.session, &new_id()),
            timeout,
            keep: self.keep,
            jobs: self.jobs,
            candidates: &candidates,
            rounds: Default::default(),
            steps: Default::default(),
        };
        let r = search::search(candidates.len(), self.jobs, |points| trial.round(points));
        let steps = trial.into_steps();
        if !self.keep || r.is_err() {
            let _ = std::fs::remove_dir(&dir);
        }
        let sig = runner::interrupted();
        if sig != 0 {
            return Err(Exit {
                status: 128 + sig,
                error: anyhow!("bisect interrupted: every run was stopped and every fork removed"),
            }
            .into());
        }
        let (found, rounds) = r?;
        let point = |i: usize| Point::of(&candidates[i]);
        let (first_bad, last_good) = match found {
            Found::FirstBad {
                first_bad,
                last_good,
            } => (Some(point(first_bad)), last_good.map(point)),
            Found::PassesAtBad => (None, None),
        };
        let doc = Bisected {
            command: self.command_text(),
            first_bad,
            last_good,
            good: point(0),
            bad: point(candidates.len() - 1),
            candidates: candidates.len(),
            jobs: self.jobs,
            rounds,
            wall_ms: t0.elapsed().as_millis() as u64,
            steps,
        };
        let raw = serde_json::to_value(&doc)?;
        Ok(Reply::new(raw, doc).into())
    }

    fn command_text(&self) -> Vec<String> {
        self.command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The checkpoints from `--good` to `--bad` along `--bad`'s first parents,
    /// oldest first (at least one).
    fn candidates(&self, cx: &Ctx) -> Result<Vec<CheckpointView>> {
        let mut chain = log(cx, self.bad.clone(), MAX_CANDIDATES)?.checkpoints;
        let bad = self.bad.as_deref().unwrap_or("HEAD");
        if chain.is_empty() {
            bail!("{bad} names no checkpoint: the session has none yet (`treefork checkpoint`)");
        }
        if let Some(good) = &self.good {
            let Some(g) = log(cx, Some(good.clone()), 1)?.checkpoints.pop() else {
                bail!("--good {good} names no checkpoint");
            };
            let Some(at) = chain.iter().position(|c| c.id == g.id) else {
                return Err(super::failure::Failure::coded(
                    "invalid",
                    format!(
                        "--good {good} ({}) is not on the first-parent chain of --bad {bad} ({}); \
                         bisect walks first parents from the bad end back to the good one",
                        g.short, chain[0].short
                    ),
                ));
            };
            chain.truncate(at + 1);
        }
        chain.reverse();
        Ok(chain)
    }
}

/// The source session and its mountpoint (refused on an agent socket: removing
/// the forks takes `umount` and `session rm`, which are the user's).
fn source(cx: &Ctx) -> Result<Source> {
    let pong: Reply<Answer<treefork::verbs::Ping>> =
        cx.session(Op::Ping(treefork::verbs::Ping {}))?;
    let p = pong.body;
    if p.role.as_deref() == Some("agent") {
        return Err(super::failure::Failure::coded(
            "forbidden",
            "bisect removes its forks with umount and session rm, which an agent socket may not do; run it as the user",
        ));
    }
    match (p.session, p.mountpoint) {
        (Some(session), Some(mountpoint)) => Ok(Source {
            session,
            mountpoint,
        }),
        _ => bail!("the control socket does not serve a mounted session"),
    }
}

/// `log` from `from` (default HEAD), newest first, at most `limit`.
fn log(cx: &Ctx, from: Option<String>, limit: usize) -> Result<Answer<treefork::verbs::Log>> {
    let r: Reply<Answer<treefork::verbs::Log>> = cx.session(Op::Log(treefork::verbs::Log {
        limit: Some(limit),
        from,
        path: None,
    }))?;
    Ok(r.body)
}

/// Where the forks of the session mounted at `mp` go: `<parent>/.<name>.bisect`
/// (next to experiment forks' `.<name>.experiments`).
fn forks_dir(mp: &Path) -> Result<PathBuf> {
    match (mp.parent(), mp.file_name()) {
        (Some(parent), Some(name)) => {
            let mut n = OsString::from(".");
            n.push(name);
            n.push(".bisect");
            Ok(parent.join(n))
        }
        _ => bail!(
            "the workspace at {} has no parent directory for bisect forks",
            mp.display()
        ),
    }
}

/// The caller's directory relative to the workspace root `ws` ("" outside it).
fn caller_place(ws: &Path) -> String {
    let Ok(here) = std::env::current_dir() else {
        return String::new();
    };
    let here = here.canonicalize().unwrap_or(here);
    let ws = ws.canonicalize().unwrap_or_else(|_| ws.to_path_buf());
    match here.strip_prefix(&ws) {
        Ok(rel) => rel.to_str().unwrap_or("").to_string(),
        Err(_) => String::new(),
    }
}

/// A fresh bisect id: six hex digits (time, pid and the hasher's random keys).
fn new_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    format!("{:06x}", h.finish() & 0xff_ffff)
}
