//! The touched-file set of a session: every path written, created, renamed
//! (both names) or deleted since the baseline, kept as it happens (not by diffing).
//! Paths under `.git/` (and `.git` itself) are never touched files: the agent's own
//! commits are not what promote takes.
//!
//! Stored as one key per path, `t/<session>\0<path>` with an empty value, written
//! with the session's flushes; [`list`] reads them in path order.
//!
//! Invariant: no stored path is longer than [`PATH_MAX`] bytes. A deeper path is
//! recorded as its longest ancestor directory within the bound, which stands for
//! everything under it (promote takes a chosen directory's whole subtree, see
//! `ops::promote::drift::overlaps`). Without the bound an agent's chain of D nested
//! directories would store D paths of up to 2·D bytes: quadratic metadata (10,000
//! levels made 3 GB of index; with the bound, 4,000 levels make a few MB).

use crate::error::Result;
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;

/// Whether `path` (workspace-relative, `/`-separated) can be a touched file.
pub fn counts(path: &[u8]) -> bool {
    !(path.is_empty() || path == b".git" || path.starts_with(b".git/"))
}

/// Longest path stored (bytes). sled takes about 15 bytes of disk per byte of
/// these keys, so the bound is kept well under the kernel's `PATH_MAX`: paths
/// this long are rare, and their ancestor still covers them.
pub const PATH_MAX: usize = 1024;

/// `path`, or its longest ancestor directory of at most [`PATH_MAX`] bytes.
pub fn bounded(path: &[u8]) -> &[u8] {
    if path.len() <= PATH_MAX {
        return path;
    }
    let cut = path[..=PATH_MAX].iter().rposition(|&b| b == b'/');
    // A first component longer than the bound cannot exist (NAME_MAX is 255).
    cut.map_or(&path[..PATH_MAX], |i| &path[..i])
}

/// The ops adding `paths` to `session`'s set (each deduplicated after bounding).
pub fn add_ops<'a>(session: &str, paths: impl IntoIterator<Item = &'a [u8]>) -> Vec<MetaOp> {
    let mut seen = std::collections::HashSet::new();
    paths
        .into_iter()
        .filter(|p| counts(p))
        .map(bounded)
        .filter(|p| seen.insert(*p))
        .map(|p| MetaOp::Put(meta::touched_key(session, p), Vec::new()))
        .collect()
}

/// The touched paths of `session`, in byte order.
pub fn list(store: &dyn ObjectStore, session: &str) -> Result<Vec<Vec<u8>>> {
    Ok(store
        .meta_range(&KeyRange::touched(session), usize::MAX)?
        .into_iter()
        .filter_map(|(k, _)| meta::touched_path(&k).map(<[u8]>::to_vec))
        .collect())
}

/// The ops deleting `session`'s set.
pub fn delete_ops(store: &dyn ObjectStore, session: &str) -> Result<Vec<MetaOp>> {
    store.meta_delete_range_ops(&KeyRange::touched(session))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    #[test]
    fn git_paths_never_count_and_sets_are_per_session() {
        let s = MemStore::default();
        let paths: Vec<&[u8]> = vec![b"a/b", b".git/index", b".git", b".gitignore", b"z"];
        s.commit(add_ops("s", paths)).unwrap();
        s.commit(add_ops("s2", [b"other".as_slice()])).unwrap();
        assert_eq!(
            list(&s, "s").unwrap(),
            vec![b".gitignore".to_vec(), b"a/b".to_vec(), b"z".to_vec()]
        );
        s.commit(delete_ops(&s, "s").unwrap()).unwrap();
        assert!(list(&s, "s").unwrap().is_empty());
        assert_eq!(list(&s, "s2").unwrap().len(), 1);
    }

    /// Regression: every level of a deep chain was stored with its whole path.
    #[test]
    fn deep_paths_are_stored_as_their_bounded_ancestor() {
        let s = MemStore::default();
        let deep: Vec<Vec<u8>> = (1..=2000)
            .map(|d| b"d/".repeat(d)[..2 * d - 1].to_vec())
            .collect();
        s.commit(add_ops("s", deep.iter().map(Vec::as_slice)))
            .unwrap();
        let got = list(&s, "s").unwrap();
        assert!(
            got.iter().all(|p| p.len() <= PATH_MAX),
            "a path past the bound"
        );
        // The 512 levels that fit; the deepest of them stands for all below it.
        assert_eq!(got.len(), 512);
        let top = got.iter().max_by_key(|p| p.len()).unwrap();
        assert_eq!(top, &deep[511]);
        assert!(deep[1999].starts_with(top) && deep[1999][top.len()] == b'/');
        assert_eq!(bounded(b"a/b"), b"a/b");
    }
}
