//! `branch`, `branches`, `checkout`, `restore`, `fork`: naming checkpoints and
//! moving between them.

use std::path::PathBuf;

use super::flags::{AgentArgs, REF_HELP};
use super::output::short;
use super::paths;
use super::prelude::*;
use treefork::diff::Change;

/// Create a branch at REF (default: HEAD, checkpointing pending changes), delete
/// one (`-d`), rename one (`-m OLD NEW`), share one with a session's agent
/// (`--share SESSION`), or with no name list them, marking the one HEAD is on.
#[derive(clap::Args)]
pub struct Branch {
    /// Branch name (with -m: the old name).
    name: Option<String>,
    /// Where it starts (with -m: the new name).
    #[arg(value_name = "REF", help = REF_HELP)]
    from: Option<String>,
    /// Delete the branch.
    #[arg(short = 'd', long, conflicts_with = "rename")]
    delete: bool,
    /// Rename branch NAME to the second argument (sessions on it follow).
    #[arg(short = 'm', long = "move")]
    rename: bool,
    /// Let the agent socket of SESSION see branch NAME and the history it names
    /// (an agent sees only its own session's history and the branches it made or
    /// was given).
    #[arg(long, value_name = "SESSION", conflicts_with_all = ["delete", "rename", "from"])]
    share: Option<String>,
}

/// `branch NAME -> ID`, `deleted branch NAME`, `renamed branch OLD -> NEW` or
/// `shared branch NAME with session S`: the answer of the verb the flags chose.
enum Branched {
    Made(Answer<treefork::verbs::Branch>),
    Deleted(Answer<treefork::verbs::BranchDelete>),
    Renamed(Answer<treefork::verbs::BranchRename>),
    Shared(Answer<treefork::verbs::BranchShare>),
}

impl Human for Branched {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        match self {
            Branched::Made(b) => writeln!(out, "branch {} -> {}", b.branch, short(&b.checkpoint)),
            Branched::Deleted(d) => writeln!(out, "deleted branch {}", d.deleted),
            Branched::Renamed(r) => writeln!(out, "renamed branch {} -> {}", r.renamed, r.to),
            Branched::Shared(s) => writeln!(
                out,
                "shared branch {} with session {}",
                s.branch, s.shared_with
            ),
        }
    }
}

impl Run for Branch {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let Some(name) = self.name.clone() else {
            return list_branches(cx, true, treefork::verbs::Branches::default());
        };
        let r: Reply<Branched> = if let Some(with) = &self.share {
            let op = Request::BranchShare(treefork::verbs::BranchShare {
                name,
                with: with.clone(),
            });
            cx.session(op)?.map(Branched::Shared)
        } else if self.delete {
            let op = Request::BranchDelete(treefork::verbs::BranchDelete { name });
            cx.session(op)?.map(Branched::Deleted)
        } else if self.rename {
            let Some(new) = self.from.clone() else {
                bail!("branch -m needs the old and the new name");
            };
            let op = Request::BranchRename(treefork::verbs::BranchRename { old: name, new });
            cx.session(op)?.map(Branched::Renamed)
        } else {
            let op = Request::Branch(treefork::verbs::Branch {
                name,
                from: self.from.clone(),
            });
            cx.session(op)?.map(Branched::Made)
        };
        Ok(r.into())
    }
}

/// List branches: this session's own (and store-wide ones from older stores).
/// Another session's branch is named SESSION/BRANCH wherever a ref is taken.
#[derive(clap::Args)]
pub struct Branches {
    /// Every session's branches too, another session's named SESSION/BRANCH.
    #[arg(long)]
    all: bool,
    /// Also the automatic auto/... refs (pending changes saved before a
    /// checkout, restore, undo...).
    #[arg(long)]
    auto: bool,
}

/// The `branches` answer: the branch HEAD is on (`current`) marked `*`.
struct BranchList {
    answer: Answer<treefork::verbs::Branches>,
}

impl Human for BranchList {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for b in &self.answer.branches {
            writeln!(
                out,
                "{}{:<40} {}  {}",
                if b.current { "* " } else { "  " },
                b.name,
                short(&b.checkpoint),
                b.message.as_deref().unwrap_or(""),
            )?;
        }
        Ok(())
    }
}

impl Run for Branches {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        list_branches(
            cx,
            false,
            treefork::verbs::Branches {
                all: self.all,
                auto: self.auto,
            },
        )
    }
}

/// The branches, the one HEAD is on marked `*` (`current` in each listing); with
/// `current` (`branch` without a name), also that branch's name as the
/// answer's `current` field.
fn list_branches(cx: &Ctx, current: bool, which: treefork::verbs::Branches) -> Result<Outcome> {
    let mut r: Reply<Answer<treefork::verbs::Branches>> = cx.session(Request::Branches(which))?;
    if current {
        let name = r
            .body
            .branches
            .iter()
            .find(|b| b.current)
            .map(|b| b.name.clone());
        r = r.with_field("current", serde_json::json!(name));
    }
    Ok(r.map(|answer| BranchList { answer }).into())
}

/// Says where pending changes saved before a checkout or restore went.
fn saved(out: &mut dyn Write, s: Option<&treefork::ops::views::Saved>) -> io::Result<()> {
    if let Some(s) = s {
        writeln!(out, "saved pending changes as {}", s.name)?;
    }
    Ok(())
}

/// Show REF's tree in the live mount (pending changes are saved first). A branch
/// attaches HEAD to it (new checkpoints move it) unless another mounted session
/// has it checked out; anything else detaches HEAD.
#[derive(clap::Args)]
pub struct Checkout {
    #[arg(value_name = "REF", help = REF_HELP, required_unless_present = "create")]
    target: Option<String>,
    /// Create branch NAME at REF (default: HEAD) and check it out.
    #[arg(short = 'b', value_name = "NAME")]
    create: Option<String>,
}

impl Human for treefork::ops::checkout::CheckedOut {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        saved(out, self.saved.as_ref())?;
        let id = short(&self.checkpoint.id);
        writeln!(out, "the workspace now shows {id}")?;
        for n in &self.notes {
            writeln!(out, "note: {n}")?;
        }
        match &self.branch {
            Some(b) => writeln!(out, "HEAD is on branch {b}"),
            None => writeln!(out, "HEAD is detached at {id}"),
        }
    }
}

impl Run for Checkout {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<Answer<treefork::verbs::Checkout>> =
            cx.session(Request::Checkout(treefork::verbs::Checkout {
                target: self.target.clone(),
                create: self.create.clone(),
            }))?;
        Ok(r.into())
    }
}

/// Rewind the whole tree, or only PATHs, to REF (saving pending changes first).
#[derive(clap::Args)]
pub struct Restore {
    #[arg(value_name = "REF", help = REF_HELP)]
    target: String,
    /// Paths to restore (default: everything).
    paths: Vec<PathBuf>,
    /// Only list what would change.
    #[arg(long)]
    dry_run: bool,
}

impl Human for treefork::ops::restore::Restored {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        saved(out, self.saved.as_ref().and_then(Option::as_ref))?;
        let verb = if self.dry_run { "would" } else { "did" };
        for c in &self.changes {
            let what = match c.change {
                Change::Added => "restore",
                Change::Deleted => "remove",
                Change::Modified => "rewind",
            };
            writeln!(out, "{verb} {what} {}", c.path)?;
        }
        Ok(())
    }
}

impl Run for Restore {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let ws = cx.workspace_root()?;
        let rel: Vec<String> = self
            .paths
            .iter()
            .map(|p| paths::workspace_relative(&ws, p))
            .collect::<Result<_>>()?;
        let r: Reply<Answer<treefork::verbs::Restore>> =
            cx.session(Request::Restore(treefork::verbs::Restore {
                target: self.target.clone(),
                paths: rel,
                dry_run: self.dry_run,
            }))?;
        Ok(r.into())
    }
}

/// Start a new session from REF (default: a fresh checkpoint) and mount it.
#[derive(clap::Args)]
pub struct Fork {
    /// New session name.
    name: String,
    #[arg(long, value_name = "REF", help = REF_HELP, conflicts_with = "from_message")]
    from: Option<String>,
    /// Start at this message of the conversation: the files as they were when it
    /// was recorded, the messages up to it.
    #[arg(long, value_name = "MSG")]
    from_message: Option<String>,
    /// Empty directory to mount the fork on.
    #[arg(long = "mount", value_name = "DIR")]
    mountpoint: PathBuf,
    #[command(flatten)]
    agent: AgentArgs,
}

/// The `fork` answer, with the mountpoint as this command resolved it.
struct Forked {
    answer: Answer<treefork::verbs::Fork>,
    mountpoint: PathBuf,
}

impl Human for Forked {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "forked session {} from {} at {}",
            self.answer.mounted.session,
            short(self.answer.checkpoint.as_deref().unwrap_or("")),
            self.mountpoint.display()
        )
    }
}

impl Fork {
    #[cfg(test)]
    pub(super) fn agent(&self) -> &AgentArgs {
        &self.agent
    }
}

impl Run for Fork {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        // A missing mountpoint is created by the daemon (as `git worktree add` does).
        let mp = paths::mountpoint(&self.mountpoint)
            .or_else(|_| std::path::absolute(&self.mountpoint).map_err(anyhow::Error::from))?;
        let r: Reply<Answer<treefork::verbs::Fork>> =
            cx.session(Request::Fork(treefork::verbs::Fork {
                name: self.name.clone(),
                from: self.from.clone(),
                mountpoint: mp.clone(),
                agent_socket: paths::absolute_arg(&self.agent.agent_socket)?,
                agent_uid: self.agent.agent_uid,
                from_message: self.from_message.clone(),
            }))?;
        Ok(r.map(|answer| Forked {
            answer,
            mountpoint: mp,
        })
        .into())
    }
}
