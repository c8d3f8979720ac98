//! The human form of an experiment's comparison: one row per run in ranking order
//! (run, fork, exit, duration, files changed, score), the failures' reasons, and
//! the winner. `--json` prints the daemon's whole comparison instead.

use std::collections::HashMap;

use super::super::prelude::*;

/// A checkpoint in a reply.
#[derive(Deserialize)]
pub struct Ckpt {
    /// Its id.
    pub id: String,
}

/// One run as the daemon recorded it.
#[derive(Deserialize)]
pub struct Row {
    run: u32,
    #[serde(default)]
    label: String,
    #[serde(default)]
    fork: String,
    exit: Option<i32>,
    signal: Option<i32>,
    error: Option<String>,
    #[serde(default)]
    timed_out: bool,
    #[serde(default)]
    interrupted: bool,
    #[serde(default)]
    duration_ms: u64,
    #[serde(default)]
    files_changed: u64,
    score: Option<f64>,
    score_error: Option<String>,
}

/// What was removed at the end.
#[derive(Deserialize, Default)]
pub struct Cleanup {
    #[serde(default)]
    kept: Vec<String>,
    #[serde(default)]
    errors: Vec<serde_json::Value>,
}

/// A recorded experiment (the reply of `experiment_end` and `experiment_show`).
#[derive(Deserialize)]
pub struct Comparison {
    id: String,
    #[serde(default)]
    base: Option<String>,
    #[serde(default)]
    rank_by: String,
    runs: Vec<Row>,
    ranking: Vec<u32>,
    winner: Option<u32>,
    #[serde(default)]
    aborted: bool,
    #[serde(default)]
    cleanup: Option<Cleanup>,
}

impl Row {
    fn exit_text(&self) -> String {
        if self.error.is_some() {
            "error".into()
        } else if self.timed_out {
            "timeout".into()
        } else if self.interrupted {
            "stopped".into()
        } else if let Some(c) = self.exit {
            c.to_string()
        } else if let Some(s) = self.signal {
            format!("sig{s}")
        } else {
            "-".into()
        }
    }

    fn score_text(&self) -> String {
        match (self.score, &self.score_error) {
            (Some(s), _) => format!("{s}"),
            (None, Some(_)) => "error".into(),
            _ => "-".into(),
        }
    }
}

/// `1.234s` or `12ms`.
fn duration(ms: u64) -> String {
    if ms >= 1000 {
        format!("{:.3}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}ms")
    }
}

impl Human for Comparison {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let base = self.base.as_deref().map_or("", super::super::output::short);
        let by = if self.rank_by.is_empty() {
            "default"
        } else {
            &self.rank_by
        };
        writeln!(
            out,
            "experiment {}: {} runs from {base}, ranked by {by}",
            self.id,
            self.runs.len()
        )?;
        let by_run: HashMap<u32, &Row> = self.runs.iter().map(|r| (r.run, r)).collect();
        let w = self
            .runs
            .iter()
            .map(|r| r.fork.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            out,
            "{:<5} {:<w$}  {:>7}  {:>9}  {:>5}  {:>8}  LABEL",
            "RUN", "FORK", "EXIT", "DURATION", "FILES", "SCORE"
        )?;
        for run in &self.ranking {
            let Some(r) = by_run.get(run) else { continue };
            writeln!(
                out,
                "{:<5} {:<w$}  {:>7}  {:>9}  {:>5}  {:>8}  {}",
                r.run,
                r.fork,
                r.exit_text(),
                duration(r.duration_ms),
                r.files_changed,
                r.score_text(),
                r.label
            )?;
        }
        for r in &self.runs {
            if let Some(e) = &r.error {
                writeln!(out, "run {}: {e}", r.run)?;
            }
            if let Some(e) = &r.score_error {
                writeln!(out, "run {} score: {e}", r.run)?;
            }
        }
        if self.aborted {
            writeln!(
                out,
                "interrupted: every run was stopped and every fork removed"
            )?;
        } else if let Some(w) = self.winner {
            writeln!(
                out,
                "winner: run {w}; bring it in with `treefork experiment adopt --winner`"
            )?;
        } else {
            writeln!(out, "no winner: no run could start")?;
        }
        if let Some(c) = &self.cleanup {
            if !c.kept.is_empty() {
                writeln!(out, "forks kept: {}", c.kept.join(", "))?;
            }
            for e in &c.errors {
                writeln!(out, "not removed: {e}")?;
            }
        }
        Ok(())
    }
}
