//! The result of `bisect run`: the document `--json` prints ([`Bisected`], built
//! in this process: no daemon answer describes a bisect) and its human form, one
//! row per step (round, checkpoint, exit, duration, message), then the first bad
//! checkpoint, the steps count and the wall time. A command that passes at the
//! bad end is a failure after printing (code `no_first_bad`).

use serde::Serialize;

use super::super::failure::Failure;
use super::super::output::short;
use super::super::plumbing::runner::RunResult;
use super::super::prelude::*;
use treefork::ops::views::CheckpointView;

/// A checkpoint as the result names it.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Checkpoint id (64 hex digits).
    pub id: String,
    /// Its first 12 hex digits.
    pub short: String,
    /// Its message.
    pub message: String,
    /// Unix time in seconds.
    pub time: i64,
}

impl Point {
    /// The point of checkpoint `c`.
    pub fn of(c: &CheckpointView) -> Point {
        Point {
            id: c.id.clone(),
            short: c.short.clone(),
            message: c.message.clone(),
            time: c.time,
        }
    }
}

/// One candidate tested.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// The round it ran in (from 1).
    pub round: usize,
    /// Checkpoint id.
    pub checkpoint: String,
    /// Its first 12 hex digits.
    pub short: String,
    /// Its message.
    pub message: String,
    /// Its position among the candidates (0 = the good end).
    pub index: usize,
    /// The command's exit code (`null` when a signal or the timeout stopped it).
    pub exit: Option<i32>,
    /// The signal that killed it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The `--timeout` stopped it.
    pub timed_out: bool,
    /// Whether this counts as a failure (anything but exit 0).
    pub failed: bool,
    /// From spawn to exit.
    pub duration_ms: u64,
    /// The fork's session.
    pub fork: String,
    /// Where the fork stays mounted (`--keep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_at: Option<std::path::PathBuf>,
    /// Why the fork could not be removed, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_removed: Option<String>,
}

impl Step {
    /// The step of candidate `index` (`c`) in `round`, ended as `r`.
    pub fn new(
        c: &CheckpointView,
        index: usize,
        round: usize,
        r: &RunResult,
        fork: String,
        kept_at: Option<std::path::PathBuf>,
        not_removed: Option<String>,
    ) -> Step {
        Step {
            round,
            checkpoint: c.id.clone(),
            short: c.short.clone(),
            message: c.message.clone(),
            index,
            exit: r.exit_code,
            signal: r.signal,
            timed_out: r.timed_out,
            failed: r.exit_code != Some(0) || r.timed_out,
            duration_ms: r.duration.as_millis() as u64,
            fork,
            kept_at,
            not_removed,
        }
    }

    /// `0`, `1`, `timeout`, `sig9`.
    pub fn exit_text(&self) -> String {
        match (self.timed_out, self.exit, self.signal) {
            (true, _, _) => "timeout".into(),
            (_, Some(c), _) => c.to_string(),
            (_, None, Some(s)) => format!("sig{s}"),
            _ => "-".into(),
        }
    }
}

/// What `bisect run` found.
#[derive(Debug, Clone, Serialize)]
pub struct Bisected {
    /// The command, as given.
    pub command: Vec<String>,
    /// The first checkpoint where the command fails (`null`: it passes at bad).
    pub first_bad: Option<Point>,
    /// The checkpoint right before it, where it passed (`null` when the first bad
    /// is the good end itself, or when there is no first bad).
    pub last_good: Option<Point>,
    /// The good end (the oldest candidate).
    pub good: Point,
    /// The bad end (the newest candidate).
    pub bad: Point,
    /// Checkpoints from good to bad, both included.
    pub candidates: usize,
    /// Candidates tested at once.
    pub jobs: usize,
    /// Rounds run (the first tests both ends).
    pub rounds: usize,
    /// From start to end, forks included.
    pub wall_ms: u64,
    /// Every candidate tested, round by round.
    pub steps: Vec<Step>,
}

/// `1.234s` or `12ms`.
fn duration(ms: u64) -> String {
    if ms >= 1000 {
        format!("{:.3}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}ms")
    }
}

impl Human for Bisected {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "bisect: {} checkpoints from {} (good) to {} (bad), {} at a time",
            self.candidates, self.good.short, self.bad.short, self.jobs
        )?;
        writeln!(
            out,
            "{:<5}  {:<12}  {:>7}  {:>9}  MESSAGE",
            "ROUND", "CHECKPOINT", "EXIT", "DURATION"
        )?;
        for s in &self.steps {
            writeln!(
                out,
                "{:<5}  {:<12}  {:>7}  {:>9}  {}",
                s.round,
                short(&s.checkpoint),
                s.exit_text(),
                duration(s.duration_ms),
                s.message
            )?;
        }
        for s in &self.steps {
            if let Some(at) = &s.kept_at {
                writeln!(out, "kept: fork {} at {}", s.fork, at.display())?;
            }
            if let Some(e) = &s.not_removed {
                writeln!(out, "not removed: fork {}: {e}", s.fork)?;
            }
        }
        match (&self.first_bad, &self.last_good) {
            (None, _) => writeln!(
                out,
                "the command passes at the bad end {} {}: nothing to find",
                self.bad.short, self.bad.message
            )?,
            (Some(b), Some(g)) => {
                writeln!(out, "last good: {} {}", g.short, g.message)?;
                writeln!(out, "first bad: {} {}", b.id, b.message)?;
            }
            (Some(b), None) => {
                writeln!(
                    out,
                    "the command already fails at the good end: it is the first bad one"
                )?;
                writeln!(out, "first bad: {} {}", b.id, b.message)?;
            }
        }
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        writeln!(
            out,
            "{} in {}, {}",
            plural(self.steps.len(), "step"),
            plural(self.rounds, "round"),
            duration(self.wall_ms)
        )
    }

    fn verdict(&self) -> Result<()> {
        if self.first_bad.is_none() {
            return Err(Failure::coded(
                "no_first_bad",
                format!(
                    "the command passes at the bad end {} ({}), so no checkpoint from {} on is \
                     the first bad one; give --bad a checkpoint where it fails",
                    self.bad.short, self.bad.message, self.good.short
                ),
            ));
        }
        Ok(())
    }
}
