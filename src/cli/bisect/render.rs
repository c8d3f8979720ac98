//! The result of `bisect run`: the document `--json` prints
//! (`treefork::command::bisect::Bisected`, built by the daemon's search and
//! recorded by the final `bisect_end`) and its human form, one
//! row per step (round, checkpoint, exit, duration, message), then the first bad
//! checkpoint, the steps count and the wall time. A command that passes at the
//! bad end is a failure after printing (code `no_first_bad`); one that fails at
//! the good end is no result (code `good_end_fails`, exit 12, `super`).

use super::super::failure::Failure;
use super::super::output::short;
use super::super::prelude::*;
use treefork::command::bisect::Bisected;

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
            (Some(b), g) => {
                if let Some(g) = g {
                    writeln!(out, "last good: {} {}", g.short, g.message)?;
                }
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
