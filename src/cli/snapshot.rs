//! `checkpoint`, `log`, `status`, `diff`: saving and inspecting the session's states.

use super::failure::Failure;
use super::output::{fmt_time, short};
use super::plumbing::DaemonError;
use super::prelude::*;
use std::path::{Path, PathBuf};

/// Take a checkpoint; prints its id.
#[derive(clap::Args)]
pub struct Checkpoint {
    /// Message.
    #[arg(short, long, default_value = "")]
    message: String,
    /// Why it is taken: manual, auto, before-risky, milestone, or a name of your own
    /// ([a-z][a-z0-9_-]*; names the daemon uses for its own checkpoints are refused).
    #[arg(long, default_value = "manual")]
    trigger: String,
    /// Data stored in the checkpoint record, as KEY=JSON (a bare word is a string);
    /// repeatable.
    #[arg(long = "meta", value_name = "KEY=JSON", value_parser = parse_meta)]
    meta: Vec<(String, serde_json::Value)>,
}

/// `KEY=JSON`, or `KEY=word` taken as the string "word".
fn parse_meta(s: &str) -> std::result::Result<(String, serde_json::Value), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=JSON, got {s:?}"))?;
    let v = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
    Ok((k.to_string(), v))
}

impl Human for treefork::ops::checkpoint::CheckpointAnswer {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{}", self.checkpoint.id)
    }
}

impl Run for Checkpoint {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<Answer<treefork::verbs::Checkpoint>> =
            cx.session(Request::Checkpoint(treefork::verbs::Checkpoint {
                message: self.message.clone(),
                trigger: self.trigger.clone(),
                meta: self.meta.iter().cloned().collect(),
            }))?;
        Ok(r.into())
    }
}

/// The checkpoints REF (default HEAD) descends from, through every parent (a
/// merge's merged side too), newest first; --first-parent for the session's
/// own line only.
#[derive(clap::Args)]
pub struct Log {
    /// Follow only first parents: the session's own line, not what was merged.
    #[arg(long)]
    first_parent: bool,
    /// Where to start: HEAD (default), @, @{-N}, exec@N, a branch or id prefix,
    /// with ~N / ^N suffixes.
    #[arg(value_name = "REF")]
    from: Option<String>,
    /// Show at most N.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 20)]
    limit: usize,
    /// One line each: short id and message.
    #[arg(long)]
    oneline: bool,
    /// Only checkpoints that changed this path (a file, or anything under a directory).
    #[arg(last = true, value_name = "PATH")]
    path: Option<std::path::PathBuf>,
}

/// The `log` answer, rendered one line per checkpoint (or `--oneline`).
struct History {
    log: Answer<treefork::verbs::Log>,
    oneline: bool,
}

/// How much a checkpoint changed against its parent, as `show` compares it: a
/// first checkpoint has none (`first`).
fn changed(c: &treefork::ops::views::CheckpointView) -> String {
    match c.parent {
        None => "first".to_string(),
        Some(_) => format!("{} changed", c.files_changed),
    }
}

impl Human for History {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for c in &self.log.checkpoints {
            if self.oneline {
                writeln!(out, "{} {}", short(&c.id), c.message)?;
                continue;
            }
            writeln!(
                out,
                "{}  {}  {:<14} {:>13}  {}",
                short(&c.id),
                fmt_time(c.time),
                c.trigger,
                changed(c),
                c.message,
            )?;
        }
        Ok(())
    }
}

impl Run for Log {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let path = match &self.path {
            Some(p) => Some(super::paths::workspace_relative(&cx.workspace_root()?, p)?),
            None => None,
        };
        let r: Reply<Answer<treefork::verbs::Log>> =
            cx.session(Request::Log(treefork::verbs::Log {
                limit: Some(self.limit),
                from: self.from.clone(),
                path,
                first_parent: self.first_parent,
            }))?;
        let oneline = self.oneline;
        Ok(r.map(|log| History { log, oneline }).into())
    }
}

/// Paths added, modified or deleted since the last checkpoint. Paths the
/// workspace's .gitignore files (root and nested, and .git/info/exclude) ignore
/// are left out, as `git status` leaves them out, and `.git` never appears.
#[derive(clap::Args)]
pub struct Status {
    /// List ignored paths too, each marked "(ignored)".
    #[arg(long)]
    ignored: bool,
}

/// How an ignored path is marked in people's output.
const IGNORED_MARK: &str = " (ignored)";

fn mark(c: &treefork::ops::views::PathChange) -> &'static str {
    if c.ignored { IGNORED_MARK } else { "" }
}

impl Human for treefork::ops::status::StatusAnswer {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        if let Some(b) = &self.branch {
            writeln!(out, "on branch {b}")?;
        }
        if let Some(m) = &self.branch_moved {
            writeln!(out, "warning: {}", m.message)?;
        }
        if let Some(m) = &self.store_full {
            writeln!(out, "warning: {m}")?;
        }
        for c in &self.changes {
            writeln!(out, "{} {}{}", c.change.letter(), c.path, mark(c))?;
        }
        Ok(())
    }
}

impl Run for Status {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<Answer<treefork::verbs::Status>> =
            cx.session(Request::Status(treefork::verbs::Status {
                ignored: self.ignored,
            }))?;
        Ok(r.into())
    }
}

/// Differences between two states (default: HEAD and the live working state),
/// optionally only under some paths. Paths the workspace's .gitignore files ignore
/// are left out (`--ignored` lists them too) and `.git` never appears.
///
/// `treefork diff [REF [REF]] [--] [PATH...]`: without `--`, an argument that
/// names an existing file or directory is a path, and so is every one after it.
/// Paths are relative to the current directory inside the workspace, else to the
/// workspace root.
#[derive(clap::Args)]
pub struct Diff {
    /// Old side, new side [default: HEAD and WORKING], then paths. A side is a
    /// checkpoint id, branch, HEAD, HEAD~N, WORKING, or baseline (the tree the
    /// session started from: what it changed against the repository).
    #[arg(value_name = "REF_OR_PATH")]
    args: Vec<String>,
    /// Only these files or directories (after `--`: never taken for refs).
    #[arg(last = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// List ignored paths too, each marked "(ignored)".
    #[arg(long)]
    ignored: bool,
    /// Per-file line counts.
    #[arg(long, conflicts_with_all = ["name_status", "patch"])]
    stat: bool,
    /// One line per path with A/M/D (default).
    #[arg(long)]
    #[allow(
        dead_code,
        reason = "the default mode; accepted so scripts can name it"
    )]
    name_status: bool,
    /// Unified diff of text files.
    #[arg(long, short = 'p', conflicts_with = "name_status")]
    patch: bool,
}

/// How `diff` shows its result.
#[derive(Clone, Copy, PartialEq)]
enum DiffMode {
    NameStatus,
    Stat,
    Patch,
}

impl DiffMode {
    fn wire(self) -> &'static str {
        match self {
            DiffMode::NameStatus => "name-status",
            DiffMode::Stat => "stat",
            DiffMode::Patch => "patch",
        }
    }
}

/// The `diff` answer, rendered in the mode asked for.
struct Differences {
    diff: Answer<treefork::verbs::Diff>,
    mode: DiffMode,
}

impl Differences {
    fn stat(&self, out: &mut dyn Write) -> io::Result<()> {
        let (mut adds, mut dels) = (0, 0);
        for e in &self.diff.entries {
            let path = &e.change.path;
            let m = mark(&e.change);
            if e.binary == Some(true) {
                writeln!(out, " {path} | binary{m}")?;
                continue;
            }
            let (a, d) = (e.added.unwrap_or(0), e.removed.unwrap_or(0));
            adds += a;
            dels += d;
            writeln!(
                out,
                " {path} | {} {}{}{m}",
                a + d,
                "+".repeat(a.min(40) as usize),
                "-".repeat(d.min(40) as usize)
            )?;
        }
        let n = self.diff.entries.len();
        writeln!(
            out,
            " {n} paths changed, {adds} insertions(+), {dels} deletions(-)"
        )
    }
}

impl Human for Differences {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        // On stderr: a patch on stdout stays a patch.
        if let Some(m) = &self.diff.store_full {
            eprintln!("warning: {m}");
        }
        match self.mode {
            DiffMode::Patch => write!(out, "{}", self.diff.patch.as_deref().unwrap_or("")),
            DiffMode::Stat => self.stat(out),
            DiffMode::NameStatus => {
                for e in &self.diff.entries {
                    let c = &e.change;
                    writeln!(out, "{}\t{}{}", c.change.letter(), c.path, mark(c))?;
                }
                Ok(())
            }
        }
    }
}

impl Run for Diff {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let mode = if self.stat {
            DiffMode::Stat
        } else if self.patch {
            DiffMode::Patch
        } else {
            DiffMode::NameStatus
        };
        let (sides, paths) = self.sides_and_paths(cx)?;
        let op = |stream| {
            Request::Diff(treefork::verbs::Diff {
                a: sides.first().cloned(),
                b: sides.get(1).cloned(),
                mode: Some(mode.wire().into()),
                stream,
                ignored: self.ignored,
                paths: paths.clone(),
            })
        };
        let r: Reply<Answer<treefork::verbs::Diff>> = if mode == DiffMode::Patch {
            match stream_patch(cx, op(true)) {
                // A daemon that predates `stream` refuses the field: ask it for the
                // whole patch instead (nothing was printed yet).
                Err(e)
                    if e.downcast_ref::<DaemonError>()
                        .is_some_and(|d| d.code == "bad_request") =>
                {
                    cx.session(op(false))?
                }
                r => r?,
            }
        } else {
            cx.session(op(false))?
        };
        Ok(r.map(|diff| Differences { diff, mode }).into())
    }
}

impl Diff {
    /// The refs (at most two) and the workspace-relative paths of the arguments.
    fn sides_and_paths(&self, cx: &Ctx) -> Result<(Vec<String>, Vec<String>)> {
        let mut sides = Vec::new();
        let mut paths = Vec::new();
        let ws = if self.paths.is_empty() && self.args.is_empty() {
            None
        } else {
            Some(cx.workspace_root()?)
        };
        for (i, arg) in self.args.iter().enumerate() {
            let ws = ws.as_deref().expect("arguments were given");
            let named = super::paths::in_workspace(ws, Path::new(arg));
            let exists = named
                .as_ref()
                .is_ok_and(|(_, abs)| abs.symlink_metadata().is_ok());
            if self.paths.is_empty() && (exists || !paths.is_empty()) {
                let (rel, _) = named?;
                if !exists {
                    return Err(Failure::usage(format!(
                        "{arg}: no such file or directory in the workspace (put refs \
                         before paths, or separate them with --)"
                    )));
                }
                paths.push(rel);
            } else if sides.len() < 2 {
                sides.push(arg.clone());
            } else {
                let what = if self.paths.is_empty() {
                    "no such file or directory in the workspace, and"
                } else {
                    "before --,"
                };
                return Err(Failure::usage(format!(
                    "{arg}: {what} a diff compares at most two refs (argument {})",
                    i + 1
                )));
            }
        }
        for p in &self.paths {
            let ws = ws.as_deref().expect("paths were given");
            paths.push(super::paths::in_workspace(ws, p)?.0);
        }
        Ok((sides, paths))
    }
}

/// Run a streamed `diff --patch`: each file's patch is written to stdout as it
/// arrives (for people), or collected into the reply's `patch` (for `--json`, whose
/// document is then the same as an unstreamed reply's).
fn stream_patch(cx: &Ctx, op: Request) -> Result<Reply<Answer<treefork::verbs::Diff>>> {
    let json = cx.json();
    let mut text = String::new();
    let mut failed: Option<io::Error> = None;
    let mut on_event = |ev: &serde_json::Value| {
        if ev["event"] != "patch" || failed.is_some() {
            return;
        }
        let chunk = ev["text"].as_str().unwrap_or("");
        if json {
            text.push_str(chunk);
            return;
        }
        let mut out = io::stdout().lock();
        if let Err(e) = out.write_all(chunk.as_bytes()).and_then(|()| out.flush()) {
            failed = Some(e);
        }
    };
    let r: Reply<serde_json::Value> = cx.session_events(op, &mut on_event)?;
    if let Some(e) = failed {
        return Err(anyhow::Error::new(e).context("cannot write the patch to stdout"));
    }
    let mut raw = r.body;
    if json {
        raw["patch"] = serde_json::Value::String(text);
    }
    Reply::parse(raw)
}
