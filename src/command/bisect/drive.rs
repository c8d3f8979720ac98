//! A bisect as a client runs it (the CLI's `bisect run`, the MCP `bisect`
//! tool): the daemon keeps the search (`bisect_begin` with `search`,
//! `bisect_step`), the client only evaluates: per round it runs the command in
//! each fork the daemon made (through [`runner`]: own process group, stdin from
//! /dev/null, output captured, at the caller's place in the fork, the source's
//! control socket hidden, `TREEFORK_BISECT_CHECKPOINT` set; at the workspace's
//! own path or the fork's, [`Plan::place`]), at most `jobs` at once, and
//! reports what each did ([`Daemon::step`]); the daemon removes the round's
//! forks (unless `keep`) and answers the next round or the end, which the final
//! `bisect_end` records ([`Daemon::finish`]). No search here.
//!
//! A command that fails at the good end, or cannot start, ends the bisect in the
//! daemon ([`Stop::GoodEndFails`], [`Stop::CannotStart`]): every fork removed,
//! nothing recorded.
//!
//! Interruption (the runner's signal handler, when the client installed it): no
//! round is reported after one, and, as after any failure of the client, every
//! fork of the bisect is removed ([`Daemon::abort`]), even with `keep`.

use std::ffi::OsString;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::doc::{Bisected, Point, Step};
use super::wire::{BisectFork, Next, Outcome, Reported, SearchSpec, Stepped};
use crate::command::place::Placement;
use crate::command::runner::{self, Mode, RunResult, Spec};
use crate::command::watch::Watch;

/// What a client asks of the daemon, over its own transport.
pub trait Daemon {
    /// The client's error.
    type Error;
    /// Start the search (`bisect_begin` with `search`): the range and the first
    /// round.
    fn begin(&mut self, spec: &SearchSpec) -> Result<Stepped, Self::Error>;
    /// Report a round's outcomes (`bisect_step`): the next round or the end.
    fn step(&mut self, id: &str, results: Vec<Reported>) -> Result<Stepped, Self::Error>;
    /// Record the result (the final `bisect_end`): the document recorded.
    fn finish(&mut self, id: &str) -> Result<Bisected, Self::Error>;
    /// Remove every fork of the bisect, best effort (`bisect_end` with `abort`).
    fn abort(&mut self, id: &str);
    /// The search began (its range is known).
    fn begun(&mut self, _at: &Stepped) {}
    /// A round ended with these steps (progress).
    fn progress(&mut self, _round: usize, _steps: &[Step]) {}
}

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The command (an argument vector, not through a shell).
    pub argv: Vec<OsString>,
    /// Where the command passes (a ref; default: the oldest checkpoint).
    pub good: Option<String>,
    /// Where it fails (a ref; default: HEAD).
    pub bad: Option<String>,
    /// The caller's place relative to the workspace root (in each fork).
    pub cwd: String,
    /// Per-run timeout (the whole process group).
    pub timeout: Option<Duration>,
    /// Candidates tested at once.
    pub jobs: usize,
    /// Leave every fork mounted.
    pub keep: bool,
    /// Where each run sees its fork (the workspace's path, or the fork's).
    pub place: Placement,
    /// Where the runs in flight are registered (by checkpoint, short), for the
    /// client's sign of life.
    pub watch: Watch,
}

/// Why a bisect stopped without a result.
#[derive(Debug)]
pub enum Stop<E> {
    /// The client's transport or the daemon refused.
    Client(E),
    /// A signal arrived (its number).
    Interrupted(i32),
    /// The command could not start in a fork.
    CannotStart(String),
    /// The command already fails at the good end (this point): the range is
    /// wrong, nothing in it can be the first bad one. Nothing is recorded.
    GoodEndFails(Box<Point>),
}

/// What a client says when the good end `good` already fails (the CLI's and the
/// MCP tool's message; `flag` names the client's option, `--good` or `good`).
pub fn good_end_fails_message(good: &Point, flag: &str) -> String {
    format!(
        "the command already fails at the good end {} ({}): the range is wrong, \
         nothing in it can be the first bad one; give {flag} a checkpoint where the \
         command passes (an older one: see `treefork log`, then {flag} REF)",
        good.short, good.message
    )
}

/// Bisect as `plan` says: ask the daemon, run its candidates, report, until it
/// ends; the document recorded.
pub fn run<D: Daemon>(d: &mut D, plan: &Plan) -> Result<Bisected, Stop<D::Error>> {
    interrupted()?;
    let spec = SearchSpec {
        good: plan.good.clone(),
        bad: plan.bad.clone(),
        jobs: plan.jobs,
        command: plan
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        keep: plan.keep,
    };
    let mut at = d.begin(&spec).map_err(Stop::Client)?;
    d.begun(&at);
    let id = at.id.clone();
    loop {
        at = match at.next {
            Next::Test { round, forks } => {
                let results = match run_round(plan, &forks) {
                    Ok(r) => r,
                    Err(sig) => {
                        d.abort(&id);
                        return Err(Stop::Interrupted(sig));
                    }
                };
                let next = d.step(&id, results).map_err(|e| {
                    d.abort(&id);
                    Stop::Client(e)
                })?;
                d.progress(round, &next.steps);
                next
            }
            Next::Found { .. } => {
                return d.finish(&id).map_err(|e| {
                    d.abort(&id);
                    Stop::Client(e)
                });
            }
            Next::GoodEndFails { good } => return Err(Stop::GoodEndFails(Box::new(good))),
            Next::CannotStart { message } => return Err(Stop::CannotStart(message)),
        };
    }
}

/// Run one round; the outcome per fork, or the signal that interrupted it.
fn run_round(plan: &Plan, forks: &[BisectFork]) -> Result<Vec<Reported>, i32> {
    if runner::interrupted() != 0 {
        return Err(runner::interrupted());
    }
    let results = run_all(plan, forks);
    match runner::interrupted() {
        0 => Ok(forks
            .iter()
            .zip(&results)
            .map(|(k, r)| Reported {
                candidate: k.n,
                outcome: Outcome::of(r),
            })
            .collect()),
        sig => Err(sig),
    }
}

fn interrupted<E>() -> Result<(), Stop<E>> {
    match runner::interrupted() {
        0 => Ok(()),
        sig => Err(Stop::Interrupted(sig)),
    }
}

/// Run the command in every fork, at most `plan.jobs` at once; results in
/// `forks` order.
fn run_all(plan: &Plan, forks: &[BisectFork]) -> Vec<RunResult> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<(usize, RunResult)>> = Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for _ in 0..plan.jobs.clamp(1, forks.len().max(1)) {
            sc.spawn(|| {
                loop {
                    let at = next.fetch_add(1, Ordering::SeqCst);
                    let Some(k) = forks.get(at) else { break };
                    let short: String = k.checkpoint.chars().take(12).collect();
                    let r = if runner::interrupted() == 0 {
                        plan.watch.started(&short);
                        let r = runner::run(&spec(plan, k));
                        plan.watch.finished(&short);
                        r
                    } else {
                        RunResult {
                            error: Some("interrupted".into()),
                            ..RunResult::default()
                        }
                    };
                    let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
                    o.push((at, r));
                }
            });
        }
    });
    let mut v = out.into_inner().unwrap_or_else(|p| p.into_inner());
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, r)| r).collect()
}

/// The run of the command in fork `k`.
fn spec(plan: &Plan, k: &BisectFork) -> Spec {
    Spec::new(plan.argv.clone())
        .placed(&plan.place, &k.mountpoint, &plan.cwd)
        .mode(Mode::Capture)
        .own_group(true)
        .null_stdin(true)
        .timeout(plan.timeout)
        .env("TREEFORK_SOCKET", "")
        .env("TREEFORK_BISECT_CHECKPOINT", &k.checkpoint)
}
