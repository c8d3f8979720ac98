//! Running the real `git` on a durable repository: the repository the user
//! imported a session from (`mount --from`) and promotes back to. Never on a
//! workspace: the daemon executes nothing from an agent's tree (a workspace's own
//! `.git` is read and written through the session, `ops::promote::workspace`).
//!
//! Invariants: git is a hardened child ([`crate::child`]: a built environment with
//! no repository-discovery variables (`GIT_DIR`, `GIT_WORK_TREE`, ...) and no
//! secret, no inherited descriptor, its own process group, a deadline and capped
//! output), `LC_ALL=C`, no pager or prompts, hooks and fsmonitor off
//! (`core.hooksPath=/dev/null`, `core.fsmonitor=false`: nothing runs but git) —
//! and, when the daemon runs as root and the repository is owned by another user,
//! as that user (its uid and its passwd group, never a group read off a path), so
//! every object, index and ref it writes belongs to the repository's owner and
//! git's ownership check (`safe.directory`) passes without being disabled.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::child::{self, Limits};
use crate::error::{Error, Result};

/// A `git -C repo` command, hardened, run as the repository's owner when we are
/// root.
pub fn command(repo: &Path) -> Result<Command> {
    let md = std::fs::metadata(repo).map_err(|e| Error::io(repo, e))?;
    let mut c = Command::new("git");
    child::harden(&mut c);
    c.arg("-C").arg(repo).args([
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
    ]);
    c.env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat");
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if me == 0 && md.uid() != 0 {
        c.uid(md.uid()).gid(primary_gid(md.uid()));
        // HOME of root would make git read root's config as the owner: use none.
        c.env("HOME", "/nonexistent").env_remove("XDG_CONFIG_HOME");
    }
    Ok(c)
}

/// The passwd group of `uid`; `nogroup` (65534) when it has no passwd entry.
/// Never the group of a path: a directory's group is whatever its owner set.
pub fn primary_gid(uid: u32) -> u32 {
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: zeroed passwd is a valid out-buffer.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid buffers and out-pointers, sizes as given.
    let r =
        unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    if r == 0 && !found.is_null() {
        pw.pw_gid
    } else {
        65534
    }
}

/// Run git (a short question) and return its output.
pub fn run(repo: &Path, args: &[&str]) -> Result<Output> {
    let mut c = command(repo)?;
    c.args(args);
    child::run(c, "git", Limits::SHORT, &mut child::input(b""))
}

/// Git's stdout when it succeeds, `None` when it exits non-zero (not a repository,
/// no such ref, ...).
pub fn output(repo: &Path, args: &[&str]) -> Result<Option<String>> {
    let o = run(repo, args)?;
    Ok(o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned()))
}
