//! `promote`: take the session's changes back to the durable git repository.
//!
//! A `BASELINE_CONFLICT` refusal is an error like any other (see `cli::failure`):
//! exit status 3, and with `--json` the error document
//! `{"ok":false,"error":{"code":"BASELINE_CONFLICT","message":..,"paths":[...]}}`.
//! A patch goes to stdout
//! (or, with `-o FILE`, to that file, written here by the client, never by the
//! daemon).

use std::path::PathBuf;

use super::output::{human_bytes, short};
use super::paths;
use super::plumbing::b64_decode;
use super::prelude::*;

/// Promote the session's changes to the git repository it was mounted from.
#[derive(clap::Args)]
pub struct Promote {
    /// Paths to promote (files or directories) [default: every touched file].
    paths: Vec<PathBuf>,
    /// commit: onto the durable branch; branch: a new branch; patch: a patch.
    #[arg(long, default_value = "commit", value_parser = ["commit", "branch", "patch"])]
    strategy: String,
    /// Commit message [default: names the session, its task and the paths].
    #[arg(short = 'm', long)]
    message: Option<String>,
    /// Print what would happen; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// With --strategy branch: the branch name [default: treefork/<session>].
    #[arg(long, value_name = "NAME")]
    branch: Option<String>,
    /// With --strategy branch: commit on the durable branch's head, not the baseline.
    #[arg(long)]
    onto_head: bool,
    /// Promote files larger than 50 MiB too.
    #[arg(long)]
    allow_large: bool,
    /// With --strategy patch: write the patch to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Change {
    path: String,
    change: String,
    mode: Option<String>,
    size: u64,
}

#[derive(Deserialize)]
struct Why {
    path: String,
    why: String,
}

#[derive(Deserialize)]
struct Target {
    #[serde(rename = "ref")]
    name: Option<String>,
    from: Option<String>,
    base: Option<String>,
}

#[derive(Deserialize)]
struct Promoted {
    dry_run: bool,
    strategy: String,
    #[serde(default)]
    changes: Vec<Change>,
    #[serde(default)]
    skipped: Vec<Why>,
    #[serde(default)]
    unchanged: Vec<Why>,
    #[serde(default)]
    transient: Vec<String>,
    target: Target,
    sha: Option<String>,
    branch: Option<String>,
    worktree_error: Option<String>,
    patch: Option<String>,
    patch_base64: Option<String>,
    #[serde(skip)]
    written_to: Option<PathBuf>,
}

impl Promoted {
    fn patch_bytes(&self) -> Option<Vec<u8>> {
        match (&self.patch, &self.patch_base64) {
            (Some(p), _) => Some(p.clone().into_bytes()),
            (None, Some(b)) => b64_decode(b),
            _ => None,
        }
    }
}

impl Human for Promoted {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        if !self.dry_run
            && self.written_to.is_none()
            && let Some(p) = self.patch_bytes()
        {
            // The patch alone, so `treefork promote --strategy patch > x.patch` works.
            return out.write_all(&p);
        }
        let lead = if self.dry_run {
            "would promote"
        } else {
            "promoted"
        };
        for c in &self.changes {
            let letter = super::output::change_letter(&c.change);
            let mode = c.mode.as_deref().unwrap_or("-");
            let size = human_bytes(c.size as f64);
            writeln!(out, "{lead} {letter} {mode} {size:>9}  {}", c.path)?;
        }
        for s in &self.skipped {
            writeln!(out, "skipped {}: {}", s.path, s.why)?;
        }
        for s in &self.unchanged {
            writeln!(out, "unchanged {}: {}", s.path, s.why)?;
        }
        if !self.transient.is_empty() {
            writeln!(
                out,
                "({} temporary file(s) created and removed in the session: nothing to promote)",
                self.transient.len()
            )?;
        }
        let from = |s: &Option<String>| s.as_deref().map(short).unwrap_or("nothing").to_string();
        match (self.dry_run, self.strategy.as_str()) {
            (true, "patch") => writeln!(out, "would write a patch")?,
            (true, _) => writeln!(
                out,
                "would move {} from {} (commit on {})",
                self.target.name.as_deref().unwrap_or("?"),
                from(&self.target.from),
                from(&self.target.base)
            )?,
            (false, "patch") => {
                let to = self.written_to.as_ref().map(|p| p.display().to_string());
                writeln!(out, "wrote the patch to {}", to.unwrap_or_default())?
            }
            (false, _) => writeln!(
                out,
                "committed {} on {}",
                from(&self.sha),
                self.branch.as_deref().unwrap_or("?")
            )?,
        }
        if let Some(e) = &self.worktree_error {
            writeln!(out, "note: the durable work tree was not updated: {e}")?;
        }
        Ok(())
    }
}

impl Run for Promote {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        if self.output.is_some() && self.strategy != "patch" {
            bail!("-o/--output goes with --strategy patch");
        }
        let rel: Vec<String> = if self.paths.is_empty() {
            Vec::new()
        } else {
            let ws = cx.workspace_root()?;
            self.paths
                .iter()
                .map(|p| paths::workspace_relative(&ws, p))
                .collect::<Result<_>>()?
        };
        let op = Op::Promote(treefork::verbs::Promote {
            paths: rel,
            strategy: self.strategy.clone(),
            message: self.message.clone(),
            dry_run: self.dry_run,
            branch: self.branch.clone(),
            onto_head: self.onto_head,
            allow_large: self.allow_large,
        });
        let r: Reply<Promoted> = cx.session(op)?;
        let mut written_to = None;
        if let (Some(file), false) = (&self.output, self.dry_run) {
            let bytes = r.body.patch_bytes().unwrap_or_default();
            std::fs::write(file, bytes)
                .map_err(|e| anyhow!("cannot write the patch to {}: {e}", file.display()))?;
            written_to = Some(file.clone());
        }
        Ok(r.map(|p| Promoted { written_to, ..p }).into())
    }
}
