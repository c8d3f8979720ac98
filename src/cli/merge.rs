//! `merge`, `cherry-pick`, `rebase`: bring another history's changes into the
//! session, and `--continue` / `--abort` of one stopped on conflicts. One answer
//! (`ops::merge::MergeAnswer`) for the three; a stop on conflicts prints them and
//! exits with status 11 (`merge_conflict`).

use super::failure::Failure;
use super::flags::REF_HELP;
use super::output::short;
use super::prelude::*;
use treefork::diff::Change;
use treefork::ops::merge::{MergeAnswer, Status};

/// How a merge, cherry-pick or rebase is driven from the command line.
#[derive(clap::Args)]
pub struct Steps {
    /// Only show what would change and conflict.
    #[arg(long, conflicts_with_all = ["cont", "abort"])]
    dry_run: bool,
    /// Finish the one stopped on conflicts, once they are resolved.
    #[arg(long = "continue", id = "cont", conflicts_with = "abort")]
    cont: bool,
    /// Put the workspace back as it was before the stopped one.
    #[arg(long)]
    abort: bool,
}

/// Merge REF (a checkpoint, branch, session, experiment run or remote ref) into
/// the session: a three-way merge from their merge base, then a checkpoint with
/// two parents (several REFs: merged in turn, one checkpoint with them all as
/// parents); on conflicts it stops (resolve, then `merge --continue`).
#[derive(clap::Args)]
pub struct Merge {
    #[arg(value_name = "REF", help = REF_HELP, required_unless_present_any = ["cont", "abort"])]
    targets: Vec<String>,
    /// The checkpoint's message.
    #[arg(short, long)]
    message: Option<String>,
    #[command(flatten)]
    steps: Steps,
}

/// Apply the changes one checkpoint made (against its first parent) to the
/// session, as a new checkpoint; on conflicts it stops (resolve, then
/// `cherry-pick --continue`).
#[derive(clap::Args)]
pub struct CherryPick {
    #[arg(value_name = "REF", help = REF_HELP, required_unless_present_any = ["cont", "abort"])]
    target: Option<String>,
    /// The checkpoint's message.
    #[arg(short, long)]
    message: Option<String>,
    #[command(flatten)]
    steps: Steps,
}

/// Take out what one checkpoint changed (or, with `exec@N`, what recorded
/// command N changed), keeping everything that came after it (a three-way merge;
/// a new checkpoint). Where later changes touched the same lines it stops on
/// conflicts (resolve, then `revert --continue`).
#[derive(clap::Args)]
pub struct Revert {
    #[arg(value_name = "REF", help = REF_HELP, required_unless_present_any = ["cont", "abort"])]
    target: Option<String>,
    /// The checkpoint's message.
    #[arg(short, long)]
    message: Option<String>,
    #[command(flatten)]
    steps: Steps,
}

/// Replay the session's changes since its baseline onto the durable
/// repository's new head (default: the head of the branch it was imported
/// from), file by file; on conflicts it stops (resolve, then `rebase
/// --continue`). The new baseline is recorded: promote then counts as drift
/// only what came after it.
///
/// In the conflict markers `<<<<<<< session (yours)` is the session's side and
/// `>>>>>>> repository (upstream)` the repository's (`git rebase` calls these
/// "theirs" and "ours", the other way round; treefork names them outright).
#[derive(clap::Args)]
pub struct Rebase {
    /// The commit to rebase onto, as git names it in the durable repository.
    #[arg(long, value_name = "COMMIT", conflicts_with_all = ["cont", "abort"])]
    onto: Option<String>,
    #[command(flatten)]
    steps: Steps,
}

/// The answer, failing with `merge_conflict` when it stopped on conflicts.
struct Merged(MergeAnswer);

impl Human for Merged {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let a = &self.0;
        if let Some(s) = &a.saved {
            writeln!(out, "saved pending changes as {}", s.name)?;
        }
        let verb = if a.status == Status::Planned {
            "would change"
        } else {
            "changed"
        };
        for c in &a.changes {
            let l = match c.change {
                Change::Added => 'A',
                Change::Modified => 'M',
                Change::Deleted => 'D',
            };
            writeln!(out, "{verb} {l} {}", c.path)?;
        }
        for c in &a.conflicts {
            writeln!(out, "CONFLICT ({}) {}: {}", c.kind.name(), c.path, c.detail)?;
        }
        let what = format!("{} {}", a.op, a.theirs);
        match a.status {
            Status::Merged => match &a.checkpoint {
                Some(c) => writeln!(out, "{what}: done, checkpoint {}", short(c))?,
                None => writeln!(out, "{what}: done")?,
            },
            Status::MergeConflict => {
                writeln!(out, "{what}: stopped on {} conflict(s)", a.conflicts.len())?
            }
            Status::UpToDate => writeln!(out, "{what}: already up to date")?,
            Status::Planned => writeln!(
                out,
                "{what}: would change {} path(s), {} conflict(s)",
                a.changes.len(),
                a.conflicts.len()
            )?,
            Status::Aborted => writeln!(out, "{what}: aborted, the workspace is back as before")?,
        }
        if let Some(n) = &a.next {
            writeln!(out, "{n}")?;
        }
        Ok(())
    }

    fn verdict(&self) -> Result<()> {
        let a = &self.0;
        if a.status == Status::MergeConflict {
            return Err(Failure::coded(
                "merge_conflict",
                format!(
                    "{} {}: {} unresolved conflict(s)",
                    a.op,
                    a.theirs,
                    a.conflicts.len()
                ),
            ));
        }
        Ok(())
    }
}

/// Send a merge, cherry-pick or rebase request; the answer as [`Merged`].
pub fn send(cx: &Ctx, op: Request) -> Result<Outcome> {
    let r: Reply<MergeAnswer> = cx.session(op)?;
    Ok(r.map(Merged).into())
}

impl Run for Merge {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        send(
            cx,
            Request::Merge(treefork::verbs::Merge {
                target: self.targets.first().cloned(),
                also: self.targets.iter().skip(1).cloned().collect(),
                message: self.message.clone(),
                dry_run: self.steps.dry_run,
                cont: self.steps.cont,
                abort: self.steps.abort,
            }),
        )
    }
}

impl Run for CherryPick {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        send(
            cx,
            Request::CherryPick(treefork::verbs::CherryPick {
                target: self.target.clone(),
                message: self.message.clone(),
                dry_run: self.steps.dry_run,
                cont: self.steps.cont,
                abort: self.steps.abort,
            }),
        )
    }
}

impl Run for Rebase {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        send(
            cx,
            Request::Rebase(treefork::verbs::Rebase {
                onto: self.onto.clone(),
                dry_run: self.steps.dry_run,
                cont: self.steps.cont,
                abort: self.steps.abort,
            }),
        )
    }
}

impl Run for Revert {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        send(
            cx,
            Request::Revert(treefork::verbs::Revert {
                target: self.target.clone(),
                message: self.message.clone(),
                dry_run: self.steps.dry_run,
                cont: self.steps.cont,
                abort: self.steps.abort,
            }),
        )
    }
}
