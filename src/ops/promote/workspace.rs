//! After a `commit` promote: the workspace's own git repository (the `.git` the
//! session imported with the work tree) takes the promote commit in, as if the
//! agent had made it — fetched from the durable repository, its branch moved
//! there and its index read from it — so `git status` in the workspace shows only
//! what was not promoted.
//!
//! The session's baseline moves to the promote commit too when the durable
//! branch had nothing new since the baseline ([`advanced_baseline`]): the
//! baseline tree then gains exactly what was promoted.
//!
//! Only when that is safe to do without asking: the workspace's HEAD is the
//! origin's branch and that branch still names the commit the promote built on
//! or the session's baseline (no commits of the agent's own there, which the move
//! would hide). Otherwise nothing changes and the answer says why. Git runs
//! through promote's runner (the repository owner's identity, a clean
//! environment), on the mounted workspace; a failure is reported, never fatal:
//! the promote itself has landed.

use super::answer::{Committed, Landed};
use super::gitio::Git;
use super::{Ground, Strategy};
use crate::id::NodeId;
use crate::lifecycle::Origin;
use crate::merge::{self, Theirs};
use crate::ops::Target;

/// After a landed promote: the new baseline (a `commit` promote built on the
/// baseline) and the note on the workspace's git.
pub(super) fn after(
    t: &Target,
    ground: &Ground,
    landed: &Landed,
    strategy: Strategy,
) -> (Option<(String, NodeId)>, Option<String>) {
    match (ground, &landed.commit, strategy) {
        (Ground::Repo { origin, .. }, Some(c), Strategy::Commit) => {
            (advanced_baseline(t, origin, c), take_in(t, origin, c))
        }
        _ => (None, None),
    }
}

/// The new baseline after commit `c` (its commit and tree) when the promote
/// built on the baseline itself: the baseline tree with what git changed from
/// the baseline to `c` (the promoted paths) taken in. `None` otherwise (others'
/// commits came first: only a rebase takes those in) or when it cannot be read.
fn advanced_baseline(t: &Target, origin: &Origin, c: &Committed) -> Option<(String, NodeId)> {
    if origin.baseline.as_deref() != Some(c.parent.as_str()) {
        return None;
    }
    let git = Git::new(&origin.path);
    let changes = crate::ops::merge::rebase::git_changes(&git, &c.parent, &c.sha).ok()?;
    let base = NodeId::from_hex(&origin.baseline_root)?;
    let root = merge::merge(&t.session, base, &changes, Theirs::Blobs)
        .ok()?
        .root;
    Some((c.sha.clone(), root))
}

/// Take commit `c` into the workspace's repository; a note saying what happened.
fn take_in(t: &Target, origin: &Origin, c: &Committed) -> Option<String> {
    let ws = &t.mountpoint;
    if !ws.join(".git").is_dir() {
        return None;
    }
    let git = Git::new(ws);
    let branch = &c.branch;
    let head = git.try_line(&["symbolic-ref", "-q", "HEAD"]).ok().flatten();
    if head.as_deref() != Some(&format!("refs/heads/{branch}")) {
        return Some(format!(
            "the workspace's git is not on branch {branch}: its HEAD was left alone"
        ));
    }
    let at = git
        .try_line(&["rev-parse", "-q", "--verify", "HEAD^{commit}"])
        .ok()
        .flatten();
    let known = [Some(c.parent.as_str()), origin.baseline.as_deref()];
    if !known.contains(&at.as_deref()) {
        return Some(format!(
            "the workspace's branch {branch} has commits of its own: it was not moved to {}",
            &c.sha[..c.sha.len().min(12)]
        ));
    }
    let durable = origin.path.to_string_lossy();
    let steps: [&[&str]; 3] = [
        &[
            "fetch",
            "-q",
            "--no-tags",
            "--no-write-fetch-head",
            "--end-of-options",
            &durable,
            &c.sha,
        ],
        &[
            "update-ref",
            "-m",
            "treefork promote",
            &format!("refs/heads/{branch}"),
            &c.sha,
        ],
        &["read-tree", &c.sha],
    ];
    for args in steps {
        if let Err(e) = git.ok(args) {
            return Some(format!("the workspace's git was not updated: {e}"));
        }
    }
    Some(format!(
        "the workspace's git branch {branch} now names the promote commit {}",
        &c.sha[..c.sha.len().min(12)]
    ))
}
