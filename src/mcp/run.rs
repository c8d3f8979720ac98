//! The tools that run commands: `exec` and `experiment` run them here, in the MCP
//! server's process tree, through the process runner the CLI uses too
//! (`treefork::command::runner`; capture only, stdin from /dev/null: the server's
//! stdin and stdout are the MCP stream), exactly as
//! `treefork exec` / `treefork experiment` do, and report them to the daemon
//! (`exec_begin`/`exec_output`/`exec_end`, `experiment_begin`/`experiment_end`).
//! `experiment_adopt` is one request. All three send progress notifications.
//!
//! Invariant: a `cwd` argument is a relative path without `..` (checked here before
//! anything runs), so a command runs inside the workspace or its forks only.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};
use treefork::ops::exec::MAX_CAPTURE;
use treefork::verbs::{self, Request};

use super::bridge::{Outcome, ToolError};
use super::schemas as s;
use super::tools::{Call, args};
use treefork::command::runner::{self, Mode, RunResult, Spec};
use treefork::command::{RunCommand, RunResult as ExpResult, RunSpec};

/// Default bytes kept of each of stdout and stderr.
pub const CAPTURE_DEFAULT: usize = 256 << 10;
/// How often a running command reports progress.
const TICK: Duration = Duration::from_millis(500);

/// A relative directory without `..`, as a path under `root`.
pub(super) fn place(root: &Path, cwd: &str) -> Result<PathBuf, ToolError> {
    let p = Path::new(cwd);
    let ok = p
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !ok || cwd.contains('\0') {
        return Err(ToolError::new(
            "invalid",
            format!("cwd {cwd:?} must be relative to the workspace root, without \"..\""),
        ));
    }
    Ok(root.join(p))
}

/// The `run_at` argument: where runs see their forks.
pub(super) fn run_at(
    root: &Path,
    v: Option<&str>,
) -> Result<treefork::command::place::Placement, ToolError> {
    use treefork::command::place::{Placement, RunAt};
    let at = match v {
        None => RunAt::default(),
        Some(v) => RunAt::parse(v).ok_or_else(|| {
            ToolError::new("invalid", format!("run_at {v:?}: `workspace` or `fork`"))
        })?,
    };
    Ok(Placement::resolve(at, root))
}

pub(super) fn timeout(t: Option<f64>) -> Result<Option<Duration>, ToolError> {
    t.map(|s| {
        Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                ToolError::new(
                    "invalid",
                    format!("timeout_s {s}: not a positive number of seconds"),
                )
            })
    })
    .transpose()
}

/// Run `spec`, reporting progress every [`TICK`] until it ends.
fn run_reporting(cx: &Call, spec: &Spec, what: &str) -> RunResult {
    let (stop, stopped) = mpsc::channel::<()>();
    std::thread::scope(|sc| {
        sc.spawn(move || {
            let t0 = Instant::now();
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
                let secs = t0.elapsed().as_secs_f64();
                (cx.progress)(secs, None, format!("{what}: running for {secs:.1}s"));
            }
        });
        let r = runner::run(spec);
        drop(stop);
        r
    })
}

#[derive(Deserialize)]
struct Begun {
    exec: u64,
}

/// `exec`: `exec_begin`, run, `exec_output` chunks, `exec_end`.
pub fn exec(cx: &Call, v: Value) -> Outcome {
    let a: s::ExecArgs = args(v)?;
    let limit = a.capture_limit.unwrap_or(CAPTURE_DEFAULT);
    if limit > MAX_CAPTURE {
        return Err(ToolError::new(
            "invalid",
            format!("capture_limit is at most {MAX_CAPTURE}"),
        ));
    }
    let t = timeout(a.timeout_s)?;
    let dir = place(&cx.bridge.root, &a.cwd)?;
    let begin = Request::from(verbs::ExecBegin {
        argv: a.argv.clone(),
        cwd: a.cwd.clone(),
    });
    let r = cx
        .bridge
        .call(&begin, a.explanation.as_deref(), &mut |_| {})?;
    let Begun { exec: n } = serde_json::from_value(r).map_err(ToolError::bad_args)?;
    (cx.progress)(
        0.0,
        None,
        format!(
            "exec {n} started: {}",
            treefork::command::shell::quoted(&a.argv)
        ),
    );
    let spec = Spec::new(&a.argv)
        .cwd(dir)
        .mode(Mode::Capture)
        .null_stdin(true)
        .capture_limit(limit)
        .timeout(t);
    let r = run_reporting(cx, &spec, &format!("exec {n}"));
    let end = record(cx, n, &r)?;
    Ok(json!({
        "exec": n,
        "status": r.status(),
        "exit_code": r.exit_code,
        "signal": r.signal,
        "error": r.error,
        "timed_out": r.timed_out,
        "duration_ms": r.duration.as_millis() as u64,
        "stdout": String::from_utf8_lossy(&r.stdout),
        "stderr": String::from_utf8_lossy(&r.stderr),
        "stdout_truncated": r.stdout_truncated,
        "stderr_truncated": r.stderr_truncated,
        "seq": end["seq"],
        "checkpoint": end["checkpoint"],
        "before": end["exec"]["before"],
        "changed": end["exec"]["changed"],
        "changed_count": end["exec"]["changed_count"],
    }))
}

/// Send the captured output and the outcome of exec `n`; the `exec_end` answer.
fn record(cx: &Call, n: u64, r: &RunResult) -> Outcome {
    let mut answer = None;
    for o in treefork::verbs::exec_report(n, r) {
        answer = Some(cx.bridge.call(&o, None, &mut |_| {})?);
    }
    Ok(answer.expect("exec_end is always sent"))
}

type ExpBegun = treefork::ops::experiment::begin::Begun;
type ExpFork = treefork::ops::experiment::begin::ForkMade;

/// `experiment`: begin, every command at once in its fork, end.
pub fn experiment(cx: &Call, v: Value) -> Outcome {
    let a: s::ExperimentArgs = args(v)?;
    if !a.env.is_empty() && a.env.len() != a.commands.len() {
        return Err(ToolError::new(
            "invalid",
            "env must have one entry per command",
        ));
    }
    let t = timeout(a.timeout_s)?;
    place(&cx.bridge.root, &a.cwd)?;
    let at = run_at(&cx.bridge.root, a.run_at.as_deref())?;
    let mut specs: Vec<RunSpec> = a
        .commands
        .iter()
        .enumerate()
        .map(|(i, c)| RunSpec {
            label: String::new(),
            command: RunCommand::Shell(c.clone()),
            env: a.env.get(i).cloned().unwrap_or_default(),
        })
        .collect();
    treefork::command::wire::label_runs(&mut specs);
    let b: ExpBegun = cx.bridge.send(&verbs::ExperimentBegin {
        from: a.from.clone(),
        runs: specs.clone(),
        cwd: Some(a.cwd.clone()).filter(|c| !c.is_empty()),
        forks_dir: None,
    })?;
    let total = b.forks.len() as f64;
    (cx.progress)(
        0.0,
        Some(total),
        format!("experiment {}: {} runs started", b.id, b.forks.len()),
    );
    let done = Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for (f, spec) in b.forks.iter().zip(&specs) {
            let (done, id, cwd, at) = (&done, &b.id, &a.cwd, &at);
            sc.spawn(move || {
                let r = one(id, f, spec, at, cwd, t);
                let mut d = done.lock().unwrap_or_else(|p| p.into_inner());
                let msg = format!("run {} finished: exit {:?}", r.run, r.exit);
                d.push(r);
                (cx.progress)(d.len() as f64, Some(total), msg);
            });
        }
    });
    let mut results = done.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|r| r.run);
    let end = Request::from(verbs::ExperimentEnd {
        id: b.id,
        results: treefork::command::wire::fit_results(results),
        rank_by: a.rank_by,
        keep: a.keep,
        abort: false,
        interrupted_by: None,
    });
    cx.bridge.call(&end, None, &mut |_| {})
}

/// One run, in fork `f`.
fn one(
    id: &str,
    f: &ExpFork,
    spec: &RunSpec,
    at: &treefork::command::place::Placement,
    cwd: &str,
    t: Option<Duration>,
) -> ExpResult {
    let argv: Vec<String> = match &spec.command {
        RunCommand::Argv(v) => v.clone(),
        RunCommand::Shell(s) => vec!["sh".into(), "-c".into(), s.clone()],
    };
    let mut sp = Spec::new(argv)
        .placed(at, &f.mountpoint, cwd)
        .mode(Mode::Capture)
        .own_group(true)
        .null_stdin(true)
        .timeout(t)
        .env("TREEFORK_SOCKET", "")
        .env("TREEFORK_EXPERIMENT", id)
        .env("TREEFORK_RUN", f.run.to_string());
    for (k, v) in &spec.env {
        sp = sp.env(k, v);
    }
    let r = runner::run(&sp);
    ExpResult {
        run: f.run,
        exit: r.exit_code,
        signal: r.signal,
        error: r.error.clone(),
        timed_out: r.timed_out,
        duration_ms: r.duration.as_millis() as u64,
        stdout_len: r.stdout.len() as u64,
        stderr_len: r.stderr.len() as u64,
        truncated: r.stdout_truncated || r.stderr_truncated,
        stdout: String::from_utf8_lossy(&r.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
        ..ExpResult::default()
    }
}

/// `experiment_adopt`.
pub fn adopt(cx: &Call, v: Value) -> Outcome {
    let a: verbs::ExperimentAdopt = args(v)?;
    if a.run.is_some() == a.winner {
        return Err(ToolError::new(
            "invalid",
            "give exactly one of run and winner=true",
        ));
    }
    (cx.progress)(0.0, Some(1.0), "adopting".into());
    let r = cx.bridge.call(&a.into(), None, &mut |_| {})?;
    (cx.progress)(1.0, Some(1.0), format!("adopted run {}", r["run"]));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_stays_inside_the_workspace() {
        let root = Path::new("/w");
        assert_eq!(place(root, "").unwrap(), Path::new("/w"));
        assert_eq!(place(root, "a/./b").unwrap(), Path::new("/w/a/b"));
        for bad in ["..", "a/../..", "/etc", "a\0b"] {
            assert_eq!(place(root, bad).unwrap_err().code(), "invalid", "{bad:?}");
        }
        assert!(timeout(Some(0.0)).is_err());
        assert!(timeout(Some(f64::NAN)).is_err());
        assert_eq!(
            timeout(Some(1.5)).unwrap(),
            Some(Duration::from_millis(1500))
        );
    }
}
