//! Running the real `git` on a durable repository.
//!
//! Invariants: git runs with a clean environment for repository discovery (no
//! inherited `GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, ...), `LC_ALL=C`, no
//! pager or prompts, and — when the daemon runs as root and the repository is
//! owned by another user — as that user (its uid and gid), so every object, index
//! and ref it writes belongs to the repository's owner and git's ownership check
//! (`safe.directory`) passes without being disabled.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::error::{Error, Result};

/// Variables that would point git somewhere else than `-C repo`.
const SCRUBBED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
];

/// A `git -C repo` command, run as the repository's owner when we are root.
pub fn command(repo: &Path) -> Result<Command> {
    let md = std::fs::metadata(repo).map_err(|e| Error::io(repo, e))?;
    let mut c = Command::new("git");
    c.arg("-C").arg(repo);
    for v in SCRUBBED {
        c.env_remove(v);
    }
    c.env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .stdin(Stdio::null());
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if me == 0 && md.uid() != 0 {
        c.uid(md.uid()).gid(md.gid());
        // HOME of root would make git read root's config as the owner: use none.
        c.env_remove("HOME").env("HOME", "/nonexistent");
    }
    Ok(c)
}

/// Run git and return its output.
pub fn run(repo: &Path, args: &[&str]) -> Result<Output> {
    command(repo)?
        .args(args)
        .output()
        .map_err(|e| Error::io(Path::new("git"), e))
}

/// Git's stdout when it succeeds, `None` when it exits non-zero (not a repository,
/// no such ref, ...).
pub fn output(repo: &Path, args: &[&str]) -> Result<Option<String>> {
    let o = run(repo, args)?;
    Ok(o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned()))
}
