//! The drift check: what changed in the durable repository since the session's
//! baseline — commits on the durable branch since the baseline sha, staged changes,
//! unstaged changes (untracked files that are not ignored included) — with rename
//! detection off (a rename is its two paths). A chosen path overlapping a drifted
//! path (the same path, or one a directory prefix of the other) is a
//! [`Error::BaselineConflict`]; drift elsewhere is fine.
//!
//! The check only reads the repository. The branch head it read is what the
//! `commit` strategy later moves by compare-and-swap, so a commit landing after the
//! check fails that swap instead of being overwritten.

use super::answer::PromoteAnswer;
use super::gitio::{Git, split_nul};
use crate::error::{Drift, DriftedPath, Error, Result};
use crate::lifecycle::Origin;

/// The durable repository as the check found it.
#[derive(Debug, Clone)]
pub(super) struct Durable {
    /// The baseline commit.
    pub baseline: String,
    /// The durable branch (`None`: detached at import).
    pub branch: Option<String>,
    /// The branch's head now (detached: HEAD).
    pub head: String,
    /// Whether the durable work tree has that branch checked out (so its index and
    /// work tree follow a `commit` promote).
    pub checked_out: bool,
    /// Chosen paths that drifted (only a dry run gets here with any: a promote
    /// is refused with `BASELINE_CONFLICT`).
    pub conflicts: Vec<DriftedPath>,
}

/// Whether `a` and `b` overlap: equal, or one is a directory prefix of the other
/// (the empty path is the whole tree).
pub(super) fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let under = |x: &[u8], dir: &[u8]| {
        dir.is_empty() || (x.starts_with(dir) && x.get(dir.len()) == Some(&b'/'))
    };
    a == b || under(a, b) || under(b, a)
}

/// Read the durable repository of `origin` and refuse when a `chosen` path drifted
/// (a dry run, `tolerate`, gets them listed in [`Durable::conflicts`] instead).
pub(super) fn check(
    git: &Git,
    origin: &Origin,
    chosen: &[Vec<u8>],
    tolerate: bool,
) -> Result<Durable> {
    let baseline = origin
        .baseline
        .clone()
        .ok_or_else(|| Error::Invalid("the session has no git baseline".into()))?;
    let head = match &origin.branch {
        Some(b) => git
            .try_line(&[
                "rev-parse",
                "-q",
                "--verify",
                &format!("refs/heads/{b}^{{commit}}"),
            ])?
            .ok_or_else(|| {
                Error::Conflict(format!(
                    "branch {b} no longer exists in {}",
                    origin.path.display()
                ))
            })?,
        None => git.line(&["rev-parse", "--verify", "HEAD^{commit}"])?,
    };
    let checked_out = match &origin.branch {
        Some(b) => {
            git.try_line(&["symbolic-ref", "-q", "HEAD"])?.as_deref()
                == Some(&format!("refs/heads/{b}"))
        }
        None => false,
    };
    let mut drifted: Vec<(Vec<u8>, Drift)> = Vec::new();
    let mut add = |out: Vec<u8>, how: Drift| {
        drifted.extend(split_nul(&out).map(|p| (p.to_vec(), how)));
    };
    let name_only = ["--name-only", "-z", "--no-renames", "--no-ext-diff"];
    let mut committed = vec!["diff"];
    committed.extend(name_only);
    committed.extend([baseline.as_str(), head.as_str(), "--"]);
    add(git.ok(&committed)?, Drift::Committed);
    let mut staged = vec!["diff", "--cached"];
    staged.extend(name_only);
    staged.push("--");
    add(git.ok(&staged)?, Drift::Staged);
    let mut unstaged = vec!["diff"];
    unstaged.extend(name_only);
    unstaged.push("--");
    add(git.ok(&unstaged)?, Drift::Unstaged);
    add(
        git.ok(&["ls-files", "--others", "--exclude-standard", "-z"])?,
        Drift::Unstaged,
    );
    // A committed path whose newest change is one of the session's own promote
    // commits is not drift: it holds what the session promoted.
    let ours = own_paths(git, origin, &baseline, &head, &drifted, chosen)?;
    let mut conflicts: Vec<DriftedPath> = Vec::new();
    for (p, how) in drifted {
        if how == Drift::Committed && ours.contains(&p) {
            continue;
        }
        if chosen.iter().any(|c| overlaps(c, &p)) {
            let d = DriftedPath {
                path: String::from_utf8_lossy(&p).into_owned(),
                how,
            };
            if !conflicts.contains(&d) {
                conflicts.push(d);
            }
        }
    }
    if !conflicts.is_empty() && !tolerate {
        return Err(Error::BaselineConflict { paths: conflicts });
    }
    Ok(Durable {
        baseline,
        branch: origin.branch.clone(),
        head,
        checked_out,
        conflicts,
    })
}

/// A dry run's answer with the drifted paths marked, and the way forward.
pub(super) fn mark(out: &mut PromoteAnswer, durable: &Durable) {
    if durable.conflicts.is_empty() {
        return;
    }
    for c in &mut out.changes {
        c.drifted = durable
            .conflicts
            .iter()
            .find(|d| overlaps(d.path.as_bytes(), c.path.as_bytes()))
            .map(|d| d.how);
    }
    out.drifted = durable.conflicts.clone();
    let committed = durable.conflicts.iter().any(|d| d.how == Drift::Committed);
    out.next = Some(if committed {
        "a promote would be refused (BASELINE_CONFLICT): the durable branch has new commits on these paths; run `treefork rebase` to bring them under the session (a three-way merge), then promote".into()
    } else {
        "a promote would be refused (BASELINE_CONFLICT): the durable work tree has uncommitted changes on these paths; commit or discard them there first".into()
    });
}

/// Of the paths committed since the baseline that overlap `chosen`, those whose
/// newest commit in `baseline..head` is one of the session's promote commits
/// ([`Origin::promoted`]). One `git log` over the range, newest first.
fn own_paths(
    git: &Git,
    origin: &Origin,
    baseline: &str,
    head: &str,
    drifted: &[(Vec<u8>, Drift)],
    chosen: &[Vec<u8>],
) -> Result<std::collections::HashSet<Vec<u8>>> {
    let mut out = std::collections::HashSet::new();
    let wanted = drifted
        .iter()
        .any(|(p, how)| *how == Drift::Committed && chosen.iter().any(|c| overlaps(c, p)));
    if origin.promoted.is_empty() || !wanted {
        return Ok(out);
    }
    let range = format!("{baseline}..{head}");
    let log = git.ok(&[
        "log",
        "--no-renames",
        "--name-only",
        "--format=%x00%H",
        "-z",
        &range,
        "--",
    ])?;
    for (path, commit) in newest_commits(&log) {
        if origin.promoted.iter().any(|c| c.as_bytes() == commit) {
            out.insert(path);
        }
    }
    Ok(out)
}

/// The newest commit of each path in `git log --name-only --format=%x00%H -z`
/// output (newest first). A commit header is an empty field then the hash (a
/// path is never empty); the first path after a header starts with a newline.
fn newest_commits(log: &[u8]) -> std::collections::HashMap<Vec<u8>, &[u8]> {
    let mut out = std::collections::HashMap::new();
    let fields: Vec<&[u8]> = log.split(|&b| b == 0).collect();
    let (mut i, mut cur, mut first) = (0, None, false);
    while i < fields.len() {
        let f = fields[i];
        if f.is_empty() {
            cur = fields.get(i + 1).copied();
            first = true;
            i += 2;
            continue;
        }
        let p = match (first, f.strip_prefix(b"\n")) {
            (true, Some(rest)) => rest,
            _ => f,
        };
        first = false;
        if let Some(c) = cur
            && !p.is_empty()
        {
            out.entry(p.to_vec()).or_insert(c);
        }
        i += 1;
    }
    out
}

/// The chosen paths that differ in the durable index from commit `head`, or in the
/// work tree from the index (untracked files included): edits made by someone since
/// the drift check. Checked again right before the work tree is updated, so such an
/// edit is left alone (reported), never overwritten.
pub(super) fn local_edits(git: &Git, head: &str, chosen: &[Vec<u8>]) -> Result<Vec<String>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for args in [
        &[
            "diff",
            "--cached",
            "--name-only",
            "-z",
            "--no-renames",
            head,
            "--",
        ][..],
        &["diff", "--name-only", "-z", "--no-renames", "--"],
        &["ls-files", "--others", "--exclude-standard", "-z"],
    ] {
        out.extend(split_nul(&git.ok(args)?).map(<[u8]>::to_vec));
    }
    let mut hits: Vec<String> = out
        .iter()
        .filter(|p| chosen.iter().any(|c| overlaps(c, p)))
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    hits.sort();
    hits.dedup();
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_commit_per_path_from_git_log() {
        // Two commits, newest first; the second path of a commit has no newline,
        // a path may contain spaces and newlines of its own.
        let log = b"\0c2\0\na\0b c\0\0c1\0\na\0\nweird\0";
        let m = newest_commits(log);
        assert_eq!(m[&b"a"[..]], b"c2");
        assert_eq!(m[&b"b c"[..]], b"c2");
        assert_eq!(m[&b"\nweird"[..]], b"c1");
        assert_eq!(m.len(), 3);
        assert!(newest_commits(b"").is_empty());
    }

    #[test]
    fn overlap_is_same_path_or_directory_prefix() {
        assert!(overlaps(b"a/b", b"a/b"));
        assert!(overlaps(b"a", b"a/b"));
        assert!(overlaps(b"a/b/c", b"a"));
        assert!(overlaps(b"", b"x"));
        assert!(!overlaps(b"ab", b"a"));
        assert!(!overlaps(b"a/bc", b"a/b"));
        assert!(!overlaps(b"x", b"y"));
    }
}
