//! A recorded experiment: the document `experiment_end` stores as its operation's
//! `meta` ([`Recorded`]), and the answer of `experiment_end` and
//! `experiment_show` ([`Comparison`]: that document with each pair's output diffs,
//! the operation's number and, from `experiment_end`, what was removed).
//!
//! Invariant: [`Recorded`] serializes to the stored document's exact form (the
//! on-disk format of the `experiment` operation's `meta`), and reads every
//! document stored since experiments exist; answers tolerate fields added later
//! (no `deny_unknown_fields`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::compare::{self, RankBy, Stats};
use crate::command::{RunCommand, RunResult};

/// The document an `experiment` operation stores as its `meta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recorded {
    /// The experiment id (six hex digits).
    pub id: String,
    /// The session it ran from.
    pub source: String,
    /// The checkpoint every run started from (hex).
    pub base: String,
    /// The caller's directory relative to the workspace root; `null`: the root.
    pub cwd: Option<String>,
    /// What the runs were ranked by.
    pub rank_by: RankBy,
    /// Whether every fork was left mounted.
    pub keep: bool,
    /// Whether the experiment was interrupted (every fork removed, no winner).
    pub aborted: bool,
    /// The signal that interrupted it (`null`: not interrupted, or recorded
    /// before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<i32>,
    /// Every run, in run order.
    pub runs: Vec<RunEntry>,
    /// The run numbers, best first.
    pub ranking: Vec<u32>,
    /// The winning run: the best-ranked run that exited 0; `null` when none did
    /// (or the experiment was interrupted).
    pub winner: Option<u32>,
    /// Which rule decided the winner, in words (`null` without one; records
    /// written before it was kept have none).
    #[serde(default)]
    pub decided_by: Option<String>,
    /// Statistics over the runs.
    pub stats: Stats,
    /// Each pair of runs (a < b) compared.
    pub pairs: Vec<Pair>,
}

/// One run: what it did and its fork's facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunEntry {
    /// What the run did, as the CLI reported it (checked).
    #[serde(flatten)]
    pub result: RunResult,
    /// What the run is called in tables.
    pub label: String,
    /// What it ran.
    pub command: RunCommand,
    /// The environment variables set for it.
    pub env: BTreeMap<String, String>,
    /// Its fork (a session, removed unless it won or the experiment kept them).
    pub fork: String,
    /// Its final state: a checkpoint of its fork (hex).
    pub checkpoint: String,
    /// Paths the run changed: between the base and its state before the score
    /// command (its final state when there was none).
    pub files_changed: u64,
    /// Paths the score command changed after the run (not counted above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_files_changed: Option<u64>,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Pair {
    /// Run A (the lower number).
    pub a: u32,
    /// Run B.
    pub b: u32,
    /// The file-tree diff between their final states (at most 1,000 entries,
    /// `MAX_TREE_DIFF`).
    pub files: Vec<FileDiff>,
    /// Whether `files` was cut.
    pub files_truncated: bool,
    /// Their outputs compared (answers only: computed from the stored results
    /// whenever the experiment is shown).
    #[serde(flatten)]
    pub output: Option<OutputDiffs>,
}

/// A path that differs between two runs' final states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileDiff {
    /// Workspace-relative path.
    pub path: String,
    /// `added` (only in B), `removed` (only in A) or `modified`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its content hash in A (a node id, or blake3 of a link's target); `null`
    /// when absent or empty.
    pub a_hash: Option<String>,
    /// Its content hash in B.
    pub b_hash: Option<String>,
}

/// Two runs' outputs compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutputDiffs {
    /// A's exit code minus B's; `null` when either has none.
    pub exit_code_diff: Option<i64>,
    /// Unified diff of their standard output (empty when equal).
    pub stdout_diff: String,
    /// Unified diff of their standard error.
    pub stderr_diff: String,
}

/// The answer to `experiment_end` and `experiment_show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Comparison {
    /// The stored document, each pair with its output diffs.
    #[serde(flatten)]
    pub recorded: Recorded,
    /// The `experiment` operation.
    pub op: u64,
    /// What `experiment_end` removed and kept (absent from `experiment_show`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<Cleanup>,
}

/// The forks `experiment_end` unmounted and removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cleanup {
    /// Forks removed.
    pub removed: Vec<String>,
    /// Forks kept (the winner's, unmounted; every fork with `keep`).
    pub kept: Vec<String>,
    /// Forks that could not be removed.
    pub errors: Vec<CleanupError>,
    /// The kept forks and where each is mounted (`None`: kept unmounted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_at: Vec<KeptFork>,
}

/// A fork an experiment kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KeptFork {
    /// The fork (a session).
    pub fork: String,
    /// Where it is mounted, if it is.
    pub mountpoint: Option<String>,
}

/// A fork that could not be removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CleanupError {
    /// The fork.
    pub fork: String,
    /// Why.
    pub error: String,
}

impl Recorded {
    /// The answer for operation `op`: each pair's output diffs computed from the
    /// stored results.
    pub fn answer(mut self, op: u64) -> Comparison {
        for p in &mut self.pairs {
            let find = |n: u32| self.runs.iter().find(|r| r.result.run == n);
            if let (Some(ra), Some(rb)) = (find(p.a), find(p.b)) {
                let d = compare::output_diff(&ra.result, &rb.result);
                p.output = Some(OutputDiffs {
                    exit_code_diff: d.exit_code_diff,
                    stdout_diff: d.stdout_diff,
                    stderr_diff: d.stderr_diff,
                });
            }
        }
        Comparison {
            recorded: self,
            op,
            cleanup: None,
        }
    }
}
