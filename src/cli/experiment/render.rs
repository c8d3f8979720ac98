//! The human form of an experiment's comparison: one row per run in ranking order
//! (run, fork, exit, duration, files changed, score), the failures' reasons, the
//! score command's output of each run (its last lines), and the winner. `--json` prints the daemon's whole comparison instead.

use std::collections::HashMap;

use treefork::command::RunResult;
use treefork::ops::experiment::answer::RunEntry;

use super::super::prelude::*;

/// A recorded experiment (the answer of `experiment_end` and `experiment_show`).
type Comparison = treefork::ops::experiment::answer::Comparison;

/// The text of a run's exit column.
fn exit_text(r: &RunResult) -> String {
    if r.error.is_some() {
        "error".into()
    } else if r.timed_out {
        "timeout".into()
    } else if r.interrupted {
        "stopped".into()
    } else if let Some(c) = r.exit {
        c.to_string()
    } else if let Some(s) = r.signal {
        format!("sig{s}")
    } else {
        "-".into()
    }
}

/// The text of a run's score column.
fn score_text(r: &RunResult) -> String {
    match (r.score, &r.score_error) {
        (Some(s), _) => format!("{s}"),
        (None, Some(_)) => "error".into(),
        _ => "-".into(),
    }
}

/// Lines of a score command's output shown per run (its last ones).
const SCORE_LINES: usize = 10;

/// `run N score output:` and the last lines the score command printed
/// (stdout, then stderr), indented; nothing when it printed nothing.
fn score_output(out: &mut dyn Write, r: &RunResult) -> io::Result<()> {
    let text = format!("{}{}", r.score_stdout, r.score_stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Ok(());
    }
    let from = lines.len().saturating_sub(SCORE_LINES);
    let more = if from > 0 {
        format!(" (last {SCORE_LINES} lines; --json has it all)")
    } else {
        String::new()
    };
    writeln!(out, "run {} score output{more}:", r.run)?;
    for l in &lines[from..] {
        writeln!(out, "  {l}")?;
    }
    Ok(())
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
        let d = &self.recorded;
        let base = super::super::output::short(&d.base);
        let by = serde_json::to_value(d.rank_by).unwrap_or_default();
        writeln!(
            out,
            "experiment {}: {} runs from {base}, ranked by {}",
            d.id,
            d.runs.len(),
            by.as_str().unwrap_or("default")
        )?;
        let by_run: HashMap<u32, &RunEntry> = d.runs.iter().map(|r| (r.result.run, r)).collect();
        let w = d
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
        for run in &d.ranking {
            let Some(e) = by_run.get(run) else { continue };
            let r = &e.result;
            writeln!(
                out,
                "{:<5} {:<w$}  {:>7}  {:>9}  {:>5}  {:>8}  {}",
                r.run,
                e.fork,
                exit_text(r),
                duration(r.duration_ms),
                e.files_changed,
                score_text(r),
                e.label
            )?;
        }
        for e in &d.runs {
            if let Some(n) = e.score_files_changed.filter(|n| *n > 0) {
                writeln!(
                    out,
                    "run {}: the score command changed {n} more path(s) (not in FILES)",
                    e.result.run
                )?;
            }
        }
        for r in d.runs.iter().map(|e| &e.result) {
            if let Some(e) = &r.error {
                writeln!(out, "run {}: {e}", r.run)?;
            }
            if let Some(e) = &r.score_error {
                writeln!(out, "run {} score: {e}", r.run)?;
            }
        }
        for r in d.runs.iter().map(|e| &e.result) {
            score_output(out, r)?;
        }
        if d.aborted {
            let by = d.interrupted_by.map_or(String::new(), |s| {
                format!(" by {}", treefork::ops::oplog_words::signal_name(s.into()))
            });
            writeln!(
                out,
                "interrupted{by}: every run was stopped and every fork removed"
            )?;
        } else if let Some(w) = d.winner {
            writeln!(
                out,
                "winner: run {w}; bring it in with `treefork experiment adopt --winner`"
            )?;
            if let Some(why) = &d.decided_by {
                writeln!(out, "decided by: {why}")?;
            }
        } else {
            writeln!(out, "no winner: no run exited 0")?;
        }
        if let Some(c) = &self.cleanup {
            for k in &c.kept_at {
                match &k.mountpoint {
                    Some(mp) => writeln!(
                        out,
                        "fork {} kept, mounted at {mp} (look there; `treefork umount {mp}` when done)",
                        k.fork
                    )?,
                    None => writeln!(
                        out,
                        "fork {} kept, not mounted: `treefork mount DIR --session {}` to look at it",
                        k.fork, k.fork
                    )?,
                }
            }
            if c.kept_at.is_empty() && !c.kept.is_empty() {
                writeln!(out, "forks kept: {}", c.kept.join(", "))?;
            }
            for e in &c.errors {
                // The error as JSON, keys sorted (as it was printed untyped).
                writeln!(out, "not removed: {}", serde_json::json!(e))?;
            }
        }
        Ok(())
    }
}
