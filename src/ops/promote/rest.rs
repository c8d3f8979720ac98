//! What a promote leaves unpromoted, and what the session's lifecycle does next.
//!
//! `until-promote` evicts a session only once a promote took in everything it
//! changed since its baseline (paths git ignores aside: build output is not
//! promotable) — [`coverage`] decides, and the info record keeps the answer
//! (`Promoted::complete`); a later change is seen by the daemon's sweep, which
//! compares the live tree with the promoted one. [`note`] says at promote time
//! what will happen.

use std::collections::HashSet;

use super::drift::overlaps;
use super::gitio::Git;
use crate::error::Result;
use crate::id::NodeId;
use crate::lifecycle::{Policy, touched};
use crate::store::ObjectStore;
use crate::tree::{Kind, Record};

/// Paths the session changed that a promote did not take in.
pub(super) struct Coverage {
    /// Changed files (and links) outside the chosen paths, git-ignored ones
    /// aside, in path order.
    pub left: Vec<String>,
}

impl Coverage {
    /// Whether the promote took in everything.
    pub fn complete(&self) -> bool {
        self.left.is_empty()
    }
}

/// Most paths [`coverage`] compares with the durable repository one by one
/// (each a `git hash-object`); with more left over, the promote is incomplete.
const MAX_COMPARED: usize = 256;

/// A path the session changed and the record it has now (`None`: deleted).
pub(super) type Changed = (Vec<u8>, Option<Record>);

/// Which changed paths the durable repository already holds as they are.
pub(super) type InRepo<'a> = dyn FnMut(&[Changed]) -> Result<HashSet<Vec<u8>>> + 'a;

/// What the session changed from `base_root` to `root` that no `chosen` path
/// covers, git does not ignore (`ignored` answers for a list of paths) and the
/// durable repository does not already hold (`in_repo` answers, e.g. a path an
/// earlier promote took in).
pub(super) fn coverage(
    store: &dyn ObjectStore,
    base_root: NodeId,
    root: NodeId,
    chosen: &[Vec<u8>],
    ignored: &mut super::plan::IgnoreCheck<'_>,
    in_repo: &mut InRepo<'_>,
) -> Result<Coverage> {
    let is_dir = |r: &Option<Record>| r.as_ref().is_some_and(|r| r.kind == Kind::Dir);
    let mut left: Vec<Changed> = crate::diff::diff_roots(store, base_root, root)?
        .into_iter()
        .filter(|e| !(is_dir(&e.old) && (e.new.is_none() || is_dir(&e.new))))
        .filter(|e| !(is_dir(&e.new) && e.old.is_none()))
        .filter(|e| touched::counts(&e.path) && !chosen.iter().any(|c| overlaps(c, &e.path)))
        .map(|e| (e.path, e.new.filter(|r| r.kind != Kind::Dir)))
        .collect();
    if !left.is_empty() {
        let paths: Vec<Vec<u8>> = left.iter().map(|(p, _)| p.clone()).collect();
        let ign = ignored(&paths)?;
        left.retain(|(p, _)| !ign.contains(p));
    }
    if !left.is_empty() && left.len() <= MAX_COMPARED {
        let there = in_repo(&left)?;
        left.retain(|(p, _)| !there.contains(p));
    }
    let left: Vec<Vec<u8>> = left.into_iter().map(|(p, _)| p).collect();
    Ok(Coverage {
        left: left
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect(),
    })
}

/// Which of `left` the commit `head` already holds as the session has them (an
/// earlier promote took them in): same mode and blob, or absent when deleted.
pub(super) fn in_repo(
    git: &Git,
    store: &dyn ObjectStore,
    head: &str,
    left: &[Changed],
) -> Result<HashSet<Vec<u8>>> {
    let paths: Vec<Vec<u8>> = left.iter().map(|(p, _)| p.clone()).collect();
    let listing = super::plan::listing(git, head, &paths)?;
    let mut out = HashSet::new();
    for (p, r) in left {
        let there = match (r, listing.get(p)) {
            (None, None) => true,
            (Some(r), Some((mode, sha))) if matches!(r.kind, Kind::File | Kind::Symlink) => {
                mode == super::plan::git_mode(r) && *sha == git.hash(store, r, p, false)?
            }
            _ => false,
        };
        if there {
            out.insert(p.clone());
        }
    }
    Ok(out)
}

/// What the session's lifecycle does after a promote with `c`, in words
/// (`None`: nothing follows from it).
pub(super) fn note(policy: &Policy, c: &Coverage) -> Option<String> {
    if !policy.until_promote || policy.manual {
        return None;
    }
    if c.complete() {
        return Some(
            "until-promote: everything the session changed is promoted, so the daemon's next \
             sweep checkpoints and unmounts it (mount with --no-until-promote to keep it)"
                .into(),
        );
    }
    let n = c.left.len();
    let some: Vec<&str> = c.left.iter().take(3).map(String::as_str).collect();
    let more = if n > 3 { ", ..." } else { "" };
    Some(format!(
        "until-promote: {n} changed path(s) are not promoted yet ({}{more}); the session \
         stays mounted until they are",
        some.join(", ")
    ))
}
