//! `experiment`: run N commands at once, each in its own fork of the session, rank
//! them and show the comparison; `experiment adopt` brings a run's final state into
//! the session; `experiment show` prints a recorded experiment again.
//!
//! Files: [`runs`] (start the experiment, run the commands in parallel with the
//! shared process runner, finish it), [`render`] (the table), this file (the
//! arguments and the two small subcommands).

mod render;
mod runs;

use super::prelude::*;

/// Try several commands at once, each in its own fork, and rank them.
///
/// Each run sees its fork at the workspace's own path (--run-at): programs see
/// the same absolute path as in the workspace. On the host the forks are
/// mounted at <parent>/<name>.experiments/S-xID-N (--forks-dir, or the
/// `forks_dir` setting, moves them). Give --timeout when a command may never
/// exit (a test suite left waiting on an open handle): without it such a run
/// blocks the experiment forever. While runs go on, stderr shows which are
/// still running and for how long (a live line on a terminal, a line every
/// 30 s otherwise).
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Experiment {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    run: runs::RunArgs,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Bring a run's final state into the session (pending changes are saved first).
    Adopt(Adopt),
    /// Print a recorded experiment again.
    Show(Show),
}

/// `experiment adopt RUN|--winner [ID]`.
#[derive(clap::Args)]
struct Adopt {
    /// The run number (see the experiment's table).
    #[arg(value_name = "RUN", required_unless_present_any = ["winner", "merge"])]
    run: Option<u32>,
    /// Adopt the winner.
    #[arg(long, conflicts_with = "run")]
    winner: bool,
    /// Combine runs: merge each run's final state into the session (a
    /// three-way merge from the experiment's start; one checkpoint with every
    /// run as a parent). The runs' forks must still exist (`--keep`, or the
    /// winner).
    #[arg(long, value_name = "RUN,RUN...", value_delimiter = ',', conflicts_with_all = ["run", "winner"])]
    merge: Vec<u32>,
    /// The experiment [default: the session's newest].
    #[arg(long = "id", value_name = "ID")]
    id: Option<String>,
}

/// `experiment show [ID]`.
#[derive(clap::Args)]
struct Show {
    /// The experiment [default: the session's newest].
    #[arg(value_name = "ID")]
    id: Option<String>,
}

/// `adopted run N of experiment ID`.
type Adopted = treefork::ops::experiment::adopt::Adopted;

impl Human for Adopted {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "adopted run {} of experiment {} (now at {}; `treefork undo` reverts it)",
            self.run,
            self.id,
            super::output::short(&self.checkpoint.id)
        )?;
        if let Some(f) = &self.removed {
            writeln!(out, "removed fork {f}")?;
        }
        if let Some(e) = &self.not_removed {
            writeln!(out, "its fork was not removed: {e}")?;
        }
        Ok(())
    }
}

impl Run for Experiment {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        match &self.sub {
            Some(Sub::Adopt(a)) if !a.merge.is_empty() => adopt_merged(cx, a),
            Some(Sub::Adopt(a)) => {
                let op = Request::ExperimentAdopt(treefork::verbs::ExperimentAdopt {
                    id: a.id.clone(),
                    run: a.run,
                    winner: a.winner,
                });
                let r: Reply<Answer<treefork::verbs::ExperimentAdopt>> = cx.session(op)?;
                Ok(r.into())
            }
            Some(Sub::Show(s)) => {
                let r: Reply<Answer<treefork::verbs::ExperimentShow>> =
                    cx.session(Request::ExperimentShow(treefork::verbs::ExperimentShow {
                        id: s.id.clone(),
                    }))?;
                Ok(r.into())
            }
            None => self.run.run(cx),
        }
    }
}

/// `experiment adopt --merge 1,3`: the runs' final checkpoints (from the
/// experiment's record), merged at once.
fn adopt_merged(cx: &Ctx, a: &Adopt) -> Result<Outcome> {
    let shown: Reply<Answer<treefork::verbs::ExperimentShow>> =
        cx.session(Request::ExperimentShow(treefork::verbs::ExperimentShow {
            id: a.id.clone(),
        }))?;
    let d = &shown.body.recorded;
    let mut refs = Vec::new();
    for n in &a.merge {
        let Some(run) = d.runs.iter().find(|r| r.result.run == *n) else {
            bail!("experiment {} has no run {n}", d.id);
        };
        refs.push(run.checkpoint.clone());
    }
    let runs: Vec<String> = a.merge.iter().map(u32::to_string).collect();
    super::merge::send(
        cx,
        Request::Merge(treefork::verbs::Merge {
            target: refs.first().cloned(),
            also: refs[1..].to_vec(),
            message: Some(format!(
                "adopt runs {} of experiment {}",
                runs.join(","),
                d.id
            )),
            dry_run: false,
            cont: false,
            abort: false,
        }),
    )
}
