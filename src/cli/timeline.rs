//! `timeline` and `note`: what happened in a session, for the person reviewing
//! an agent's work, and the agent's own entries in it.

use treefork::ops::timeline::FilesTouched;

use super::output::fmt_time;
use super::prelude::*;
use super::values::{self, Since};

/// A session's operations (checkpoints, checkouts, execs, experiments, undos, ...)
/// and notes in time order, each with what it came to (what bisect found, the
/// commit a promote made, what a merge took in, what an undo reverted, an
/// interrupted experiment), its --explanation and the files it changed.
#[derive(clap::Args)]
pub struct Timeline {
    /// Only entries since TIME: unix seconds, or an age like 30m, 2h, 1d.
    #[arg(long, value_name = "TIME", value_parser = values::since)]
    since: Option<Since>,
    /// Only entries by this role: user, agent or daemon.
    #[arg(long, value_name = "ROLE")]
    actor: Option<String>,
    /// At most N entries (the newest).
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    limit: Option<usize>,
}

/// One line per entry (a note: its type and text; an operation: its summary,
/// explanation and the files it touched).
type Entries = treefork::ops::timeline::TimelineAnswer;

impl Human for Entries {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for e in &self.entries {
            let (o, when) = (&e.op.record, fmt_time(e.op.time));
            if o.kind == "note" {
                let n = &o.meta["note"];
                writeln!(
                    out,
                    "{when}  #{:<4} {:<6} [{}] {}",
                    o.seq,
                    o.actor.role,
                    n["type"].as_str().unwrap_or(""),
                    n["text"].as_str().unwrap_or("")
                )?;
                continue;
            }
            writeln!(
                out,
                "{when}  #{:<4} {:<6} {}",
                o.seq, o.actor.role, e.op.summary
            )?;
            if let Some(x) = &o.explanation {
                writeln!(out, "{:>28} why: {x}", "")?;
            }
            let FilesTouched::Listed { count, paths } = &e.files else {
                continue;
            };
            for p in paths {
                let letter = p.change.letter();
                writeln!(out, "{:>28} {letter} {}", "", p.path)?;
            }
            let more = count.saturating_sub(paths.len() as u64);
            if more > 0 {
                writeln!(out, "{:>28} ... and {more} more", "")?;
            }
        }
        Ok(())
    }
}

impl Run for Timeline {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let now = treefork::clock::unix_secs();
        let since = self.since.map(|s| s.at(now));
        let r: Reply<Answer<treefork::verbs::Timeline>> =
            cx.session(Request::Timeline(treefork::verbs::Timeline {
                since,
                actor: self.actor.clone(),
                limit: self.limit,
            }))?;
        Ok(r.into())
    }
}

/// Add an entry to the session's timeline (what the agent did, decided, got wrong,
/// or was nudged to do).
#[derive(clap::Args)]
pub struct Note {
    /// The entry's type.
    #[arg(long = "type", value_parser = ["action", "decision", "error", "nudge"], default_value = "action")]
    kind: String,
    /// The text.
    text: String,
}

type Noted = treefork::ops::timeline::Noted;

impl Human for Noted {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "noted as operation {}", self.op)
    }
}

impl Run for Note {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<Answer<treefork::verbs::Note>> =
            cx.session(Request::Note(treefork::verbs::Note {
                text: self.text.clone(),
                kind: Some(self.kind.clone()),
            }))?;
        Ok(r.into())
    }
}
