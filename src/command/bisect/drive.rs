//! The rounds of a bisect, as a client runs them: per round of the search, the
//! daemon makes one fork per candidate ([`Forks::begin`]: `bisect_begin`), the
//! command runs here in each (through [`runner`]: own process group, stdin from
//! /dev/null, output captured, at the caller's place in the fork, the source's
//! control socket hidden, `TREEFORK_BISECT_CHECKPOINT` set; at the workspace's
//! own path or the fork's, [`Plan::place`]), at most `jobs` at
//! once, then the round's forks are removed ([`Forks::remove`]: `bisect_end`;
//! one still busy is retried for 5 s, then reported in its step) unless `keep`. The result is recorded once at the end ([`Forks::finish`]).
//!
//! A command that fails at the good end is no result ([`Stop::GoodEndFails`]):
//! every fork is removed and nothing is recorded.
//!
//! Interruption (the runner's signal handler, when the client installed it): no
//! fork is made after one, and, as after any failure, every fork of the bisect is
//! removed ([`Forks::abort`]), even with `keep`. A command that cannot start
//! (missing program, the caller's directory missing in an old checkpoint) is no
//! verdict: it ends the bisect with that error.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::doc::{Bisected, Point, Step};
use super::search;
use crate::command::place::Placement;
use crate::command::runner::{self, Mode, RunResult, Spec};
use crate::command::watch::Watch;

/// How long a fork that cannot be removed (busy) is retried before it is
/// reported as not removed.
const UNMOUNT_PATIENCE: Duration = Duration::from_secs(5);

/// A fork the daemon made for candidate `n`.
#[derive(Debug, Clone)]
pub struct ForkAt {
    /// The candidate's position (0 = the good end).
    pub n: u32,
    /// The fork's session name.
    pub session: String,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
}

/// What a client does for the rounds, over its own transport.
pub trait Forks {
    /// The client's error.
    type Error;
    /// Make and mount one fork per `(n, checkpoint id)` (`bisect_begin`).
    fn begin(&mut self, points: &[(u32, String)]) -> Result<Vec<ForkAt>, Self::Error>;
    /// Unmount and remove these forks; per fork that could not be, its error
    /// (`bisect_end` with `remove`).
    fn remove(&mut self, forks: &[String]) -> Result<Vec<(String, String)>, Self::Error>;
    /// Record the result (`bisect_end` with `result`).
    fn finish(&mut self, doc: &Bisected) -> Result<(), Self::Error>;
    /// Remove every fork of the bisect, best effort (`bisect_end` with `abort`).
    fn abort(&mut self);
    /// A round ended with these steps (progress).
    fn progress(&mut self, _round: usize, _steps: &[Step]) {}
}

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The command (an argument vector, not through a shell).
    pub argv: Vec<OsString>,
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

/// Bisect `candidates` (oldest first, at least one): every fork made is removed
/// (unless `plan.keep`), the result recorded through `f`. Also returns the steps
/// run when it stopped early.
pub fn run<F: Forks>(
    f: &mut F,
    plan: &Plan,
    candidates: &[Point],
) -> Result<Bisected, (Stop<F::Error>, Vec<Step>)> {
    let t0 = Instant::now();
    let mut steps = Vec::new();
    let mut round = 0;
    let r = search::search(candidates.len(), plan.jobs, |points| {
        round += 1;
        one_round(f, plan, candidates, points, round, &mut steps)
    });
    let found = match r {
        Ok((search::Found::FailsAtGood, _)) => {
            f.abort();
            return Err((Stop::GoodEndFails(Box::new(candidates[0].clone())), steps));
        }
        Ok(found) => found,
        Err(e) => {
            f.abort();
            return Err((e, steps));
        }
    };
    let command = plan
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let wall = t0.elapsed().as_millis() as u64;
    let doc = Bisected::new(command, candidates, found, plan.jobs, wall, steps);
    match f.finish(&doc) {
        Ok(()) => Ok(doc),
        Err(e) => Err((Stop::Client(e), doc.steps)),
    }
}

/// One round: fork, run, remove; whether the command failed at each point.
fn one_round<F: Forks>(
    f: &mut F,
    plan: &Plan,
    candidates: &[Point],
    points: &[usize],
    round: usize,
    steps: &mut Vec<Step>,
) -> Result<Vec<bool>, Stop<F::Error>> {
    interrupted()?;
    let asked: Vec<(u32, String)> = points
        .iter()
        .map(|&i| (i as u32, candidates[i].id.clone()))
        .collect();
    let forks = f.begin(&asked).map_err(Stop::Client)?;
    let answered =
        forks.len() == points.len() && forks.iter().all(|k| points.contains(&(k.n as usize)));
    if !answered {
        return Err(Stop::CannotStart(
            "the daemon made other forks than the ones asked".into(),
        ));
    }
    let results = run_all(plan, &forks, candidates);
    let keep = plan.keep && runner::interrupted() == 0;
    let errors = if keep {
        Vec::new()
    } else {
        let names: Vec<String> = forks.iter().map(|k| k.session.clone()).collect();
        remove_patiently(f, &names).map_err(Stop::Client)?
    };
    interrupted()?;
    let mut made = Vec::new();
    for (k, r) in forks.iter().zip(&results) {
        let c = &candidates[k.n as usize];
        if let Some(e) = &r.error {
            return Err(Stop::CannotStart(format!(
                "{} could not start in the fork of {} ({}): {e}",
                plan.argv.first().map_or("".into(), |a| a.to_string_lossy()),
                c.short,
                c.message
            )));
        }
        let mut s = Step::new(c, k.n as usize, round, r, k.session.clone());
        s.kept_at = keep.then(|| k.mountpoint.clone());
        s.not_removed = errors
            .iter()
            .find(|(n, _)| *n == k.session)
            .map(|(_, e)| e.clone());
        made.push(s);
    }
    made.sort_by_key(|s| s.index);
    f.progress(round, &made);
    let verdicts = points
        .iter()
        .map(|&i| made.iter().find(|s| s.index == i).is_none_or(|s| s.failed))
        .collect();
    steps.extend(made);
    Ok(verdicts)
}

/// Remove `names`, retrying those that could not be (a process the command
/// left behind may still hold a fork busy) for up to [`UNMOUNT_PATIENCE`].
fn remove_patiently<F: Forks>(
    f: &mut F,
    names: &[String],
) -> Result<Vec<(String, String)>, F::Error> {
    let t0 = Instant::now();
    let mut errors = f.remove(names)?;
    while !errors.is_empty() && t0.elapsed() < UNMOUNT_PATIENCE {
        std::thread::sleep(Duration::from_millis(100));
        let left: Vec<String> = errors.iter().map(|(n, _)| n.clone()).collect();
        errors = f.remove(&left)?;
    }
    Ok(errors)
}

fn interrupted<E>() -> Result<(), Stop<E>> {
    match runner::interrupted() {
        0 => Ok(()),
        sig => Err(Stop::Interrupted(sig)),
    }
}

/// Run the command in every fork, at most `plan.jobs` at once; results in
/// `forks` order.
fn run_all(plan: &Plan, forks: &[ForkAt], candidates: &[Point]) -> Vec<RunResult> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<(usize, RunResult)>> = Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for _ in 0..plan.jobs.clamp(1, forks.len().max(1)) {
            sc.spawn(|| {
                loop {
                    let at = next.fetch_add(1, Ordering::SeqCst);
                    let Some(k) = forks.get(at) else { break };
                    let c = &candidates[k.n as usize];
                    let r = if runner::interrupted() == 0 {
                        plan.watch.started(&c.short);
                        let r = runner::run(&spec(plan, k, c));
                        plan.watch.finished(&c.short);
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

/// The run of the command in fork `k` of checkpoint `c`.
fn spec(plan: &Plan, k: &ForkAt, c: &Point) -> Spec {
    Spec::new(plan.argv.clone())
        .placed(&plan.place, &k.mountpoint, &plan.cwd)
        .mode(Mode::Capture)
        .own_group(true)
        .null_stdin(true)
        .timeout(plan.timeout)
        .env("TREEFORK_SOCKET", "")
        .env("TREEFORK_BISECT_CHECKPOINT", &c.id)
}
