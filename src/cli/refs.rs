//! `branch`, `branches`, `checkout`, `restore`, `fork`: naming checkpoints and
//! moving between them.

use std::path::PathBuf;

use super::flags::{AgentArgs, REF_HELP};
use super::output::short;
use super::paths;
use super::prelude::*;
use super::snapshot::Change;

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

/// `branch NAME -> ID`, `deleted branch NAME` or `renamed branch OLD -> NEW`.
#[derive(Deserialize)]
struct Branched {
    checkpoint: Option<String>,
    #[serde(skip)]
    name: String,
    #[serde(skip)]
    deleted: bool,
    #[serde(skip)]
    renamed_to: Option<String>,
    #[serde(default)]
    shared_with: Option<String>,
}

impl Human for Branched {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let name = &self.name;
        if self.deleted {
            writeln!(out, "deleted branch {name}")
        } else if let Some(with) = &self.shared_with {
            writeln!(out, "shared branch {name} with session {with}")
        } else if let Some(to) = &self.renamed_to {
            writeln!(out, "renamed branch {name} -> {to}")
        } else {
            let id = short(self.checkpoint.as_deref().unwrap_or(""));
            writeln!(out, "branch {name} -> {id}")
        }
    }
}

impl Run for Branch {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let Some(name) = self.name.clone() else {
            return list_branches(cx, true);
        };
        let op = if let Some(with) = &self.share {
            Op::BranchShare(treefork::verbs::BranchShare {
                name: name.clone(),
                with: with.clone(),
            })
        } else if self.delete {
            Op::BranchDelete(treefork::verbs::BranchDelete { name: name.clone() })
        } else if self.rename {
            let Some(new) = self.from.clone() else {
                bail!("branch -m needs the old and the new name");
            };
            Op::BranchRename(treefork::verbs::BranchRename {
                old: name.clone(),
                new,
            })
        } else {
            Op::Branch(treefork::verbs::Branch {
                name: name.clone(),
                from: self.from.clone(),
            })
        };
        let r: Reply<Branched> = cx.session(op)?;
        let deleted = self.delete;
        let renamed_to = self.rename.then(|| self.from.clone()).flatten();
        Ok(r.map(|b| Branched {
            name,
            deleted,
            renamed_to,
            ..b
        })
        .into())
    }
}

/// List branches.
#[derive(clap::Args)]
pub struct Branches {}

#[derive(Deserialize)]
struct BranchList {
    #[serde(default)]
    branches: Vec<BranchRow>,
    /// The branch HEAD is on (marked with `*`), when asked from a session.
    #[serde(skip)]
    current: Option<String>,
    #[serde(skip)]
    mark: bool,
}

#[derive(Deserialize)]
struct BranchRow {
    name: Option<String>,
    checkpoint: Option<String>,
    message: Option<String>,
}

impl Human for BranchList {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for b in &self.branches {
            let name = b.name.as_deref().unwrap_or("");
            let star = if self.current.as_deref() == Some(name) {
                "* "
            } else {
                "  "
            };
            writeln!(
                out,
                "{}{:<40} {}  {}",
                if self.mark { star } else { "" },
                name,
                short(b.checkpoint.as_deref().unwrap_or("")),
                b.message.as_deref().unwrap_or(""),
            )?;
        }
        Ok(())
    }
}

impl Run for Branches {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        list_branches(cx, false)
    }
}

/// The branches; with `mark`, the one HEAD is on is marked `*` (and `current` in
/// JSON).
fn list_branches(cx: &Ctx, mark: bool) -> Result<Outcome> {
    let current = if mark {
        cx.session::<Answer<treefork::verbs::Status>>(Op::Status(treefork::verbs::Status {}))
            .ok()
            .and_then(|r| r.body.branch)
    } else {
        None
    };
    let mut r: Reply<BranchList> = cx.session(Op::Branches(treefork::verbs::Branches {}))?;
    if mark {
        r = r.with_field("current", serde_json::json!(current));
    }
    Ok(r.map(|b| BranchList { current, mark, ..b }).into())
}

/// Pending changes saved before a checkout or restore.
#[derive(Deserialize)]
struct Saved {
    #[serde(rename = "ref")]
    name: Option<String>,
}

fn saved(out: &mut dyn Write, s: &Option<Saved>) -> io::Result<()> {
    if let Some(r) = s.as_ref().and_then(|s| s.name.as_deref()) {
        writeln!(out, "saved pending changes as {r}")?;
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

#[derive(Deserialize)]
struct CheckedOut {
    saved: Option<Saved>,
    checkpoint: Option<Shown>,
    branch: Option<String>,
    #[serde(default)]
    notes: Vec<String>,
}

#[derive(Deserialize)]
struct Shown {
    id: Option<String>,
}

impl Human for CheckedOut {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        saved(out, &self.saved)?;
        let id = short(
            self.checkpoint
                .as_ref()
                .and_then(|c| c.id.as_deref())
                .unwrap_or(""),
        );
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
        let r: Reply<CheckedOut> = cx.session(Op::Checkout(treefork::verbs::Checkout {
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

#[derive(Deserialize)]
struct Restored {
    saved: Option<Saved>,
    #[serde(default)]
    changes: Vec<Change>,
    #[serde(skip)]
    dry_run: bool,
}

impl Human for Restored {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        saved(out, &self.saved)?;
        let verb = if self.dry_run { "would" } else { "did" };
        for c in &self.changes {
            let what = match c.change() {
                "added" => "restore",
                "deleted" => "remove",
                _ => "rewind",
            };
            writeln!(out, "{verb} {what} {}", c.path())?;
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
        let r: Reply<Restored> = cx.session(Op::Restore(treefork::verbs::Restore {
            target: self.target.clone(),
            paths: rel,
            dry_run: self.dry_run,
        }))?;
        let dry_run = self.dry_run;
        Ok(r.map(|x| Restored { dry_run, ..x }).into())
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

#[derive(Deserialize)]
struct Forked {
    checkpoint: Option<String>,
    #[serde(skip)]
    name: String,
    #[serde(skip)]
    mountpoint: PathBuf,
}

impl Human for Forked {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "forked session {} from {} at {}",
            self.name,
            short(self.checkpoint.as_deref().unwrap_or("")),
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
        let r: Reply<Forked> = cx.session(Op::Fork(treefork::verbs::Fork {
            name: self.name.clone(),
            from: self.from.clone(),
            mountpoint: mp.clone(),
            agent_socket: paths::absolute_arg(&self.agent.agent_socket)?,
            agent_uid: self.agent.agent_uid,
            from_message: self.from_message.clone(),
        }))?;
        let name = self.name.clone();
        Ok(r.map(|f| Forked {
            name,
            mountpoint: mp,
            ..f
        })
        .into())
    }
}
