//! The `bisect` tool: the rounds of `treefork::command::bisect` (the same search,
//! forks and runs as `treefork bisect run`), the forks made and removed by the
//! daemon (`bisect_begin` / `bisect_end`), the command run here, a progress
//! notification per round; the answer is the document `treefork --json bisect
//! run` prints, and the final `bisect_end` records it as one `bisect` operation.

use std::ffi::OsString;

use serde_json::Value;
use treefork::command::bisect::{self as drive, Bisected, ForkAt, Forks, Plan, Point, Step, Stop};
use treefork::ops::views::CheckpointView;
use treefork::verbs::{self, Request};

use super::bridge::{Outcome, ToolError};
use super::run::{place, run_at, timeout};
use super::schemas as s;
use super::tools::{Call, args};

/// Most checkpoints read along the first-parent chain of `bad`.
const MAX_CANDIDATES: usize = 1_000_000;

/// `bisect`: candidates from `log`, then the rounds.
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
    let candidates = candidates(cx, a.good.as_deref(), a.bad.as_deref())?;
    let plan = Plan {
        argv: argv.into_iter().map(OsString::from).collect(),
        cwd: a.cwd.clone(),
        timeout: t,
        jobs,
        keep: false,
        place: run_at(&cx.bridge.root, a.run_at.as_deref())?,
        watch: Default::default(),
    };
    let mut forks = McpForks {
        cx,
        id: None,
        cwd: Some(a.cwd.clone()).filter(|c| !c.is_empty()),
        tested: 0,
        total: candidates.len(),
    };
    (cx.progress)(
        0.0,
        None,
        format!("bisect: {} checkpoints, {jobs} at a time", candidates.len()),
    );
    match drive::run(&mut forks, &plan, &candidates) {
        Ok(doc) => serde_json::to_value(&doc).map_err(ToolError::bad_args),
        Err((Stop::Client(e), _)) => Err(e),
        Err((Stop::CannotStart(e), _)) => Err(ToolError::new("cannot_start", e)),
        Err((Stop::GoodEndFails(good), _)) => Err(ToolError::new(
            "good_end_fails",
            drive::good_end_fails_message(&good, "good"),
        )),
        Err((Stop::Interrupted(sig), _)) => Err(ToolError::new(
            "interrupted",
            format!("bisect interrupted by signal {sig}"),
        )),
    }
}

/// `log` from `from` (default HEAD), at most `limit`, newest first.
fn log(cx: &Call, from: Option<&str>, limit: usize) -> Result<Vec<CheckpointView>, ToolError> {
    let op = Request::from(verbs::Log {
        limit: Some(limit),
        from: from.map(str::to_string),
        path: None,
        first_parent: true,
    });
    let r = cx.bridge.call(&op, None, &mut |_| {})?;
    let l: <verbs::Log as treefork::control::Verb>::Response =
        serde_json::from_value(r).map_err(ToolError::bad_args)?;
    Ok(l.checkpoints)
}

/// The checkpoints from `good` to `bad` along `bad`'s first parents, oldest first.
fn candidates(cx: &Call, good: Option<&str>, bad: Option<&str>) -> Result<Vec<Point>, ToolError> {
    let mut chain = log(cx, bad, MAX_CANDIDATES)?;
    let bad = bad.unwrap_or("HEAD");
    if chain.is_empty() {
        return Err(ToolError::new(
            "invalid",
            format!("{bad} names no checkpoint: the session has none yet"),
        ));
    }
    if let Some(good) = good {
        let Some(g) = log(cx, Some(good), 1)?.pop() else {
            return Err(ToolError::new(
                "invalid",
                format!("good {good} names no checkpoint"),
            ));
        };
        let Some(at) = chain.iter().position(|c| c.id == g.id) else {
            return Err(ToolError::new(
                "invalid",
                format!("good {good} is not on the first-parent chain of bad {bad}"),
            ));
        };
        chain.truncate(at + 1);
    }
    chain.reverse();
    Ok(chain
        .into_iter()
        .map(|c| Point {
            id: c.id,
            short: c.short,
            message: c.message,
            time: c.time,
        })
        .collect())
}

/// The bisect's forks, through the session's socket.
struct McpForks<'a, 'b> {
    cx: &'a Call<'b>,
    id: Option<String>,
    cwd: Option<String>,
    tested: usize,
    total: usize,
}

impl McpForks<'_, '_> {
    fn end(&self, req: verbs::BisectEnd) -> Result<Value, ToolError> {
        self.cx.bridge.call(&Request::from(req), None, &mut |_| {})
    }

    fn end_req(&self) -> verbs::BisectEnd {
        verbs::BisectEnd {
            id: self.id.clone().unwrap_or_default(),
            remove: Default::default(),
            result: None,
            abort: false,
        }
    }
}

impl Forks for McpForks<'_, '_> {
    type Error = ToolError;

    fn begin(&mut self, points: &[(u32, String)]) -> Result<Vec<ForkAt>, ToolError> {
        let op = Request::from(verbs::BisectBegin {
            id: self.id.clone(),
            checkpoints: points.iter().map(|(_, c)| c.clone()).collect(),
            numbers: Some(points.iter().map(|(n, _)| *n).collect()),
            cwd: self.cwd.clone(),
            forks_dir: None,
        });
        let r = self.cx.bridge.call(&op, None, &mut |_| {})?;
        let b: <verbs::BisectBegin as treefork::control::Verb>::Response =
            serde_json::from_value(r).map_err(ToolError::bad_args)?;
        self.id = Some(b.id);
        Ok(b.forks
            .into_iter()
            .map(|f| ForkAt {
                n: f.n,
                session: f.session,
                mountpoint: f.mountpoint,
            })
            .collect())
    }

    fn remove(&mut self, forks: &[String]) -> Result<Vec<(String, String)>, ToolError> {
        let mut req = self.end_req();
        req.remove = treefork::ops::bisect::end::Remove::Names(forks.to_vec());
        let r = self.end(req)?;
        let e: <verbs::BisectEnd as treefork::control::Verb>::Response =
            serde_json::from_value(r).map_err(ToolError::bad_args)?;
        Ok(e.errors.into_iter().map(|c| (c.fork, c.error)).collect())
    }

    fn finish(&mut self, doc: &Bisected) -> Result<(), ToolError> {
        let mut req = self.end_req();
        req.result = Some(Box::new(doc.clone()));
        self.end(req).map(|_| ())
    }

    fn abort(&mut self) {
        if self.id.is_some() {
            let mut req = self.end_req();
            req.abort = true;
            let _ = self.end(req);
        }
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
