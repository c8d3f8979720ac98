//! The touched-file set of a session: every path written, created, renamed
//! (both names) or deleted since the baseline, kept as it happens (not by diffing).
//! Paths under `.git/` (and `.git` itself) are never touched files: the agent's own
//! commits are not what promote takes.
//!
//! Stored as one key per path, `t/<session>\0<path>` with an empty value, written
//! with the session's flushes; [`list`] reads them in path order.

use crate::error::Result;
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;

/// Whether `path` (workspace-relative, `/`-separated) can be a touched file.
pub fn counts(path: &[u8]) -> bool {
    !(path.is_empty() || path == b".git" || path.starts_with(b".git/"))
}

/// The ops adding `paths` to `session`'s set.
pub fn add_ops<'a>(session: &str, paths: impl IntoIterator<Item = &'a [u8]>) -> Vec<MetaOp> {
    paths
        .into_iter()
        .filter(|p| counts(p))
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
}
