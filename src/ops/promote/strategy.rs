//! The three ways a plan lands, all with the real git:
//!
//! - **commit**: a tree built in a temporary index (`read-tree HEAD`, the plan's
//!   entries by `update-index`, `write-tree`), one commit on the durable branch's
//!   head (`commit-tree`), the branch moved by compare-and-swap (`update-ref REF NEW
//!   OLD`, OLD the head the drift check read: a commit landing meanwhile fails the
//!   swap, nothing is clobbered), then the durable index and work tree brought to
//!   the new commit for the plan's paths only (`rm`, `checkout NEW -- paths`).
//! - **branch**: the same commit on the baseline (or the head), stored as a new
//!   branch (`update-ref REF NEW ""`: refused if it exists); work tree untouched.
//! - **patch**: both trees built in a scratch object directory (the repository is
//!   not written), `git diff --binary` between them.

use super::answer::Committed as Made;
use super::drift::Durable;
use super::gitio::{Git, nul_list};
use super::plan::{Act, Item};
use super::scratch::Scratch;
use crate::error::{Error, Result};
use crate::store::ObjectStore;

/// Build, in the temporary index of `git`, the tree of `parent` (a tree-ish;
/// `None`: empty) with `items` applied; its id.
pub(super) fn build_tree(git: &Git, parent: Option<&str>, items: &[Item]) -> Result<String> {
    match parent {
        Some(p) => git.ok(&["read-tree", p])?,
        None => git.ok(&["read-tree", "--empty"])?,
    };
    let dels = nul_list(
        items
            .iter()
            .filter(|i| i.act == Act::Deleted)
            .map(|i| i.path.as_slice()),
    );
    if !dels.is_empty() {
        git.ok_in(&["update-index", "-z", "--force-remove", "--stdin"], &dels)?;
    }
    let mut info = Vec::new();
    for i in items.iter().filter(|i| i.act != Act::Deleted) {
        let (Some(mode), Some(sha)) = (i.mode, &i.sha) else {
            continue;
        };
        info.extend_from_slice(format!("{mode} {sha}\t").as_bytes());
        info.extend_from_slice(&i.path);
        info.push(0);
    }
    if !info.is_empty() {
        git.ok_in(&["update-index", "-z", "--index-info"], &info)?;
    }
    git.line(&["write-tree"])
}

/// `git` with a committer and author identity: the repository's own when it has
/// one, else `treefork <treefork@localhost>`.
fn with_identity(git: &Git) -> Result<Git> {
    if git.try_line(&["var", "GIT_COMMITTER_IDENT"])?.is_some()
        && git.try_line(&["var", "GIT_AUTHOR_IDENT"])?.is_some()
    {
        return Ok(git.clone());
    }
    Ok(git
        .with("GIT_AUTHOR_NAME", "treefork")
        .with("GIT_AUTHOR_EMAIL", "treefork@localhost")
        .with("GIT_COMMITTER_NAME", "treefork")
        .with("GIT_COMMITTER_EMAIL", "treefork@localhost"))
}

fn commit_tree(git: &Git, tree: &str, parent: &str, message: &str) -> Result<String> {
    let git = with_identity(git)?;
    let out = git.ok_in(
        &["commit-tree", tree, "-p", parent, "-F", "-"],
        message.as_bytes(),
    )?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

/// The `commit` strategy.
pub(super) fn commit(
    git: &Git,
    scratch: &Scratch,
    d: &Durable,
    items: &[Item],
    message: &str,
) -> Result<Made> {
    let branch = d.branch.clone().ok_or_else(|| {
        Error::Invalid("the baseline was a detached HEAD: use --strategy branch or patch".into())
    })?;
    let idx = git.with("GIT_INDEX_FILE", scratch.path("index"));
    let tree = build_tree(&idx, Some(&d.head), items)?;
    let sha = commit_tree(git, &tree, &d.head, message)?;
    let refname = format!("refs/heads/{branch}");
    let reflog = "treefork promote";
    let o = git.run_in(&["update-ref", "-m", reflog, &refname, &sha, &d.head], b"")?;
    if !o.status.success() {
        return Err(Error::Conflict(format!(
            "branch {branch} moved while promoting (it was {}): nothing was promoted; review the new commits and run promote again",
            &d.head[..d.head.len().min(12)]
        )));
    }
    let chosen: Vec<Vec<u8>> = items.iter().map(|i| i.path.clone()).collect();
    let edited = if d.checked_out {
        super::drift::local_edits(git, &d.head, &chosen)?
    } else {
        Vec::new()
    };
    let worktree_error = if !edited.is_empty() {
        Some(format!(
            "the durable work tree changed meanwhile at {}: left as it is (the commit is on {branch}; compare with `git diff`)",
            edited.join(", ")
        ))
    } else if d.checked_out {
        sync_worktree(git, &sha, items).err().map(|e| e.to_string())
    } else {
        Some(format!(
            "the durable work tree does not have {branch} checked out: only the branch moved"
        ))
    };
    Ok(Made {
        sha,
        branch,
        parent: d.head.clone(),
        worktree_error,
    })
}

/// Bring the durable index and work tree to commit `sha` for `items`' paths only.
fn sync_worktree(git: &Git, sha: &str, items: &[Item]) -> Result<()> {
    let git = git.with("GIT_LITERAL_PATHSPECS", "1");
    let paths = |act: fn(Act) -> bool| {
        nul_list(
            items
                .iter()
                .filter(|i| act(i.act))
                .map(|i| i.path.as_slice()),
        )
    };
    let dels = paths(|a| a == Act::Deleted);
    if !dels.is_empty() {
        git.ok_in(
            &[
                "rm",
                "-q",
                "-f",
                "--ignore-unmatch",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            &dels,
        )?;
    }
    let rest = paths(|a| a != Act::Deleted);
    if !rest.is_empty() {
        git.ok_in(
            &[
                "checkout",
                sha,
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            &rest,
        )?;
    }
    Ok(())
}

/// The `branch` strategy: one commit on `base`, stored as new branch `name`.
pub(super) fn branch(
    git: &Git,
    scratch: &Scratch,
    name: &str,
    base: &str,
    items: &[Item],
    message: &str,
) -> Result<Made> {
    let refname = format!("refs/heads/{name}");
    if git
        .try_line(&["rev-parse", "-q", "--verify", &refname])?
        .is_some()
    {
        return Err(Error::Conflict(format!(
            "branch {name} already exists in the repository; choose another with --branch"
        )));
    }
    let idx = git.with("GIT_INDEX_FILE", scratch.path("index"));
    let tree = build_tree(&idx, Some(base), items)?;
    let sha = commit_tree(git, &tree, base, message)?;
    let o = git.run_in(
        &["update-ref", "-m", "treefork promote", &refname, &sha, ""],
        b"",
    )?;
    if !o.status.success() {
        return Err(Error::Conflict(format!(
            "branch {name} appeared while promoting: nothing was promoted"
        )));
    }
    Ok(Made {
        sha,
        branch: name.to_string(),
        parent: base.to_string(),
        worktree_error: None,
    })
}

/// Check a branch name the way git does (`check-ref-format --branch`).
pub(super) fn valid_branch(git: &Git, name: &str) -> Result<()> {
    let bad = || Error::Invalid(format!("{name:?} is not a valid branch name"));
    if name.starts_with('-') || name.starts_with('@') {
        return Err(bad());
    }
    match git.try_line(&["check-ref-format", "--branch", name])? {
        Some(n) if n == name => Ok(()),
        _ => Err(bad()),
    }
}

/// The patch between the trees `base` and `new`, binary-safe (`git apply` takes it).
pub(super) fn diff(git: &Git, base: &str, new: &str) -> Result<Vec<u8>> {
    git.ok(&[
        "diff",
        "--binary",
        "--full-index",
        "--no-renames",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        base,
        new,
        "--",
    ])
}

/// The `patch` strategy on a git origin: `git` writes objects to a scratch
/// directory (alternates: the repository's), so the repository is not written.
pub(super) fn patch_git(
    git: &Git,
    scratch: &Scratch,
    base: &str,
    items: &[Item],
) -> Result<Vec<u8>> {
    let idx = git.with("GIT_INDEX_FILE", scratch.path("index"));
    let new = build_tree(&idx, Some(base), items)?;
    let base_tree = git.line(&["rev-parse", &format!("{base}^{{tree}}")])?;
    diff(git, &base_tree, &new)
}

/// The `patch` strategy without a git origin: both trees built in the scratch
/// repository `git` from the imported tree's and the session's records.
pub(super) fn patch_plain(
    git: &Git,
    scratch: &Scratch,
    store: &dyn ObjectStore,
    items: &[Item],
) -> Result<Vec<u8>> {
    let idx = git.with("GIT_INDEX_FILE", scratch.path("index"));
    let mut olds = Vec::new();
    for i in items {
        if let Some(o) = &i.old {
            olds.push(Item {
                act: Act::Added,
                mode: Some(super::plan::git_mode(o)),
                sha: Some(git.hash(store, o, &i.path, true)?),
                ..i.clone()
            });
        }
    }
    let base = build_tree(&idx, None, &olds)?;
    let new = build_tree(&idx, Some(&base), items)?;
    diff(git, &base, &new)
}
