//! What the bisect verbs carry between a client and the daemon's search
//! (`ops::bisect`): the search a client starts ([`SearchSpec`], in
//! `bisect_begin`), a fork to run in ([`BisectFork`]), what the client reports of
//! a run ([`Outcome`], per candidate in `bisect_step`) and what the daemon
//! answers next ([`Next`]). The daemon decides; the client only evaluates.
//!
//! Invariants: every text a client sends is bounded before the daemon keeps it
//! ([`Outcome::check`]); nothing here decides the search.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::doc::{Bisected, MAX_TEXT, Point, Step};
use crate::command::runner::RunResult;
use crate::error::{Error, Result};

/// A search kept by the daemon (`bisect_begin`'s `search`): the candidates are
/// the checkpoints on the first-parent chain of `bad`, from `good` on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchSpec {
    /// Where the command passes (a ref; default: the oldest checkpoint on the
    /// first-parent chain of `bad`).
    #[serde(default)]
    pub good: Option<String>,
    /// Where the command fails (a ref; default: HEAD).
    #[serde(default)]
    pub bad: Option<String>,
    /// Candidates tested at once (at least 1).
    pub jobs: usize,
    /// The command as the client runs it (recorded in the result; 1 to 256
    /// arguments).
    pub command: Vec<String>,
    /// Leave every tested fork mounted (sessions `S-bID-N`).
    #[serde(default)]
    pub keep: bool,
}

/// One fork of a bisect, mounted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BisectFork {
    /// The fork's number (in a search: the candidate's position, 0 = the good end).
    pub n: u32,
    /// The checkpoint it starts at (hex).
    pub checkpoint: String,
    /// The fork's session name.
    pub session: String,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
}

/// What the command did in one candidate's fork, as the client reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// The exit code (`null` when a signal or the timeout stopped it).
    #[serde(default)]
    pub exit: Option<i32>,
    /// The signal that killed it, if one did.
    #[serde(default)]
    pub signal: Option<i32>,
    /// The timeout stopped it.
    #[serde(default)]
    pub timed_out: bool,
    /// From spawn to exit.
    #[serde(default)]
    pub duration_ms: u64,
    /// It could not start (missing program, the caller's directory missing in
    /// that checkpoint): no verdict; the bisect ends with this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Outcome {
    /// What a run reports.
    pub fn of(r: &RunResult) -> Outcome {
        Outcome {
            exit: r.exit_code,
            signal: r.signal,
            timed_out: r.timed_out,
            duration_ms: r.duration.as_millis() as u64,
            error: r.error.clone(),
        }
    }

    /// Whether this counts as a failure (anything but exit 0, or a timeout).
    pub fn failed(&self) -> bool {
        self.exit != Some(0) || self.timed_out
    }

    /// The step of candidate `index` (`c`) in `round` that ended so, in `fork`.
    pub fn step(&self, c: &Point, index: usize, round: usize, fork: String) -> Step {
        Step {
            round,
            checkpoint: c.id.clone(),
            short: c.short.clone(),
            message: c.message.clone(),
            index,
            exit: self.exit,
            signal: self.signal,
            timed_out: self.timed_out,
            failed: self.failed(),
            duration_ms: self.duration_ms,
            fork,
            kept_at: None,
            not_removed: None,
        }
    }

    /// Bounded texts.
    pub fn check(&self) -> Result<()> {
        match &self.error {
            Some(e) if e.len() > MAX_TEXT => Err(Error::Invalid(format!(
                "bisect_step: an error text of {} bytes, at most {MAX_TEXT}",
                e.len()
            ))),
            _ => Ok(()),
        }
    }
}

/// The result of one candidate (`bisect_step`'s `results`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reported {
    /// The candidate: its fork's `n` (its position, 0 = the good end).
    pub candidate: u32,
    /// What the command did there.
    pub outcome: Outcome,
}

/// What the daemon's search asks next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Next {
    /// Run the command in these forks (one per candidate), then send
    /// `bisect_step` with their results.
    Test {
        /// The round they are (from 1).
        round: usize,
        /// The forks, mounted, by candidate.
        forks: Vec<BisectFork>,
    },
    /// The search ended: send `bisect_end` to record it (the daemon records this
    /// document from its own state).
    Found {
        /// What the bisect found.
        result: Box<Bisected>,
    },
    /// The command already fails at the good end: the range is wrong. Every fork
    /// was removed, nothing is recorded, the bisect is over.
    GoodEndFails {
        /// The good end.
        good: Point,
    },
    /// The command could not start in a fork: no verdict. Every fork was removed,
    /// nothing is recorded, the bisect is over.
    CannotStart {
        /// What could not start, where, and why.
        message: String,
    },
}

/// The answer to `bisect_step` (and, in a search, part of `bisect_begin`'s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Stepped {
    /// The bisect id.
    pub id: String,
    /// The candidates: checkpoints from good to bad, both included.
    pub candidates: usize,
    /// The good end.
    pub good: Point,
    /// The bad end.
    pub bad: Point,
    /// The steps of the round just reported, as recorded (empty from
    /// `bisect_begin`).
    pub steps: Vec<Step>,
    /// What to do next.
    pub next: Next,
}
