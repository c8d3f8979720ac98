//! `history`: the commands recorded by `treefork exec` — the list, one record with
//! its captured output (`history show N`), and what one command changed
//! (`history diff N`, the same as `diff` between its before and after states).

use clap::Parser;
use serde_json::Value;

use super::output::{change_letter, fmt_time, short};
use super::plumbing::b64_decode;
use super::prelude::*;

/// Commands recorded by `treefork exec`, newest first.
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

/// An exec as the history lists it (the record's `meta.exec`).
#[derive(Deserialize, Default)]
#[serde(default)]
struct ExecInfo {
    n: u64,
    seq: Option<u64>,
    time: Option<i64>,
    argv: Vec<String>,
    cwd: String,
    exit: Option<i32>,
    signal: Option<i32>,
    error: Option<String>,
    duration_ms: u64,
    timed_out: bool,
    abandoned: bool,
    before: Option<String>,
    after: Option<String>,
    changed: Vec<Value>,
    changed_count: u64,
    changed_truncated: bool,
    others: Vec<Value>,
    may_include_others: bool,
    explanation: Option<String>,
    stdout_truncated: bool,
    stderr_truncated: bool,
}

impl ExecInfo {
    fn outcome(&self) -> String {
        if self.abandoned {
            return "abandoned".into();
        }
        let mut s = match (self.exit, self.signal, &self.error) {
            (Some(c), _, _) => format!("exit {c}"),
            (None, Some(sig), _) => format!("signal {sig}"),
            (None, None, Some(_)) => "error".into(),
            _ => "?".into(),
        };
        if self.timed_out {
            s.push_str(" (timeout)");
        }
        s
    }
}

#[derive(Deserialize)]
struct Listing {
    execs: Vec<ExecInfo>,
}

impl Human for Listing {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for e in &self.execs {
            writeln!(
                out,
                "{:>4}  {}  {:<18} {:>8} ms {:>5} changed{}  {}",
                e.n,
                fmt_time(e.time.unwrap_or(0)),
                e.outcome(),
                e.duration_ms,
                e.changed_count,
                if e.may_include_others { "*" } else { " " },
                e.argv.join(" "),
            )?;
        }
        if self.execs.iter().any(|e| e.may_include_others) {
            writeln!(
                out,
                "(* the change set may include writes of other processes)"
            )?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct Shown {
    summary: ExecInfo,
    record: Value,
    stdout: String,
    stderr: String,
}

impl Shown {
    fn info(&self) -> ExecInfo {
        let mut i: ExecInfo =
            serde_json::from_value(self.record["meta"]["exec"].clone()).unwrap_or_default();
        i.seq = self.summary.seq;
        i.time = self.summary.time;
        i.explanation = self.summary.explanation.clone();
        i
    }
}

impl Human for Shown {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let e = self.info();
        writeln!(out, "exec {} (operation {})", e.n, e.seq.unwrap_or(0))?;
        writeln!(out, "command:  {}", e.argv.join(" "))?;
        writeln!(out, "cwd:      /{}", e.cwd)?;
        writeln!(out, "time:     {}", fmt_time(e.time.unwrap_or(0)))?;
        writeln!(out, "outcome:  {}", e.outcome())?;
        if let Some(err) = &e.error {
            writeln!(out, "error:    {err}")?;
        }
        writeln!(out, "duration: {} ms", e.duration_ms)?;
        if let Some(x) = &e.explanation {
            writeln!(out, "why:      {x}")?;
        }
        let after = e.after.as_deref().map_or("(no change)", short);
        writeln!(
            out,
            "states:   {} -> {after}",
            short(e.before.as_deref().unwrap_or(""))
        )?;
        writeln!(out, "changed:  {}", e.changed_count)?;
        for c in &e.changed {
            let change = c["change"].as_str().unwrap_or("");
            let path = c["path"].as_str().unwrap_or("");
            writeln!(out, "  {} {path}", change_letter(change))?;
        }
        if e.changed_truncated {
            writeln!(out, "  ...")?;
        }
        if e.may_include_others {
            writeln!(out, "may include writes of other processes:")?;
            for w in &e.others {
                writeln!(
                    out,
                    "  pid {} ({})",
                    w["pid"],
                    w["comm"].as_str().unwrap_or("")
                )?;
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
                let r: Reply<Listing> =
                    cx.session(Op::History(treefork::verbs::History { limit: self.limit }))?;
                Ok(r.into())
            }
            Some(Sub::Show { n }) => {
                let r: Reply<Shown> =
                    cx.session(Op::HistoryShow(treefork::verbs::HistoryShow { exec: *n }))?;
                Ok(r.into())
            }
            Some(Sub::Diff { n, stat, patch }) => {
                let r: Reply<Shown> =
                    cx.session(Op::HistoryShow(treefork::verbs::HistoryShow { exec: *n }))?;
                let e = r.body.info();
                let before = e
                    .before
                    .ok_or_else(|| anyhow!("exec {n} has no before state"))?;
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
