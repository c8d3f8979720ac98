//! The `bisect` tool: the loop of `treefork::command::bisect::drive` (the same
//! forks and runs as `treefork bisect run`; the search is the daemon's:
//! `bisect_begin` with `search`, `bisect_step`), the command run here, a progress
//! notification at the start and per round; the answer is the document
//! `treefork --json bisect run` prints, which the final `bisect_end` records as
//! one `bisect` operation.

use std::ffi::OsString;

use serde_json::Value;
use treefork::command::bisect::{
    self as drive, Bisected, Daemon, Plan, Reported, SearchSpec, Step, Stepped, Stop,
};
use treefork::verbs;

use super::bridge::{Outcome, ToolError};
use super::run::{place, run_at, timeout};
use super::schemas as s;
use super::tools::{Call, args};

/// `bisect`: the loop over the daemon's search.
pub fn bisect(cx: &Call, v: Value) -> Outcome {
    let a: s::BisectArgs = args(v)?;
    let argv: Vec<String> = match (&a.command, &a.argv) {
        (Some(c), None) => vec!["sh".into(), "-c".into(), c.clone()],
        (None, Some(v)) if !v.is_empty() => v.clone(),
        _ => {
            return Err(ToolError::new(
                "invalid",
                "give exactly one of command (a shell string) and argv (not empty)",
            ));
        }
    };
    let jobs = a.jobs.unwrap_or(1);
    if jobs == 0 {
        return Err(ToolError::new("invalid", "jobs must be at least 1"));
    }
    let t = timeout(a.timeout_s)?;
    place(&cx.bridge.root, &a.cwd)?;
    let plan = Plan {
        argv: argv.into_iter().map(OsString::from).collect(),
        good: a.good.clone(),
        bad: a.bad.clone(),
        cwd: a.cwd.clone(),
        timeout: t,
        jobs,
        keep: false,
        place: run_at(&cx.bridge.root, a.run_at.as_deref())?,
        watch: Default::default(),
    };
    let mut daemon = McpDaemon {
        cx,
        cwd: Some(a.cwd.clone()).filter(|c| !c.is_empty()),
        jobs,
        tested: 0,
        total: 0,
    };
    match drive::run(&mut daemon, &plan) {
        Ok(doc) => serde_json::to_value(&doc).map_err(ToolError::bad_args),
        Err(Stop::Client(e)) => Err(e),
        Err(Stop::CannotStart(e)) => Err(ToolError::new("cannot_start", e)),
        Err(Stop::GoodEndFails(good)) => Err(ToolError::new(
            "good_end_fails",
            drive::good_end_fails_message(&good, "good"),
        )),
        Err(Stop::Interrupted(sig)) => Err(ToolError::new(
            "interrupted",
            format!("bisect interrupted by signal {sig}"),
        )),
    }
}

/// The bisect verbs, through the session's socket.
struct McpDaemon<'a, 'b> {
    cx: &'a Call<'b>,
    cwd: Option<String>,
    jobs: usize,
    tested: usize,
    total: usize,
}

fn end(id: &str, abort: bool) -> verbs::BisectEnd {
    verbs::BisectEnd {
        id: id.to_string(),
        remove: Default::default(),
        result: None,
        abort,
    }
}

impl Daemon for McpDaemon<'_, '_> {
    type Error = ToolError;

    fn begin(&mut self, spec: &SearchSpec) -> Result<Stepped, ToolError> {
        let b = self.cx.bridge.send(&verbs::BisectBegin {
            id: None,
            checkpoints: Vec::new(),
            numbers: None,
            cwd: self.cwd.clone(),
            forks_dir: None,
            search: Some(spec.clone()),
        })?;
        b.search.map(|s| *s).ok_or_else(|| {
            ToolError::new(
                "corrupt",
                format!("bisect {} began without its search", b.id),
            )
        })
    }

    fn step(&mut self, id: &str, results: Vec<Reported>) -> Result<Stepped, ToolError> {
        let id = id.to_string();
        self.cx.bridge.send(&verbs::BisectStep { id, results })
    }

    fn finish(&mut self, id: &str) -> Result<Bisected, ToolError> {
        let e = self.cx.bridge.send(&end(id, false))?;
        e.result
            .map(|r| *r)
            .ok_or_else(|| ToolError::new("corrupt", format!("bisect {id}: no result recorded")))
    }

    fn abort(&mut self, id: &str) {
        if let Err(e) = self.cx.bridge.send(&end(id, true)) {
            log::warn!("bisect {id}: cannot remove its forks: {}", e.message());
        }
    }

    fn begun(&mut self, at: &Stepped) {
        self.total = at.candidates;
        (self.cx.progress)(
            0.0,
            None,
            format!(
                "bisect: {} checkpoints, {} at a time",
                at.candidates, self.jobs
            ),
        );
    }

    fn progress(&mut self, round: usize, steps: &[Step]) {
        self.tested += steps.len();
        let verdicts: Vec<String> = steps
            .iter()
            .map(|s| format!("{} {}", s.short, if s.failed { "bad" } else { "good" }))
            .collect();
        (self.cx.progress)(
            self.tested as f64,
            None,
            format!(
                "bisect round {round}: {} ({} of {} checkpoints tested)",
                verdicts.join(", "),
                self.tested,
                self.total
            ),
        );
    }
}
