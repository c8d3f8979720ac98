//! `branch`, `branches`, `checkout`, `restore`, `fork`: naming checkpoints and
//! moving between them.

use std::path::PathBuf;

use super::flags::{AgentArgs, REF_HELP};
use super::output::short;
use super::paths;
use super::prelude::*;
use super::snapshot::Change;

/// Create a branch at REF (default: HEAD, checkpointing pending changes), or delete one.
#[derive(clap::Args)]
pub struct Branch {
    /// Branch name.
    name: String,
    #[arg(value_name = "REF", help = REF_HELP)]
    from: Option<String>,
    /// Delete the branch.
    #[arg(short = 'd', long)]
    delete: bool,
}

/// `branch NAME -> ID` or `deleted branch NAME`.
#[derive(Deserialize)]
struct Branched {
    checkpoint: Option<String>,
    #[serde(skip)]
    name: String,
    #[serde(skip)]
    deleted: bool,
}

impl Human for Branched {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let name = &self.name;
        if self.deleted {
            writeln!(out, "deleted branch {name}")
        } else {
            let id = short(self.checkpoint.as_deref().unwrap_or(""));
            writeln!(out, "branch {name} -> {id}")
        }
    }
}

impl Run for Branch {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let name = self.name.clone();
        let op = if self.delete {
            Op::BranchDelete { name: name.clone() }
        } else {
            Op::Branch {
                name: name.clone(),
                from: self.from.clone(),
            }
        };
        let r: Reply<Branched> = cx.session(op)?;
        let deleted = self.delete;
        Ok(r.map(|b| Branched { name, deleted, ..b }).into())
    }
}

/// List branches.
#[derive(clap::Args)]
pub struct Branches {}

#[derive(Deserialize)]
struct BranchList {
    #[serde(default)]
    branches: Vec<BranchRow>,
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
            writeln!(
                out,
                "{:<40} {}  {}",
                b.name.as_deref().unwrap_or(""),
                short(b.checkpoint.as_deref().unwrap_or("")),
                b.message.as_deref().unwrap_or(""),
            )?;
        }
        Ok(())
    }
}

impl Run for Branches {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<BranchList> = cx.session(Op::Branches)?;
        Ok(r.into())
    }
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

/// Show REF's tree in the live mount (pending changes are saved first).
#[derive(clap::Args)]
pub struct Checkout {
    #[arg(value_name = "REF", help = REF_HELP)]
    target: String,
}

#[derive(Deserialize)]
struct CheckedOut {
    saved: Option<Saved>,
    checkpoint: Option<Shown>,
}

#[derive(Deserialize)]
struct Shown {
    id: Option<String>,
}

impl Human for CheckedOut {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        saved(out, &self.saved)?;
        let id = self.checkpoint.as_ref().and_then(|c| c.id.as_deref());
        writeln!(out, "the workspace now shows {}", short(id.unwrap_or("")))
    }
}

impl Run for Checkout {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<CheckedOut> = cx.session(Op::Checkout {
            target: self.target.clone(),
        })?;
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
        let r: Reply<Restored> = cx.session(Op::Restore {
            target: self.target.clone(),
            paths: rel,
            dry_run: self.dry_run,
        })?;
        let dry_run = self.dry_run;
        Ok(r.map(|x| Restored { dry_run, ..x }).into())
    }
}

/// Start a new session from REF (default: a fresh checkpoint) and mount it.
#[derive(clap::Args)]
pub struct Fork {
    /// New session name.
    name: String,
    #[arg(long, value_name = "REF", help = REF_HELP)]
    from: Option<String>,
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
        let r: Reply<Forked> = cx.session(Op::Fork {
            name: self.name.clone(),
            from: self.from.clone(),
            mountpoint: mp.clone(),
            agent_socket: paths::absolute_arg(&self.agent.agent_socket)?,
            agent_uid: self.agent.agent_uid,
        })?;
        let name = self.name.clone();
        Ok(r.map(|f| Forked {
            name,
            mountpoint: mp,
            ..f
        })
        .into())
    }
}
