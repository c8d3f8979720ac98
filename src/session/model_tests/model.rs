//! The reference model of the tree model test: what a workspace should contain,
//! with none of the session's machinery.
//!
//! A model maps paths (`/`-separated, relative to the workspace root, the root
//! itself absent) to a directory, a symbolic link target, or a *file id*; file ids
//! map to bytes. Hard links are paths sharing one file id. A checkpoint is a saved
//! copy of the model, a checkout replaces the model by a copy, a restore copies one
//! path (and everything under it) from a copy.

use std::collections::{BTreeMap, BTreeSet};

/// What a path is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir,
    File(u64),
    Symlink(Vec<u8>),
}

/// A workspace as it should be.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub paths: BTreeMap<String, Node>,
    pub files: BTreeMap<u64, Vec<u8>>,
    next_id: u64,
}

/// The directory part of `path` ("" for a top-level name).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The last component of `path`.
pub fn leaf(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, l)| l)
}

/// Whether `p` is `top` or lies under it (`top` "" is the whole tree).
pub fn under(p: &str, top: &str) -> bool {
    top.is_empty() || p == top || (p.starts_with(top) && p.as_bytes().get(top.len()) == Some(&b'/'))
}

impl Model {
    pub fn is_dir(&self, path: &str) -> bool {
        path.is_empty() || self.paths.get(path) == Some(&Node::Dir)
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.paths.get(path)
    }

    pub fn new_file(&mut self, data: Vec<u8>) -> u64 {
        self.next_id += 1;
        self.files.insert(self.next_id, data);
        self.next_id
    }

    /// Whether directory `path` has entries.
    pub fn has_children(&self, path: &str) -> bool {
        self.paths.keys().any(|p| p != path && under(p, path))
    }

    /// Remove the entry at `path` (and, for a directory, everything under it);
    /// drops file contents no path names any more.
    pub fn remove_tree(&mut self, path: &str) {
        self.paths.retain(|p, _| !under(p, path));
        self.drop_unnamed();
    }

    fn drop_unnamed(&mut self) {
        let named: BTreeSet<u64> = self
            .paths
            .values()
            .filter_map(|n| match n {
                Node::File(id) => Some(*id),
                _ => None,
            })
            .collect();
        self.files.retain(|id, _| named.contains(id));
    }

    /// pwrite(2) on the file `id`.
    pub fn write(&mut self, id: u64, offset: usize, data: &[u8]) {
        let f = self.files.get_mut(&id).expect("file id");
        if f.len() < offset + data.len() {
            f.resize(offset + data.len(), 0);
        }
        f[offset..offset + data.len()].copy_from_slice(data);
    }

    /// rename(2) of a non-directory `from` onto `to` (absent or a non-directory).
    pub fn rename(&mut self, from: &str, to: &str) {
        if from == to {
            return;
        }
        let n = self.paths.get(from).cloned().expect("rename source");
        if let (Node::File(a), Some(Node::File(b))) = (&n, self.paths.get(to))
            && a == b
        {
            // Two links to one inode: rename does nothing.
            return;
        }
        self.paths.remove(from);
        self.paths.insert(to.to_string(), n);
        self.drop_unnamed();
    }

    /// Replace everything at and under `top` by what `saved` holds there; returns
    /// the paths now at and under `top`. File ids copied from `saved` get fresh ids
    /// here (shared among paths that share them in `saved`); the caller may then
    /// merge them with live ids ([`Model::adopt`]).
    pub fn copy_from(&mut self, saved: &Model, top: &str) -> Vec<String> {
        self.paths.retain(|p, _| !under(p, top));
        self.next_id = self.next_id.max(saved.next_id);
        let mut ids: BTreeMap<u64, u64> = BTreeMap::new();
        let mut out = Vec::new();
        for (p, n) in saved.paths.iter().filter(|(p, _)| under(p, top)) {
            let n = match n {
                Node::File(id) => Node::File(match ids.get(id) {
                    Some(new) => *new,
                    None => {
                        let new = self.new_file(saved.files[id].clone());
                        ids.insert(*id, new);
                        new
                    }
                }),
                n => n.clone(),
            };
            self.paths.insert(p.clone(), n);
            out.push(p.clone());
        }
        self.drop_unnamed();
        out
    }

    /// The restore rule of `Graft::path`: descend while both the live model and
    /// `saved` hold a directory (a missing live directory that `saved` holds is
    /// recreated empty first), then make the first entry that differs in kind or
    /// presence — or the last component — equal `saved`'s. Returns the top of the
    /// copied region.
    pub fn restore(&mut self, saved: &Model, path: &str) -> String {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        if comps.is_empty() {
            self.copy_from(saved, "");
            return String::new();
        }
        let mut cur = String::new();
        for (n, comp) in comps.iter().enumerate() {
            if !cur.is_empty() {
                cur.push('/');
            }
            cur.push_str(comp);
            let last = n + 1 == comps.len();
            let target_dir = saved.get(&cur) == Some(&Node::Dir);
            if !last && self.get(&cur).is_none() && target_dir {
                self.paths.insert(cur.clone(), Node::Dir);
            }
            if last || !(target_dir && self.is_dir(&cur)) {
                self.copy_from(saved, &cur);
                return cur;
            }
        }
        unreachable!("the loop returns at the last component")
    }

    /// After a restore of region `top`: paths inside it that the session shows as
    /// links to a file also named outside it take that file's id (the caller has
    /// checked that the contents agree).
    pub fn adopt(&mut self, top: &str, same_inode: &[(String, String)]) {
        for (inside, outside) in same_inode {
            debug_assert!(under(inside, top) && !under(outside, top));
            if let Some(Node::File(id)) = self.paths.get(outside).cloned() {
                self.paths.insert(inside.clone(), Node::File(id));
            }
        }
        self.drop_unnamed();
    }

    /// (bytes in regular files, inodes counting the root) as a session reports them.
    pub fn usage(&self) -> (i64, i64) {
        let bytes = self.files.values().map(|f| f.len() as i64).sum();
        let others = self
            .paths
            .values()
            .filter(|n| !matches!(n, Node::File(_)))
            .count();
        (bytes, (self.files.len() + others + 1) as i64)
    }
}
