//! The pure part of an experiment: ranking runs, statistics over them, and the
//! pairwise comparison of their outputs. No store, no I/O: property-tested alone
//! (`compare_tests.rs`).
//!
//! Invariants:
//! - a ranking is a permutation of the runs, deterministic (ties go to the lower
//!   run number);
//! - a run that could not start (`error`) or timed out never ranks above one that
//!   ran to completion, under every criterion but `duration`;
//! - the winner is the best-ranked run that *succeeded* (started, exited 0, not
//!   stopped by its timeout or an interruption); when no run succeeded there is no
//!   winner, whatever the ranking (a run that exited 1 is never adopted as the
//!   best one);
//! - a tie (equal on the ranking's criterion) goes to the lower run number, and
//!   [`decided_by`] says in words which rule decided.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::command::RunResult;
use crate::error::{Error, Result};

/// What runs are ranked by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RankBy {
    /// Runs that exited 0 first, then the shorter duration.
    #[default]
    Default,
    /// The lower exit code (0 first); a run without one (signal, timeout, not
    /// started) last.
    Exit,
    /// The shorter duration.
    Duration,
    /// The shorter standard output (seed 000's `output`).
    Output,
    /// The higher score (`--score CMD`); a run without a score last.
    Score,
}

impl RankBy {
    /// Parse a request's or command line's name (`None`: the default).
    pub fn parse(s: Option<&str>) -> Result<RankBy> {
        match s.unwrap_or("default") {
            "default" => Ok(RankBy::Default),
            "exit" => Ok(RankBy::Exit),
            "duration" => Ok(RankBy::Duration),
            "output" => Ok(RankBy::Output),
            "score" => Ok(RankBy::Score),
            other => Err(Error::Invalid(format!(
                "unknown ranking {other:?} (exit, duration, output, score)"
            ))),
        }
    }
}

/// Whether a run ran and exited 0.
pub fn succeeded(r: &RunResult) -> bool {
    r.error.is_none() && !r.timed_out && r.exit == Some(0)
}

/// Whether a run ran to completion (started, not killed by its timeout).
fn completed(r: &RunResult) -> bool {
    r.error.is_none() && !r.timed_out
}

/// The run numbers of `results`, best first.
pub fn rank(results: &[RunResult], by: RankBy) -> Vec<u32> {
    let mut order: Vec<&RunResult> = results.iter().collect();
    order.sort_by(|a, b| {
        let key = |r: &RunResult| -> (bool, i128, u64) {
            let done = !completed(r);
            match by {
                RankBy::Default => (!succeeded(r), r.duration_ms as i128, 0),
                RankBy::Exit => (
                    done || r.exit.is_none(),
                    r.exit.map_or(i128::MAX, i128::from),
                    0,
                ),
                RankBy::Duration => (false, r.duration_ms as i128, 0),
                RankBy::Output => (done, r.stdout_len as i128, 0),
                // Higher wins: compare the score's total order reversed.
                RankBy::Score => match r.score.filter(|s| s.is_finite()) {
                    Some(s) if !done => (false, -(ordered(s) as i128), 0),
                    _ => (true, 0, 0),
                },
            }
        };
        key(a).cmp(&key(b)).then(a.run.cmp(&b.run))
    });
    order.into_iter().map(|r| r.run).collect()
}

/// A finite f64 mapped to an i64 of the same order.
fn ordered(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    if b < 0 { b ^ i64::MAX } else { b }
}

/// The winner of a ranking: its best-ranked run that succeeded (none when no
/// run did).
pub fn winner(results: &[RunResult], ranking: &[u32]) -> Option<u32> {
    let ok = |n: u32| {
        results
            .iter()
            .any(|r| r.run == n && succeeded(r) && !r.interrupted)
    };
    ranking.iter().copied().find(|&n| ok(n))
}

/// Which rule made `winner` the winner, in words: it was the only run that
/// succeeded, it beat the next successful run on the ranking's criterion, or
/// it tied with it and has the lower run number.
pub fn decided_by(
    results: &[RunResult],
    ranking: &[u32],
    by: RankBy,
    winner: Option<u32>,
) -> Option<String> {
    let w = winner?;
    let get = |n: u32| results.iter().find(|r| r.run == n);
    let win = get(w)?;
    let next = ranking
        .iter()
        .copied()
        .skip_while(|&n| n != w)
        .skip(1)
        .filter_map(get)
        .find(|r| succeeded(r) && !r.interrupted);
    let Some(next) = next else {
        return Some(format!("run {w} is the only run that exited 0"));
    };
    let n = next.run;
    let (what, a, b) = match by {
        RankBy::Default | RankBy::Duration => (
            "duration",
            format!("{} ms", win.duration_ms),
            format!("{} ms", next.duration_ms),
        ),
        RankBy::Exit => ("exit code", "0".into(), "0".into()),
        RankBy::Output => (
            "output length",
            format!("{} bytes", win.stdout_len),
            format!("{} bytes", next.stdout_len),
        ),
        RankBy::Score => (
            "score",
            win.score.map_or("none".into(), |s| s.to_string()),
            next.score.map_or("none".into(), |s| s.to_string()),
        ),
    };
    Some(if a == b {
        format!("a tie with run {n} on {what} ({a}): the lower run number wins")
    } else {
        format!("{what}: run {w} {a}, next best run {n} {b} (among runs that exited 0)")
    })
}

/// Statistics over an experiment's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Stats {
    /// Runs.
    pub runs: usize,
    /// Shortest duration (ms).
    pub min_duration_ms: u64,
    /// Longest duration (ms).
    pub max_duration_ms: u64,
    /// Mean duration (ms).
    pub mean_duration_ms: f64,
    /// Fraction of runs that exited 0 (0..=1).
    pub success_rate: f64,
}

/// Statistics of `results` (all zero for none).
pub fn stats(results: &[RunResult]) -> Stats {
    let n = results.len();
    let d = || results.iter().map(|r| r.duration_ms);
    let sum: u128 = d().map(u128::from).sum();
    let ok = results.iter().filter(|r| succeeded(r)).count();
    Stats {
        runs: n,
        min_duration_ms: d().min().unwrap_or(0),
        max_duration_ms: d().max().unwrap_or(0),
        mean_duration_ms: if n == 0 { 0.0 } else { sum as f64 / n as f64 },
        success_rate: if n == 0 { 0.0 } else { ok as f64 / n as f64 },
    }
}

/// The comparison of two runs' outputs (the file-tree part is added by the daemon,
/// which reads the forks' final trees).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputDiff {
    /// Run A (the lower number).
    pub a: u32,
    /// Run B.
    pub b: u32,
    /// A's exit code minus B's (`None` when either has none).
    pub exit_code_diff: Option<i64>,
    /// Unified diff of A's and B's standard output (empty when equal).
    pub stdout_diff: String,
    /// Unified diff of their standard error.
    pub stderr_diff: String,
}

/// Every pair `(a, b)` of runs with `a < b`, in order.
pub fn pairs(results: &[RunResult]) -> Vec<(usize, usize)> {
    let n = results.len();
    (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .collect()
}

/// The output comparison of runs `a` and `b`.
pub fn output_diff(a: &RunResult, b: &RunResult) -> OutputDiff {
    let exit_code_diff = match (a.exit, b.exit) {
        (Some(x), Some(y)) => Some(i64::from(x) - i64::from(y)),
        _ => None,
    };
    OutputDiff {
        a: a.run,
        b: b.run,
        exit_code_diff,
        stdout_diff: unified(&a.stdout, &b.stdout, a.run, b.run, "stdout"),
        stderr_diff: unified(&a.stderr, &b.stderr, a.run, b.run, "stderr"),
    }
}

/// A unified diff of two texts (empty when they are equal).
pub fn unified(a: &str, b: &str, ra: u32, rb: u32, what: &str) -> String {
    if a == b {
        return String::new();
    }
    similar::TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(3)
        .header(&format!("run{ra}/{what}"), &format!("run{rb}/{what}"))
        .to_string()
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
