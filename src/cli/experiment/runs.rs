//! Running an experiment: `experiment_begin` (the daemon saves the state and
//! mounts one fork per run), the commands in parallel (at most `-j N` at a time,
//! each through the shared process runner in its own process group, cwd at the
//! caller's place in its fork, stdin from /dev/null, output captured), the score
//! command after each run, then `experiment_end` with every result.
//!
//! Interruption: SIGINT, SIGTERM or SIGHUP are caught from before the experiment
//! starts (the runner's handler) and forwarded to every running command's group;
//! no run starts after one, and the end request then asks the daemon to remove
//! every fork (`abort`). A command that cannot start is a result with its error.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::super::Exit;
use super::super::plumbing::runner::{self, Mode, Spec};
use super::super::plumbing::{ExpResult, RunCommand, RunSpec};
use super::super::prelude::*;
use treefork::command::place::{Placement, RunAt};
use treefork::command::watch::Watch;
use treefork::ops::experiment::begin::{Begun, ForkMade};

/// `experiment [--from REF] [--rank-by BY] [--score CMD] [--timeout S] [-j N]
/// [--keep] [--label L...] [--run-at workspace|fork] [--forks-dir DIR] -c CMD...`
/// or `--command CMD --env K=A --env K=B`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Start every fork from this ref [default: the current state, saved first].
    #[arg(long, value_name = "REF")]
    from: Option<String>,
    /// Rank by: exit code, duration, stdout length (shortest first) or score
    /// [default: exit 0 first, then duration; score when --score is given].
    #[arg(long, value_name = "BY", value_parser = ["exit", "duration", "output", "score"])]
    rank_by: Option<String>,
    /// Run CMD (sh -c) in each fork after its run; the last number it prints is the
    /// run's score (higher wins).
    #[arg(long, value_name = "CMD")]
    score: Option<String>,
    /// Stop a run (its whole process group) after S seconds (the score command
    /// too). Without it a command that never exits (a test suite left waiting on
    /// an open handle) blocks the experiment forever.
    #[arg(long, value_name = "S", value_parser = crate::cli::values::seconds)]
    timeout: Option<Duration>,
    /// Run at most N commands at a time [default: all at once].
    #[arg(short = 'j', long = "jobs", value_name = "N", value_parser = crate::cli::values::count)]
    jobs: Option<usize>,
    /// Keep every fork mounted after the experiment.
    #[arg(long)]
    keep: bool,
    /// A command to try (sh -c), one run each.
    #[arg(short = 'c', value_name = "CMD", conflicts_with = "command")]
    commands: Vec<String>,
    /// One command (sh -c), run once per --env value.
    #[arg(long, value_name = "CMD", requires = "env")]
    command: Option<String>,
    /// K=V set for one run of --command (one run per --env).
    #[arg(long = "env", value_name = "K=V", requires = "command", value_parser = crate::cli::values::key_value)]
    env: Vec<String>,
    /// The label of a run in the table (repeatable, in run order, like -c)
    /// [default: its command, or its --env when the commands are alike].
    #[arg(long = "label", value_name = "LABEL")]
    labels: Vec<String>,
    /// Where each run sees its fork: `workspace` runs it at the workspace's own
    /// path (a private mount namespace per run, the fork bound over the
    /// workspace), so programs see no other path; `fork` runs it at the fork's
    /// mountpoint (DIR/<name>.experiments/S-xID-N).
    #[arg(long, value_name = "WHERE", default_value = "workspace",
          value_parser = ["workspace", "fork"])]
    run_at: String,
    /// Mount the forks under DIR/<workspace name>.experiments/ [default: the
    /// `forks_dir` setting, else the workspace's parent directory].
    #[arg(long, value_name = "DIR")]
    forks_dir: Option<std::path::PathBuf>,
}

impl RunArgs {
    fn specs(&self) -> Result<Vec<RunSpec>> {
        let mut specs = if let Some(cmd) = &self.command {
            self.env
                .iter()
                .map(|kv| {
                    let (k, v) = kv
                        .split_once('=')
                        .ok_or_else(|| anyhow!("--env {kv:?}: expected K=V"))?;
                    Ok(RunSpec {
                        label: String::new(),
                        command: RunCommand::Shell(cmd.clone()),
                        env: [(k.to_string(), v.to_string())].into(),
                    })
                })
                .collect::<Result<Vec<_>>>()?
        } else {
            self.commands
                .iter()
                .map(|c| RunSpec {
                    label: String::new(),
                    command: RunCommand::Shell(c.clone()),
                    env: Default::default(),
                })
                .collect()
        };
        if self.labels.len() > specs.len() {
            return Err(super::super::failure::Failure::coded(
                "usage",
                format!(
                    "{} --label given for {} runs: one per run at most, in run order",
                    self.labels.len(),
                    specs.len()
                ),
            ));
        }
        for (s, l) in specs.iter_mut().zip(&self.labels) {
            s.label = l.clone();
        }
        treefork::command::wire::label_runs(&mut specs);
        Ok(specs)
    }

    /// Run the experiment (see the module docs).
    pub fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let specs = self.specs()?;
        let timeout = self.timeout;
        runner::install_signal_handlers();
        let ws = cx.workspace_root()?;
        let cwd = caller_place(&ws);
        let forks_dir = self
            .forks_dir
            .as_deref()
            .map(std::path::absolute)
            .transpose()?;
        let at = Placement::resolve(RunAt::parse(&self.run_at).unwrap_or_default(), &ws);
        let begin = Request::ExperimentBegin(treefork::verbs::ExperimentBegin {
            from: self.from.clone(),
            runs: specs.clone(),
            cwd: Some(cwd.clone()).filter(|c| !c.is_empty()),
            forks_dir,
        });
        let t0 = std::time::Instant::now();
        let begun: Reply<Answer<treefork::verbs::ExperimentBegin>> = cx.session(begin)?;
        let setup_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let Begun { id, forks, .. } = begun.body;
        let watch = Watch::default();
        let ticker = super::super::ticker::Ticker::start(
            format!("experiment {id}"),
            watch.clone(),
            cx.json(),
        );
        let how = How {
            id: &id,
            at: &at,
            cwd: &cwd,
            timeout,
            watch: &watch,
        };
        let results = self.run_all(&how, &specs, &forks);
        drop(ticker);
        let sig = runner::interrupted();
        let rank_by = self
            .rank_by
            .clone()
            .or_else(|| self.score.as_ref().map(|_| "score".to_string()));
        let end = Request::ExperimentEnd(treefork::verbs::ExperimentEnd {
            id: id.clone(),
            results: treefork::command::wire::fit_results(results),
            rank_by,
            keep: self.keep,
            abort: sig != 0,
            interrupted_by: Some(sig).filter(|&s| s != 0),
        });
        let r: Reply<Answer<treefork::verbs::ExperimentEnd>> = cx.session(end)?;
        // Measured here, around the request: fork and mount of every run.
        let r = r.with_field(
            "setup_ms",
            serde_json::json!((setup_ms * 10.0).round() / 10.0),
        );
        if sig != 0 {
            return Err(Exit {
                status: 128 + sig,
                error: anyhow!(
                    "experiment {id} interrupted: every run was stopped and every fork removed"
                ),
            }
            .into());
        }
        Ok(r.map(Ran).into())
    }

    /// Run every command, at most `-j` at a time.
    fn run_all(&self, how: &How<'_>, specs: &[RunSpec], forks: &[ForkMade]) -> Vec<ExpResult> {
        let jobs = self
            .jobs
            .unwrap_or(forks.len())
            .clamp(1, forks.len().max(1));
        let next = AtomicUsize::new(0);
        let out = Mutex::new(Vec::new());
        std::thread::scope(|sc| {
            for _ in 0..jobs {
                sc.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let (Some(f), Some(spec)) = (forks.get(i), specs.get(i)) else {
                            break;
                        };
                        let name = format!("run {}", f.run);
                        how.watch.started(&name);
                        let r = self.one(how, f, spec);
                        how.watch.finished(&name);
                        out.lock().unwrap_or_else(|p| p.into_inner()).push(r);
                    }
                });
            }
        });
        let mut v = out.into_inner().unwrap_or_else(|p| p.into_inner());
        v.sort_by_key(|r| r.run);
        v
    }

    /// One run (and its score).
    fn one(&self, how: &How<'_>, fork: &ForkMade, spec: &RunSpec) -> ExpResult {
        let id = how.id;
        let run = fork.run;
        if runner::interrupted() != 0 {
            return ExpResult {
                run,
                interrupted: true,
                error: Some("not started: the experiment was interrupted".into()),
                ..ExpResult::default()
            };
        }
        let argv: Vec<String> = match &spec.command {
            RunCommand::Argv(v) => v.clone(),
            RunCommand::Shell(s) => vec!["sh".into(), "-c".into(), s.clone()],
        };
        let mut sp = how.prepared(Spec::new(argv), fork);
        for (k, v) in &spec.env {
            sp = sp.env(k, v);
        }
        let r = runner::run(&sp);
        let mut res = ExpResult {
            run,
            exit: r.exit_code,
            signal: r.signal,
            error: r.error.clone(),
            timed_out: r.timed_out,
            interrupted: runner::interrupted() != 0,
            duration_ms: r.duration.as_millis() as u64,
            stdout_len: r.stdout.len() as u64,
            stderr_len: r.stderr.len() as u64,
            truncated: r.stdout_truncated || r.stderr_truncated,
            stdout: String::from_utf8_lossy(&r.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
            ..ExpResult::default()
        };
        if let Some(cmd) = &self.score
            && r.pid.is_some()
            && !res.interrupted
        {
            // The run's own changes end here; what the score command writes
            // (build output, reports) is counted apart.
            res.run_checkpoint = checkpoint_fork(&fork.mountpoint, id, run);
            let r = runner::run(&how.prepared(Spec::new(["sh", "-c", cmd]), fork));
            res.score_stdout = String::from_utf8_lossy(&r.stdout).into_owned();
            res.score_stderr = String::from_utf8_lossy(&r.stderr).into_owned();
            match score(&r) {
                Ok(s) => res.score = Some(s),
                Err(e) => res.score_error = Some(e),
            }
        }
        res
    }
}

/// How the runs of one experiment go.
struct How<'a> {
    id: &'a str,
    /// Where runs see their forks.
    at: &'a Placement,
    /// The caller's place relative to the workspace root.
    cwd: &'a str,
    timeout: Option<Duration>,
    /// The runs in flight (the ticker's).
    watch: &'a Watch,
}

impl How<'_> {
    /// A spec as every experiment process (command and score command) runs: at
    /// the caller's place in the fork (seen at the workspace's path or the
    /// fork's), own process group, stdin from /dev/null, output captured, no
    /// control socket of the source, `TREEFORK_EXPERIMENT` and `TREEFORK_RUN` set.
    fn prepared(&self, sp: Spec, fork: &ForkMade) -> Spec {
        sp.placed(self.at, &fork.mountpoint, self.cwd)
            .mode(Mode::Capture)
            .own_group(true)
            .null_stdin(true)
            .timeout(self.timeout)
            .env("TREEFORK_SOCKET", "")
            .env("TREEFORK_EXPERIMENT", self.id)
            .env("TREEFORK_RUN", fork.run.to_string())
    }
}

/// A checkpoint of the fork mounted at `mp` (its own socket), or `None` when it
/// cannot be taken (the run's changes are then counted with the score's).
fn checkpoint_fork(mp: &Path, id: &str, run: u32) -> Option<String> {
    let sock = treefork::control::session_socket(mp).ok()?;
    let op = Request::Checkpoint(treefork::verbs::Checkpoint {
        message: format!("experiment {id} run {run}: before the score command"),
        trigger: "experiment-run".into(),
        meta: Default::default(),
    });
    let r: Reply<Answer<treefork::verbs::Checkpoint>> =
        super::super::plumbing::call_at(&sock, &op).ok()?;
    Some(r.body.checkpoint.id)
}

/// The score of a score command's run: the last number it printed.
fn score(r: &runner::RunResult) -> std::result::Result<f64, String> {
    if let Some(e) = &r.error {
        return Err(e.clone());
    }
    let text = String::from_utf8_lossy(&r.stdout);
    text.split_whitespace()
        .rev()
        .find_map(|w| w.parse::<f64>().ok().filter(|x| x.is_finite()))
        .ok_or_else(|| format!("the score command printed no number (exit {})", r.status()))
}

/// The caller's directory relative to the workspace root `ws` ("" outside it).
fn caller_place(ws: &Path) -> String {
    let Ok(here) = std::env::current_dir() else {
        return String::new();
    };
    let here = here.canonicalize().unwrap_or(here);
    let ws = ws.canonicalize().unwrap_or_else(|_| ws.to_path_buf());
    match here.strip_prefix(&ws) {
        Ok(rel) => rel.to_str().unwrap_or("").to_string(),
        Err(_) => String::new(),
    }
}

/// The comparison an experiment run ends with: printed like `experiment show`'s,
/// and a failure when no run exited 0 (no winner: nothing to adopt or promote).
struct Ran(treefork::ops::experiment::answer::Comparison);

impl Human for Ran {
    fn human(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.0.human(out)
    }

    fn verdict(&self) -> Result<()> {
        let d = &self.0.recorded;
        if d.winner.is_none() && !d.aborted {
            return Err(super::super::failure::Failure::coded(
                "no_winner",
                format!(
                    "experiment {}: no run exited 0, so there is no winner",
                    d.id
                ),
            ));
        }
        Ok(())
    }
}
