//! `bisect run`: find the first checkpoint of the session's first-parent history
//! (oldest to newest, between `--good` and `--bad`) where a command fails.
//!
//! The command runs here, in the CLI (as `exec` and `experiment` do: the daemon
//! never runs agent-supplied commands), once per candidate tested, each time in a
//! throwaway fork of that checkpoint the daemon makes (`bisect_begin`) and
//! removes after the round (`bisect_step`) unless `--keep`. With `--jobs N` a
//! round tests N candidates at once. The search is the daemon's (`bisect_begin`
//! with `search` finds the candidates, `bisect_step` answers each round's); the
//! loop that runs what it names is `treefork::command::bisect::drive`'s, shared
//! with the MCP `bisect` tool. The session
//! itself is never changed: its HEAD and files stay where they are, and its
//! operation log gets one inert `bisect` record (the final `bisect_end`). It
//! works on an agent socket too (the bisect verbs are an agent's).
//!
//! Files: [`trial`] (the bisect verbs on the session's socket, progress),
//! [`render`] (the human form of the result), this file (the arguments).
//!
//! Interruption: SIGINT, SIGTERM or SIGHUP are caught from the start (the shared
//! runner's handler) and forwarded to the running commands' process groups; no
//! fork is made after one, every fork made is removed (even with `--keep`), and
//! the command exits with 128 + the signal. Forks left by a crash of this process
//! are sessions named `S-bID-N` (listed by `sessions`, removed by `session rm`).

mod render;
mod trial;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Exit;
use super::plumbing::runner;
use super::prelude::*;
use treefork::command::bisect::{self as drive, Plan, Stop};
use treefork::command::place::{Placement, RunAt};

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
    ///
    /// Each run sees its fork at the workspace's own path (--run-at). Give
    /// --timeout when CMD may never exit (a test suite left waiting): a run
    /// stopped so counts as a failure, instead of blocking the bisect forever.
    /// While runs go on, stderr shows which are still running and for how long.
    ///
    /// Exit status: 0 the first bad checkpoint was found; 1 CMD passes at the
    /// bad end (nothing to find); 12 CMD already fails at the good end: the
    /// range is wrong (nothing in it can be the first bad one), so give --good
    /// an older checkpoint where CMD passes (see `treefork log`).
    Run(RunArgs),
}

/// `bisect run [--good REF] [--bad REF] [-j N] [--timeout S] [--keep]
/// [--run-at workspace|fork] [--forks-dir DIR] -- CMD...`.
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
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 1,
          value_parser = crate::cli::values::count)]
    jobs: usize,
    /// Stop a run (its whole process group) after S seconds; a run stopped so
    /// counts as a failure. Without it a command that never exits (a test
    /// runner left waiting on an open handle) blocks the bisect forever.
    #[arg(long, value_name = "S", value_parser = crate::cli::values::seconds)]
    timeout: Option<Duration>,
    /// Keep every fork mounted afterwards (sessions `S-bID-N`).
    #[arg(long)]
    keep: bool,
    /// Where each run sees its fork: `workspace` runs it at the workspace's own
    /// path (a private mount namespace per run, the fork bound over the
    /// workspace), so programs see no other path; `fork` runs it at the fork's
    /// mountpoint (DIR/<name>.bisect/S-bID-N).
    #[arg(long, value_name = "WHERE", default_value = "workspace",
          value_parser = ["workspace", "fork"])]
    run_at: String,
    /// Mount the forks under DIR/<workspace name>.bisect/ [default: the
    /// `forks_dir` setting, else the workspace's parent directory].
    #[arg(long, value_name = "DIR")]
    forks_dir: Option<PathBuf>,
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

impl RunArgs {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let timeout = self.timeout;
        runner::install_signal_handlers();
        let mountpoint = mountpoint(cx)?;
        let cwd = caller_place(&mountpoint);
        let run_at = RunAt::parse(&self.run_at).unwrap_or_default();
        let forks_dir = self.forks_dir.as_deref().map(absolute).transpose()?;
        let plan = Plan {
            argv: self.command.clone(),
            good: self.good.clone(),
            bad: self.bad.clone(),
            cwd: cwd.clone(),
            timeout,
            jobs: self.jobs,
            keep: self.keep,
            place: Placement::resolve(run_at, &mountpoint),
            watch: Default::default(),
        };
        let mut daemon = trial::CliDaemon {
            cx,
            cwd: Some(cwd).filter(|c| !c.is_empty()),
            forks_dir,
        };
        let ticker = super::ticker::Ticker::start("bisect".into(), plan.watch.clone(), cx.json());
        let r = drive::run(&mut daemon, &plan);
        drop(ticker);
        let sig = runner::interrupted();
        if sig != 0 {
            return Err(Exit {
                status: 128 + sig,
                error: anyhow!("bisect interrupted: every run was stopped and every fork removed"),
            }
            .into());
        }
        let doc = match r {
            Ok(doc) => doc,
            Err(Stop::Client(e)) => return Err(e),
            Err(Stop::CannotStart(e)) => bail!("{e}"),
            Err(Stop::GoodEndFails(good)) => {
                return Err(super::failure::Failure::coded(
                    "good_end_fails",
                    drive::good_end_fails_message(&good, "--good"),
                ));
            }
            Err(Stop::Interrupted(sig)) => {
                return Err(Exit {
                    status: 128 + sig,
                    error: anyhow!(
                        "bisect interrupted: every run was stopped and every fork removed"
                    ),
                }
                .into());
            }
        };
        let raw = serde_json::to_value(&doc)?;
        Ok(Reply::new(raw, doc).into())
    }
}

/// The source session's mountpoint.
fn mountpoint(cx: &Ctx) -> Result<PathBuf> {
    let p = cx.send(&treefork::verbs::Ping {})?;
    match (p.session, p.mountpoint) {
        (Some(_), Some(mountpoint)) => Ok(mountpoint),
        _ => bail!("the control socket does not serve a mounted session"),
    }
}

/// `p` made absolute against the current directory (a forks directory as given).
pub(super) fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(std::path::absolute(p)?)
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
