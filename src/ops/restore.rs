//! `restore`: rewind the tree, or some paths of it, to a ref. The saved pending
//! changes, the new tree and the operation record are one batch (`super::txn`).
//! The answer is [`Restored`]. On an agent socket a restore of paths (not of the
//! whole tree) is checked by `merge::contain` first, dry run included.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use super::record::{Call, view_of};
use super::txn::{self, Log};
use super::views::{PathChange, Saved};
use super::{Target, save_and_graft, working_root};
use crate::diff;
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::store::ObjectStore;

/// The answer to `restore`. A dry run carries `dry_run` and `changes` only; a
/// restore with nothing to change adds `saved: null`; one that changed the
/// workspace adds `saved` and `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Restored {
    /// Whether this only reports what would change.
    pub dry_run: bool,
    /// The paths that change (or would), with how.
    pub changes: Vec<PathChange>,
    /// Pending changes saved first: `null` when none were (or nothing changed);
    /// absent on a dry run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub saved: Option<Option<Saved>>,
    /// The operation recorded; absent on a dry run and when nothing changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<u64>,
}

/// A field that is present, `null` or not (`Some(None)` for `null`; an absent
/// field stays `None` through `default`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> std::result::Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

pub(crate) fn run(
    t: &Target,
    call: &Call,
    spec: &str,
    paths: &[String],
    dry_run: bool,
) -> Result<Restored> {
    let s = &t.session;
    let store = s.store().clone();
    let c = super::refctx::resolve(t, spec)?;
    let paths: Vec<Vec<u8>> = paths.iter().map(|p| clean_path(p)).collect::<Result<_>>()?;
    let root = working_root(t)?;
    for p in &paths {
        refuse_symlink_prefix(&*store, root, "the working tree", p)?;
        refuse_symlink_prefix(&*store, c.root, spec, p)?;
    }
    let plan: Vec<PathChange> = diff::diff_roots(&*store, root, c.root)?
        .iter()
        .filter(|e| under(&e.path, &paths))
        .map(PathChange::from)
        .collect();
    let only = if paths.is_empty() || paths.iter().any(|p| p.is_empty()) {
        None
    } else {
        Some(&paths[..])
    };
    let what = format!("restore of {spec}");
    // A dry run of an agent's restore of paths says whether it would be refused
    // (the real one checks under the write gate: `save_and_graft`).
    if dry_run
        && !plan.is_empty()
        && let (Some(agent), Some(only)) = (t.agent_uid, only)
    {
        let result = s.build_beside(root, &mut |w| w.graft(c.root, Some(only), None).1)?;
        crate::merge::contain::check(&*store, agent, &what, root, result, &[c.root])?;
    }
    if dry_run || plan.is_empty() {
        return Ok(Restored {
            dry_run,
            changes: plan,
            saved: (!dry_run).then_some(None),
            op: None,
        });
    }
    let txn = txn::Transaction::begin(t, "restore");
    let (saved, _, op) = save_and_graft(
        t,
        "before-restore",
        &what,
        c.root,
        only,
        &mut |tx, before_root, after_root| {
            let before = view_of(tx.before(), before_root);
            txn.commit(tx, Log::Next, &mut |_, after| {
                Ok((
                    call.op("restore", before.clone(), view_of(after, after_root)),
                    Vec::new(),
                ))
            })
        },
    )?;
    Ok(Restored {
        dry_run: false,
        changes: plan,
        saved: Some(Saved::of(&saved)),
        op: Some(op.seq),
    })
}

fn under(path: &[u8], prefixes: &[Vec<u8>]) -> bool {
    prefixes.is_empty()
        || prefixes.iter().any(|p| {
            p.is_empty()
                || path == &p[..]
                || (path.starts_with(p) && path.get(p.len()) == Some(&b'/'))
        })
}

/// A path argument as a normalized workspace path: relative to the workspace root,
/// no NUL, no `..` (refused, not resolved), empty and `.` components dropped (the
/// empty result is the whole tree).
pub(crate) fn clean_path(p: &str) -> Result<Vec<u8>> {
    if p.contains('\0') {
        return Err(Error::Invalid(format!("path {p:?} contains a NUL byte")));
    }
    if p.starts_with('/') {
        return Err(Error::Invalid(format!(
            "path {p:?} must be relative to the workspace root"
        )));
    }
    let comps: Vec<&str> = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if comps.contains(&"..") {
        return Err(Error::Invalid(format!(
            "path {p:?} must stay inside the workspace (no '..')"
        )));
    }
    Ok(comps.join("/").into_bytes())
}

/// Refuse a path that goes *through* a symbolic link in the tree `root` (`what`
/// names the tree in the message): links are never followed, and grafting the link
/// instead would change more than the caller named.
fn refuse_symlink_prefix(
    store: &dyn ObjectStore,
    root: NodeId,
    what: &str,
    path: &[u8],
) -> Result<()> {
    let tree = diff::Tree::load(store, root)?;
    if let Some(link) = tree.symlink_prefix(store, path)? {
        return Err(Error::Invalid(format!(
            "path {:?} goes through the symbolic link {:?} in {what}; symbolic links are not followed (name the link itself to restore it)",
            String::from_utf8_lossy(path),
            String::from_utf8_lossy(&link)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_filters() {
        assert!(under(b"a/b", &[b"a".to_vec()]));
        assert!(!under(b"ab", &[b"a".to_vec()]));
        assert!(under(b"x", &[]));
        assert_eq!(clean_path("a/./b/").unwrap(), b"a/b");
        assert!(clean_path("a/../../etc").is_err());
        assert!(clean_path("a/../b").is_err());
        assert!(clean_path("/etc/passwd").is_err());
        assert!(clean_path("a\0b").is_err());
        assert_eq!(clean_path(".").unwrap(), b"");
        assert_eq!(clean_path("").unwrap(), b"");
    }
}
