//! The result of a bisect: the document `treefork --json bisect run` prints, the
//! MCP `bisect` tool answers and `bisect_end` records (bounded and checked there,
//! [`Bisected::check`]: one a client sends, in the legacy `bisect_end` with
//! `result`). In a search the daemon builds it from its own state
//! (`ops::bisect::state`) and the client's reported outcomes.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Most steps a recorded bisect may carry.
pub const MAX_STEPS: usize = 4096;
/// Longest text field (message, argument, error) kept in a recorded bisect.
pub const MAX_TEXT: usize = 4096;
/// Most arguments of the command.
pub const MAX_ARGV: usize = 256;

/// A checkpoint as the result names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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

/// One candidate tested.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The timeout stopped it.
    pub timed_out: bool,
    /// Whether this counts as a failure (anything but exit 0).
    pub failed: bool,
    /// From spawn to exit.
    pub duration_ms: u64,
    /// The fork's session.
    pub fork: String,
    /// Where the fork stays mounted (`keep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_at: Option<PathBuf>,
    /// Why the fork could not be removed, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_removed: Option<String>,
}

impl Step {
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

/// What a bisect found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bisected {
    /// The command, as given.
    pub command: Vec<String>,
    /// The first checkpoint where the command fails (`null`: it passes at bad).
    pub first_bad: Option<Point>,
    /// The checkpoint right before it, where it passed (`null` when there is no
    /// first bad). A command failing at the good end is no result: the range is
    /// wrong (`Next::GoodEndFails`).
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

impl Bisected {
    /// Check a document a client sent (`bisect_end`): well-formed checkpoint ids,
    /// bounded counts and texts.
    pub fn check(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Invalid(format!("bisect result: {what}")));
        if self.steps.len() > MAX_STEPS {
            return bad(format!("{} steps, at most {MAX_STEPS}", self.steps.len()));
        }
        if self.command.is_empty() || self.command.len() > MAX_ARGV {
            return bad(format!("the command needs 1 to {MAX_ARGV} arguments"));
        }
        if let Some(a) = self.command.iter().find(|a| a.len() > MAX_TEXT) {
            return bad(format!(
                "argument longer than {MAX_TEXT} bytes ({} bytes)",
                a.len()
            ));
        }
        let points = [Some(&self.good), Some(&self.bad)]
            .into_iter()
            .chain([self.first_bad.as_ref(), self.last_good.as_ref()])
            .flatten();
        for p in points {
            check_point(&p.id, &p.short, &p.message)?;
        }
        for s in &self.steps {
            check_point(&s.checkpoint, &s.short, &s.message)?;
            let long = [Some(&s.fork), s.not_removed.as_ref()]
                .into_iter()
                .flatten()
                .any(|t| t.len() > MAX_TEXT);
            let path_long = s
                .kept_at
                .as_ref()
                .is_some_and(|p| p.as_os_str().len() > MAX_TEXT);
            if long || path_long {
                return bad(format!("step text longer than {MAX_TEXT} bytes"));
            }
        }
        Ok(())
    }
}

/// A checkpoint as a result names it: 64 hex digits, bounded texts.
fn check_point(id: &str, short: &str, message: &str) -> Result<()> {
    let hex = id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex || short.len() > 64 || message.len() > MAX_TEXT {
        return Err(Error::Invalid(format!(
            "bisect result: checkpoint {:?} is not 64 hex digits, or its texts are too long",
            id.chars().take(80).collect::<String>()
        )));
    }
    Ok(())
}
