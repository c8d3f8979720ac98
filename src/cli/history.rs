//! `history`: the commands recorded by `treefork exec` — the list, one record with
//! its captured output (`history show N`), and what one command changed
//! (`history diff N`, the same as `diff` between its before and after states).

use clap::Parser;
use treefork::command::shell::{cut, quoted};
use treefork::ops::exec::answers::{ExecMeta, HistoryAnswer, HistoryShown};

use super::output::{fmt_time, short};
use super::plumbing::b64_decode;
use super::prelude::*;

/// Commands recorded by `treefork exec`, newest first: each as typed (quoted only
/// where a shell needs it, control characters escaped) with its --explanation.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct History {
    /// Show at most N.
    #[arg(short = 'n', long = "limit", value_name = "N")]
    limit: Option<usize>,
    #[command(subcommand)]
    cmd: Option<Sub>,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// One recorded command: its record and captured output.
    Show {
        /// The exec number.
        n: u64,
    },
    /// What one recorded command changed (`diff` of its before and after states).
    Diff {
        /// The exec number.
        n: u64,
        /// Per-file line counts.
        #[arg(long, conflicts_with = "patch")]
        stat: bool,
        /// Unified diff of text files.
        #[arg(long, short = 'p')]
        patch: bool,
    },
}

fn outcome(e: &ExecMeta) -> String {
    if e.abandoned {
        return "abandoned".into();
    }
    let mut s = match (e.exit, e.signal, &e.error) {
        (Some(c), _, _) => format!("exit {c}"),
        (None, Some(sig), _) => format!("signal {sig}"),
        (None, None, Some(_)) => "error".into(),
        _ => "?".into(),
    };
    if e.timed_out {
        s.push_str(" (timeout)");
    }
    s
}

/// Widest explanation the list shows (`history show N` has all of it).
const WHY_SHOWN: usize = 200;

impl Human for HistoryAnswer {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for line in &self.execs {
            let e = &line.exec;
            let mark = match (line.undone, line.reverted) {
                (true, _) => "  (undone)",
                (_, true) => "  (reverted)",
                _ => "",
            };
            writeln!(
                out,
                "{:>4}  {}  {:<18} {:>8} ms {:>5} changed{}  {}{mark}",
                e.n,
                fmt_time(line.time),
                outcome(e),
                e.duration_ms,
                e.changed_count,
                if e.may_include_others { "*" } else { " " },
                quoted(&e.argv),
            )?;
            if let Some(x) = &line.explanation {
                writeln!(out, "      why: {}", cut(x, WHY_SHOWN))?;
            }
        }
        if !self.execs.is_empty() {
            writeln!(
                out,
                "(`treefork revert exec@N` takes one command's changes out and keeps the later ones; `treefork undo` reverts the newest operation)"
            )?;
        }
        if self.execs.iter().any(|e| e.exec.may_include_others) {
            writeln!(
                out,
                "(* the change set may include writes of other processes)"
            )?;
        }
        Ok(())
    }
}

/// Changed paths listed one by one up to this many; past it, counted per top
/// directory.
const LISTED: usize = 50;

/// The exec meta of a shown record, with its changed paths (the summary's,
/// without them, if the record's cannot be read).
fn full_meta(shown: &HistoryShown) -> ExecMeta {
    shown
        .record
        .meta
        .get("exec")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_else(|| shown.summary.exec.clone())
}

impl Human for HistoryShown {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let e = full_meta(self);
        let line = &self.summary;
        writeln!(out, "exec {} (operation {})", e.n, line.seq)?;
        writeln!(out, "command:  {}", quoted(&e.argv))?;
        if e.cwd.is_empty() {
            writeln!(out, "cwd:      the workspace root")?;
        } else {
            writeln!(out, "cwd:      {}/ (in the workspace)", e.cwd)?;
        }
        writeln!(out, "time:     {}", fmt_time(line.time))?;
        writeln!(out, "outcome:  {}", outcome(&e))?;
        if let Some(err) = &e.error {
            writeln!(out, "error:    {err}")?;
        }
        writeln!(out, "duration: {} ms", e.duration_ms)?;
        if let Some(x) = &line.explanation {
            writeln!(out, "why:      {x}")?;
        }
        let after = e.after.as_deref().map_or("(no change)", short);
        writeln!(out, "states:   {} -> {after}", short(&e.before))?;
        writeln!(out, "changed:  {}", e.changed_count)?;
        let changed: Vec<_> = e.changed.iter().flatten().collect();
        if changed.len() <= LISTED {
            for c in &changed {
                writeln!(out, "  {} {}", c.change.letter(), c.path)?;
            }
        } else {
            // A build's output would bury the edit: one line per top directory.
            let mut by_top: std::collections::BTreeMap<&str, usize> = Default::default();
            for c in &changed {
                let top = c.path.split_once('/').map_or(c.path.as_str(), |(d, _)| d);
                *by_top.entry(top).or_default() += 1;
            }
            let mut tops: Vec<(&str, usize)> = by_top.into_iter().collect();
            tops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            for (top, n) in tops {
                let dir = changed
                    .iter()
                    .any(|c| c.path.starts_with(&format!("{top}/")));
                let slash = if dir { "/" } else { "" };
                writeln!(out, "  {top}{slash}  {n} path(s)")?;
            }
            writeln!(
                out,
                "  (every path: `treefork history show {} --json`)",
                e.n
            )?;
        }
        if e.changed_truncated {
            writeln!(out, "  ...")?;
        }
        if e.may_include_others {
            writeln!(out, "may include writes of other processes:")?;
            for w in &e.others {
                writeln!(out, "  pid {} ({})", w.pid, w.comm)?;
            }
        }
        for (name, data, cut) in [
            ("stdout", &self.stdout, e.stdout_truncated),
            ("stderr", &self.stderr, e.stderr_truncated),
        ] {
            let bytes = b64_decode(data).unwrap_or_default();
            let note = if cut { ", truncated" } else { "" };
            writeln!(out, "--- {name} ({} bytes{note}) ---", bytes.len())?;
            out.write_all(&bytes)?;
            if bytes.last().is_some_and(|&b| b != b'\n') {
                writeln!(out)?;
            }
        }
        Ok(())
    }
}

/// `diff BEFORE AFTER [--stat|-p]`, parsed by `diff`'s own definition.
#[derive(Parser)]
struct DiffLine {
    #[command(flatten)]
    diff: super::snapshot::Diff,
}

impl Run for History {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        match &self.cmd {
            None => {
                let r: Reply<Answer<treefork::verbs::History>> =
                    cx.session(Request::History(treefork::verbs::History {
                        limit: self.limit,
                    }))?;
                Ok(r.into())
            }
            Some(Sub::Show { n }) => {
                let r: Reply<Answer<treefork::verbs::HistoryShow>> =
                    cx.session(Request::HistoryShow(treefork::verbs::HistoryShow {
                        exec: *n,
                    }))?;
                Ok(r.into())
            }
            Some(Sub::Diff { n, stat, patch }) => {
                let r: Reply<Answer<treefork::verbs::HistoryShow>> =
                    cx.session(Request::HistoryShow(treefork::verbs::HistoryShow {
                        exec: *n,
                    }))?;
                let e = full_meta(&r.body);
                let before = e.before;
                let after = e.after.unwrap_or_else(|| before.clone());
                let mut args = vec!["diff".to_string(), before, after];
                if *stat {
                    args.push("--stat".into());
                }
                if *patch {
                    args.push("--patch".into());
                }
                DiffLine::try_parse_from(args)?.diff.run(cx)
            }
        }
    }
}
