//! The plan of a promote: which chosen paths change, and how, in git's terms.
//!
//! The session's state is the saved checkpoint's tree; what it is compared with is
//! the baseline: for a git origin the baseline commit's tree (so the agent's own
//! commits inside the workspace never leak: `.git` is never promoted and only file
//! states count), otherwise the imported tree. Per path: added, modified or deleted,
//! with git's mode (100644, 100755 for an executable, 120000 for a symbolic link)
//! and size. A path whose content and mode equal the baseline's is a no-op
//! (reported); an untracked path the repository ignores is skipped (reported).
//!
//! Refused (nothing written): paths under `.git/` or with a `.git` inside (nested
//! repositories), gitlinks (submodules, mode 160000 in the baseline), and files over
//! [`SIZE_LIMIT`] unless allowed.

use std::collections::{HashMap, HashSet};

use super::drift::overlaps;
use super::gitio::{Git, split_nul};
use crate::diff;
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::store::ObjectStore;
use crate::tree::{Kind, Record};

/// Files larger than this are refused unless `allow_large`.
pub const SIZE_LIMIT: u64 = 50 << 20;

/// How a path changes in the repository: added (new in it), modified (content
/// or mode) or deleted.
pub(super) type Act = crate::diff::Change;

/// One path the promote writes.
#[derive(Debug, Clone)]
pub(super) struct Item {
    /// Repository-relative path.
    pub path: Vec<u8>,
    /// What happens to it.
    pub act: Act,
    /// The new git mode (`None`: deleted).
    pub mode: Option<&'static str>,
    /// The baseline's git mode (`None`: absent).
    pub old_mode: Option<String>,
    /// The new size in bytes (0 when deleted).
    pub size: u64,
    /// The baseline's record in the imported tree (sessions without git).
    pub old: Option<Record>,
    /// The new blob id, once hashed.
    pub sha: Option<String>,
}

/// What a promote would do.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// The paths written.
    pub items: Vec<Item>,
    /// Paths left out, and why.
    pub skipped: Vec<(String, String)>,
    /// Paths that are no-ops (same as the baseline), and why.
    pub unchanged: Vec<(String, String)>,
    /// Touched paths in neither state (temporary files created and removed).
    pub transient: Vec<String>,
}

/// The baseline commit's entries that overlap the chosen paths: path → (mode, id).
pub(super) type Listing = HashMap<Vec<u8>, (String, String)>;

/// The git mode of a record.
pub(super) fn git_mode(r: &Record) -> &'static str {
    match r.kind {
        Kind::Symlink => "120000",
        _ if r.attr.perm & 0o100 != 0 => "100755",
        _ => "100644",
    }
}

fn text(p: &[u8]) -> String {
    String::from_utf8_lossy(p).into_owned()
}

/// Whether `path` is the repository's own `.git` or under it.
fn is_top_git(path: &[u8]) -> bool {
    path == b".git" || path.starts_with(b".git/")
}

/// Refuse chosen paths naming `.git` or anything under a `.git`.
pub(super) fn refuse_git_paths(chosen: &[Vec<u8>]) -> Result<()> {
    for c in chosen {
        if c.split(|&b| b == b'/').any(|comp| comp == b".git") {
            return Err(Error::Invalid(format!(
                "refusing to promote {:?}: paths inside .git are the repository's own, never files of the work",
                text(c)
            )));
        }
    }
    Ok(())
}

/// The baseline commit's entries overlapping `chosen`; refuses gitlinks there.
pub(super) fn listing(git: &Git, baseline: &str, chosen: &[Vec<u8>]) -> Result<Listing> {
    let out = git.ok(&["ls-tree", "-r", "-z", "--full-tree", baseline])?;
    let mut map = Listing::new();
    let mut links = Vec::new();
    for rec in split_nul(&out) {
        let Some(tab) = rec.iter().position(|&b| b == b'\t') else {
            continue;
        };
        let (head, path) = (&rec[..tab], &rec[tab + 1..]);
        if !chosen.iter().any(|c| overlaps(c, path)) {
            continue;
        }
        let f: Vec<&[u8]> = head.split(|&b| b == b' ').collect();
        let [mode, _kind, sha] = f[..] else { continue };
        if mode == b"160000" {
            links.push(text(path));
        }
        map.insert(path.to_vec(), (text(mode), text(sha)));
    }
    if !links.is_empty() {
        return Err(Error::Invalid(format!(
            "refusing to promote into submodules (gitlinks in the baseline): {}",
            links.join(", ")
        )));
    }
    Ok(map)
}

/// Why an untracked path the repository ignores is skipped (the CLI summarises
/// these by top directory).
pub const IGNORED: &str = "untracked and ignored by the repository";

/// Which of some untracked paths the repository ignores.
pub(super) type IgnoreCheck<'a> = dyn FnMut(&[Vec<u8>]) -> Result<HashSet<Vec<u8>>> + 'a;

/// What a plan is built from.
pub(super) struct Inputs<'a> {
    /// The store.
    pub store: &'a dyn ObjectStore,
    /// The imported tree (the state at the baseline).
    pub base_root: NodeId,
    /// The saved state of the session.
    pub root: NodeId,
    /// The chosen paths (empty path: everything).
    pub chosen: &'a [Vec<u8>],
    /// They are the touched files (no path was named): one in neither state is a
    /// temporary file, listed apart.
    pub from_touched: bool,
    /// Accept files over [`SIZE_LIMIT`].
    pub allow_large: bool,
    /// The baseline commit's entries (git origins).
    pub git_base: Option<&'a Listing>,
}

/// Build the plan. `hash` gives a record's blob id (written or not, the caller
/// decides); `ignored` answers which of some untracked paths the repository ignores.
pub(super) fn build(
    inp: &Inputs,
    hash: &mut dyn FnMut(&Record, &[u8]) -> Result<String>,
    ignored: &mut IgnoreCheck,
) -> Result<Plan> {
    let mut plan = Plan::default();
    let entries: Vec<diff::DiffEntry> = diff::diff_roots(inp.store, inp.base_root, inp.root)?
        .into_iter()
        .filter(|e| !is_top_git(&e.path) && inp.chosen.iter().any(|c| overlaps(c, &e.path)))
        .collect();
    refuse(&entries, inp.allow_large)?;
    let mut adds = Vec::new();
    for e in &entries {
        if let Some(r) = &e.new
            && !matches!(r.kind, Kind::File | Kind::Symlink | Kind::Dir)
        {
            let why = "not a regular file or symbolic link (git cannot hold it)";
            plan.skipped.push((e.path_str(), why.into()));
            continue;
        }
        let (new, old) = (filelike(&e.new), filelike(&e.old));
        if new.is_none() && old.is_none() && inp.git_base.is_none_or(|b| !b.contains_key(&e.path)) {
            continue; // a directory
        }
        let base: Option<(String, Option<String>)> = match inp.git_base {
            Some(b) => b.get(&e.path).map(|(m, s)| (m.clone(), Some(s.clone()))),
            None => old.as_ref().map(|o| (git_mode(o).to_string(), None)),
        };
        let mut item = Item {
            path: e.path.clone(),
            act: Act::Modified,
            mode: new.as_ref().map(git_mode),
            old_mode: base.as_ref().map(|b| b.0.clone()),
            size: new.as_ref().map_or(0, |r| r.attr.size),
            old: old.clone(),
            sha: None,
        };
        match (&new, &base) {
            (None, None) => {
                let why = "not in the baseline commit (nothing to delete)";
                plan.unchanged.push((e.path_str(), why.into()));
                continue;
            }
            (None, Some(_)) => item.act = Act::Deleted,
            (Some(n), None) => {
                item.act = Act::Added;
                item.sha = Some(hash(n, &e.path)?);
                if inp.git_base.is_some() {
                    adds.push(e.path.clone());
                }
            }
            (Some(n), Some((mode, old_sha))) => {
                let sha = hash(n, &e.path)?;
                let same = match (old_sha, &old) {
                    (Some(s), _) => *s == sha,
                    (None, Some(o)) => o.content == n.content && o.attr.size == n.attr.size,
                    (None, None) => false,
                };
                if same && mode == git_mode(n) {
                    plan.unchanged
                        .push((e.path_str(), "same as the baseline".into()));
                    continue;
                }
                item.sha = Some(sha);
            }
        }
        plan.items.push(item);
    }
    let ign = if adds.is_empty() {
        HashSet::new()
    } else {
        ignored(&adds)?
    };
    plan.items.retain(|i| {
        let skip = ign.contains(&i.path);
        if skip {
            plan.skipped.push((text(&i.path), IGNORED.into()));
        }
        !skip
    });
    // A touched path that is in neither state (an editor's or `sed -i`'s temporary
    // file, created and removed) is listed apart; a path the caller named is not.
    let (now, base) = (
        diff::Tree::load(inp.store, inp.root)?,
        diff::Tree::load(inp.store, inp.base_root)?,
    );
    for c in inp.chosen {
        if !entries.iter().any(|e| overlaps(c, &e.path)) {
            if inp.from_touched
                && now.lookup(inp.store, c)?.is_none()
                && base.lookup(inp.store, c)?.is_none()
            {
                plan.transient.push(text(c));
            } else {
                plan.unchanged
                    .push((text(c), "no change in the session".into()));
            }
        }
    }
    Ok(plan)
}

/// Refuse nested repositories and, unless `allow_large`, files over [`SIZE_LIMIT`].
fn refuse(entries: &[diff::DiffEntry], allow_large: bool) -> Result<()> {
    let nested: Vec<String> = entries
        .iter()
        .filter(|e| e.path.split(|&b| b == b'/').any(|c| c == b".git"))
        .map(|e| e.path_str())
        .collect();
    if !nested.is_empty() {
        return Err(Error::Invalid(format!(
            "refusing to promote nested git repositories (submodules): {}",
            nested.join(", ")
        )));
    }
    let too_large: Vec<String> = entries
        .iter()
        .filter_map(|e| filelike(&e.new).map(|r| (e, r)))
        .filter(|(_, r)| r.kind == Kind::File && r.attr.size > SIZE_LIMIT && !allow_large)
        .map(|(e, r)| format!("{} ({} bytes)", e.path_str(), r.attr.size))
        .collect();
    if !too_large.is_empty() {
        return Err(Error::Invalid(format!(
            "refusing files over {} MiB (pass allow_large / --allow-large to promote them): {}",
            SIZE_LIMIT >> 20,
            too_large.join(", ")
        )));
    }
    Ok(())
}

fn filelike(r: &Option<Record>) -> Option<Record> {
    r.clone()
        .filter(|r| matches!(r.kind, Kind::File | Kind::Symlink))
}

/// Which of `paths` (untracked in the baseline) the repository at `git` ignores.
pub(super) fn ignored_by(git: &Git, paths: &[Vec<u8>]) -> Result<HashSet<Vec<u8>>> {
    let input = super::gitio::nul_list(paths.iter().map(Vec::as_slice));
    let o = git.run_in(&["check-ignore", "-z", "--stdin"], &input)?;
    // 0: some ignored, 1: none; anything else is a failure.
    match o.status.code() {
        Some(0) | Some(1) => Ok(split_nul(&o.stdout).map(<[u8]>::to_vec).collect()),
        _ => Err(git.failed(&["check-ignore"], &o.stderr)),
    }
}
