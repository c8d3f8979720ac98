//! One round of a bisect: each candidate of the round in its own fork of its
//! checkpoint (the `fork` verb, mounted under the bisect's directory), the
//! command run there through the shared process runner (own process group, stdin
//! from /dev/null, output captured, cwd at the caller's place, the source's
//! control socket hidden), then the fork unmounted and its session removed
//! (unless `--keep`; always after an interruption). At most `jobs` candidates
//! run at once.
//!
//! A command that cannot start (missing program, missing directory in an old
//! checkpoint) is no verdict: the round fails with that error, after its forks
//! are removed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::super::plumbing::DaemonError;
use super::super::plumbing::runner::{self, Mode, Spec};
use super::super::prelude::*;
use super::render::Step;
use treefork::ops::views::CheckpointView;

/// How long a busy fork (a process the command left behind still holds it) is
/// retried before it is reported as not removed.
const UNMOUNT_PATIENCE: Duration = Duration::from_secs(5);

/// Longest session name (`session::validate_session_name`).
const MAX_SESSION_NAME: usize = 64;

/// Everything a round needs, and the steps so far.
pub struct Trial<'a> {
    /// The invocation's context (session ops go to the source's socket).
    pub cx: &'a Ctx,
    /// The command, as given.
    pub argv: Vec<OsString>,
    /// The caller's place relative to the workspace root.
    pub cwd: String,
    /// Where the forks are mounted.
    pub dir: PathBuf,
    /// Fork names are `<prefix><candidate index>`.
    pub prefix: String,
    /// Per-run timeout.
    pub timeout: Option<Duration>,
    /// Keep the forks mounted.
    pub keep: bool,
    /// Runs at once.
    pub jobs: usize,
    /// The candidates, oldest first.
    pub candidates: &'a [CheckpointView],
    /// Rounds started.
    pub rounds: AtomicUsize,
    /// Every step run, in the order the rounds ran.
    pub steps: Mutex<Vec<Step>>,
}

/// `<session>-b<id>-`, the session part cut so that every fork name fits.
pub fn fork_prefix(session: &str, id: &str) -> String {
    // Room for the widest index a bisect can have (`MAX_CANDIDATES` - 1).
    let room = MAX_SESSION_NAME - (id.len() + 3) - 6;
    let cut: String = session.chars().take(room).collect();
    format!("{cut}-b{id}-")
}

impl Trial<'_> {
    /// Test `points` (ascending candidate indices): whether the command failed at
    /// each. Fails when interrupted or when a command could not start.
    pub fn round(&self, points: &[usize]) -> Result<Vec<bool>> {
        let round = self.rounds.fetch_add(1, Ordering::SeqCst) + 1;
        let next = AtomicUsize::new(0);
        let out: Mutex<Vec<(usize, Result<Step>)>> = Mutex::new(Vec::new());
        std::thread::scope(|sc| {
            for _ in 0..self.jobs.clamp(1, points.len().max(1)) {
                sc.spawn(|| {
                    while let Some(&i) = points.get(next.fetch_add(1, Ordering::SeqCst)) {
                        let r = self.one(i, round);
                        out.lock().unwrap_or_else(|p| p.into_inner()).push((i, r));
                    }
                });
            }
        });
        let mut results = out.into_inner().unwrap_or_else(|p| p.into_inner());
        results.sort_by_key(|(i, _)| *i);
        let mut verdicts = Vec::with_capacity(points.len());
        let mut first_err = None;
        let mut steps = self.steps.lock().unwrap_or_else(|p| p.into_inner());
        for (_, r) in results {
            match r {
                Ok(s) => {
                    verdicts.push(s.failed);
                    steps.push(s);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if runner::interrupted() != 0 {
            bail!("interrupted");
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(verdicts),
        }
    }

    /// The steps run, in order.
    pub fn into_steps(self) -> Vec<Step> {
        self.steps.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    /// Candidate `i`: fork, run, remove.
    fn one(&self, i: usize, round: usize) -> Result<Step> {
        let c = &self.candidates[i];
        if runner::interrupted() != 0 {
            bail!("interrupted");
        }
        let name = format!("{}{i}", self.prefix);
        let mp = self.dir.join(&name);
        let op = Op::Fork(treefork::verbs::Fork {
            name: name.clone(),
            from: Some(c.id.clone()),
            mountpoint: mp.clone(),
            agent_socket: None,
            agent_uid: None,
            from_message: None,
        });
        let _: Reply<Answer<treefork::verbs::Fork>> = self
            .cx
            .session(op)
            .with_context(|| format!("cannot fork checkpoint {} as {name}", c.short))?;
        let r = (runner::interrupted() == 0).then(|| runner::run(&self.spec(c, &mp)));
        let kept = self.keep && runner::interrupted() == 0;
        let not_removed = if kept {
            None
        } else {
            self.remove(&name, &mp).err().map(|e| format!("{e:#}"))
        };
        let Some(r) = r else { bail!("interrupted") };
        if let Some(e) = &r.error {
            bail!(
                "{} could not start in the fork of {} ({}): {e}",
                self.argv[0].to_string_lossy(),
                c.short,
                c.message
            );
        }
        let step = Step::new(c, i, round, &r, name, kept.then_some(mp), not_removed);
        progress(self.cx, &step);
        Ok(step)
    }

    /// The run of the command in the fork mounted at `mp`.
    fn spec(&self, c: &CheckpointView, mp: &Path) -> Spec {
        Spec::new(self.argv.clone())
            .cwd(mp.join(&self.cwd))
            .mode(Mode::Capture)
            .own_group(true)
            .null_stdin(true)
            .timeout(self.timeout)
            .env("TREEFORK_SOCKET", "")
            .env("TREEFORK_BISECT_CHECKPOINT", &c.id)
    }

    /// Unmount the fork at `mp` (retrying while it is busy), remove its empty
    /// mountpoint and its session.
    fn remove(&self, name: &str, mp: &Path) -> Result<()> {
        let t0 = Instant::now();
        loop {
            let op = Op::Umount(treefork::verbs::Umount {
                mountpoint: mp.to_path_buf(),
            });
            match self.cx.store_op::<Ignored>(op, false) {
                Ok(_) => break,
                Err(e) if busy(&e) && t0.elapsed() < UNMOUNT_PATIENCE => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e.context(format!("fork {name} left mounted"))),
            }
        }
        let _ = std::fs::remove_dir(mp);
        let op = Op::SessionRm(treefork::verbs::SessionRm {
            name: name.to_string(),
        });
        self.cx
            .store_op::<Ignored>(op, false)
            .with_context(|| format!("fork {name} unmounted but its session not removed"))?;
        Ok(())
    }
}

/// Whether `e` is the daemon's refusal to unmount a busy mount.
fn busy(e: &anyhow::Error) -> bool {
    e.downcast_ref::<DaemonError>()
        .is_some_and(|d| d.is(&treefork::Error::Conflict(String::new())))
}

/// One line per step on a terminal's stderr as it ends (never with `--json`).
fn progress(cx: &Ctx, s: &Step) {
    use std::io::IsTerminal;
    if !cx.json() && io::stderr().is_terminal() {
        eprintln!(
            "bisect: round {} {} {} ({})",
            s.round,
            s.short,
            if s.failed { "bad" } else { "good" },
            s.exit_text()
        );
    }
}
