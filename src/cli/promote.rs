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
    /// List every skipped path one by one (ignored ones are otherwise counted
    /// per top directory).
    #[arg(long)]
    list_skipped: bool,
}

/// The answer, where `-o` wrote the patch, and whether to list every skip.
struct Promoted {
    answer: Answer<treefork::verbs::Promote>,
    written_to: Option<PathBuf>,
    list_skipped: bool,
}

/// Ignored paths listed one by one up to this many; past it, counted per top
/// directory (a build directory holds thousands).
const IGNORED_LISTED: usize = 10;

/// The skipped paths for people: every one with its reason, except paths the
/// repository ignores when there are many — those as one count per top
/// directory (or file), largest first.
fn write_skipped(
    out: &mut dyn Write,
    skipped: &[treefork::ops::promote::answer::PathWhy],
    all: bool,
) -> io::Result<()> {
    let ignored = skipped
        .iter()
        .filter(|s| s.why == treefork::ops::promote::IGNORED);
    let n = ignored.clone().count();
    for s in skipped {
        if all || n <= IGNORED_LISTED || s.why != treefork::ops::promote::IGNORED {
            writeln!(out, "skipped {}: {}", s.path, s.why)?;
        }
    }
    if all || n <= IGNORED_LISTED {
        return Ok(());
    }
    let mut by_top: std::collections::BTreeMap<String, usize> = Default::default();
    for s in ignored {
        let top = match s.path.split_once('/') {
            Some((d, _)) => format!("{d}/"),
            None => s.path.clone(),
        };
        *by_top.entry(top).or_default() += 1;
    }
    let mut tops: Vec<(String, usize)> = by_top.into_iter().collect();
    tops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let shown: Vec<String> = tops.iter().map(|(t, c)| format!("{t} ({c})")).collect();
    writeln!(
        out,
        "skipped {n} paths the repository ignores: {} (list them with --list-skipped)",
        shown.join(", ")
    )
}

/// The patch's bytes, when the answer carries one.
fn patch_bytes(a: &Answer<treefork::verbs::Promote>) -> Option<Vec<u8>> {
    match (&a.landed.patch, &a.landed.patch_base64) {
        (Some(p), _) => Some(p.clone().into_bytes()),
        (None, Some(b)) => b64_decode(b),
        _ => None,
    }
}

impl Human for Promoted {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let a = &self.answer;
        if !a.dry_run
            && self.written_to.is_none()
            && let Some(p) = patch_bytes(a)
        {
            // The patch alone, so `treefork promote --strategy patch > x.patch` works.
            return out.write_all(&p);
        }
        // A patch promotes nothing: its lines are what the patch holds.
        let lead = match (a.dry_run, a.strategy.as_str()) {
            (_, "patch") => "patch",
            (true, _) => "would promote",
            (false, _) => "promoted",
        };
        for c in &a.changes {
            let letter = c.change.letter();
            let mode = c.mode.as_deref().unwrap_or("-");
            let size = human_bytes(c.size as f64);
            let drift = match c.drifted {
                Some(d) => format!("  CONFLICT: {} in the durable repository", drift_word(d)),
                None => String::new(),
            };
            writeln!(out, "{lead} {letter} {mode} {size:>9}  {}{drift}", c.path)?;
        }
        write_skipped(out, &a.skipped, self.list_skipped)?;
        for s in &a.unchanged {
            writeln!(out, "unchanged {}: {}", s.path, s.why)?;
        }
        if !a.transient.is_empty() {
            writeln!(
                out,
                "({} temporary file(s) created and removed in the session: nothing to promote)",
                a.transient.len()
            )?;
        }
        let from = |s: &Option<String>| s.as_deref().map(short).unwrap_or("nothing").to_string();
        let commit = a.landed.commit.as_ref();
        match (a.dry_run, a.strategy.as_str()) {
            (true, "patch") => writeln!(out, "would write a patch")?,
            (true, _) => writeln!(
                out,
                "would move {} from {} (commit on {})",
                a.target.name.as_deref().unwrap_or("?"),
                from(&a.target.from),
                from(&a.target.base)
            )?,
            (false, "patch") => {
                let to = self.written_to.as_ref().map(|p| p.display().to_string());
                writeln!(
                    out,
                    "wrote the patch to {} (nothing was promoted: `git apply` it in the repository)",
                    to.unwrap_or_default()
                )?
            }
            (false, _) => writeln!(
                out,
                "committed {} on {}",
                from(&commit.map(|c| c.sha.clone())),
                commit.map_or("?", |c| c.branch.as_str())
            )?,
        }
        if let Some(e) = commit.and_then(|c| c.worktree_error.as_ref()) {
            writeln!(out, "note: the durable work tree was not updated: {e}")?;
        }
        if let Some(l) = &a.lifecycle {
            writeln!(out, "{l}")?;
        }
        if let Some(n) = &a.next {
            writeln!(out, "{n}")?;
        }
        if let Some(w) = &a.workspace_git {
            writeln!(out, "{w}")?;
        }
        Ok(())
    }
}

fn drift_word(d: treefork::error::Drift) -> &'static str {
    match d {
        treefork::error::Drift::Committed => "committed",
        treefork::error::Drift::Staged => "staged",
        treefork::error::Drift::Unstaged => "changed, not staged",
    }
}

impl Run for Promote {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        if self.output.is_some() && self.strategy != "patch" {
            return Err(super::failure::Failure::usage(
                "-o/--output goes with --strategy patch",
            ));
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
        let op = Request::Promote(treefork::verbs::Promote {
            paths: rel,
            strategy: self.strategy.clone(),
            message: self.message.clone(),
            dry_run: self.dry_run,
            branch: self.branch.clone(),
            onto_head: self.onto_head,
            allow_large: self.allow_large,
        });
        let r: Reply<Answer<treefork::verbs::Promote>> = cx.session(op)?;
        let mut written_to = None;
        if let (Some(file), false) = (&self.output, self.dry_run) {
            let bytes = patch_bytes(&r.body).unwrap_or_default();
            std::fs::write(file, bytes)
                .map_err(|e| anyhow!("cannot write the patch to {}: {e}", file.display()))?;
            written_to = Some(file.clone());
        }
        Ok(r.map(|answer| Promoted {
            answer,
            written_to,
            list_skipped: self.list_skipped,
        })
        .into())
    }
}
