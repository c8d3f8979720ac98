//! Differences between two workspace trees.
//!
//! Owns: comparing two root nodes path by path, skipping subtrees whose node ids are
//! equal (so the cost is proportional to what differs, not to tree size), and
//! rendering file differences (stat counts, unified patches).
//! Inode numbers, link counts, allocation and timestamps are not compared: two
//! entries are the same when kind, permissions, owner, size, device, xattrs and
//! content are the same.

use std::collections::HashMap;

use crate::dirs::{load_differing, load_dir};
use crate::error::Result;
use crate::id::NodeId;
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{BLOCK_SIZE, Content, Entry, FileNode, Kind, Record, RootNode};

/// How a path changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Only in the new tree.
    Added,
    /// In both, different.
    Modified,
    /// Only in the old tree.
    Deleted,
}

impl Change {
    /// One-letter code (`git diff --name-status` style).
    pub fn letter(self) -> char {
        match self {
            Change::Added => 'A',
            Change::Modified => 'M',
            Change::Deleted => 'D',
        }
    }
}

/// One changed path.
#[derive(Clone, Debug)]
pub struct DiffEntry {
    /// Path relative to the workspace root, `/`-separated.
    pub path: Vec<u8>,
    /// What happened.
    pub change: Change,
    /// Record in the old tree.
    pub old: Option<Record>,
    /// Record in the new tree.
    pub new: Option<Record>,
}

impl DiffEntry {
    /// The path as text (lossy for non-UTF-8 names).
    pub fn path_str(&self) -> String {
        String::from_utf8_lossy(&self.path).into_owned()
    }
}

/// A loaded root: its directory record and hard-link table.
pub struct Tree {
    /// The root node.
    pub root: RootNode,
    links: HashMap<u64, Record>,
}

impl Tree {
    /// Load the tree named by root node `id`.
    pub fn load(store: &dyn ObjectStore, id: NodeId) -> Result<Tree> {
        let root = RootNode::decode(&store.get(ObjKind::Node, &id.0)?)?;
        let links = root.links.iter().map(|r| (r.ino, r.clone())).collect();
        Ok(Tree { root, links })
    }

    /// Whether every hard-link record present in both trees is equal: then equal
    /// directory ids in the two trees stand for equal subtrees.
    pub fn links_agree(&self, other: &Tree) -> bool {
        self.links
            .iter()
            .all(|(ino, r)| other.links.get(ino).is_none_or(|o| o == r))
    }

    /// The record an entry stands for (resolving hard links).
    pub fn resolve(&self, e: &Entry) -> Option<Record> {
        match e {
            Entry::Inline(r) => Some(r.clone()),
            Entry::HardLink { ino, .. } => self.links.get(ino).cloned(),
        }
    }

    /// The first proper prefix of `path` (`/`-separated, relative) that is a
    /// symbolic link in this tree, if any. Stops (None) where the path leaves the tree.
    pub fn symlink_prefix(&self, store: &dyn ObjectStore, path: &[u8]) -> Result<Option<Vec<u8>>> {
        let comps: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty())
            .collect();
        let mut cur = self.root.root.clone();
        for (i, comp) in comps.iter().enumerate().take(comps.len().saturating_sub(1)) {
            let Content::Node(id) = cur.content else {
                return Ok(None);
            };
            if cur.kind != Kind::Dir {
                return Ok(None);
            }
            let dir = load_dir(store, Some(id))?;
            let Some(r) = dir
                .entries
                .iter()
                .find(|(n, _)| n == comp)
                .and_then(|(_, e)| self.resolve(e))
            else {
                return Ok(None);
            };
            if r.kind == Kind::Symlink {
                return Ok(Some(comps[..=i].join(&b'/')));
            }
            cur = r;
        }
        Ok(None)
    }

    /// The record at `path` (`/`-separated, relative; empty = root).
    pub fn lookup(&self, store: &dyn ObjectStore, path: &[u8]) -> Result<Option<Record>> {
        let mut cur = self.root.root.clone();
        for comp in path.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
            let Content::Node(id) = cur.content else {
                return Ok(None);
            };
            if cur.kind != Kind::Dir {
                return Ok(None);
            }
            let dir = load_dir(store, Some(id))?;
            match dir.entries.iter().find(|(n, _)| n == comp) {
                Some((_, e)) => match self.resolve(e) {
                    Some(r) => cur = r,
                    None => return Ok(None),
                },
                None => return Ok(None),
            }
        }
        Ok(Some(cur))
    }
}

/// Whether two records are the same for diff purposes (see module docs).
pub fn same(a: &Record, b: &Record) -> bool {
    a.kind == b.kind
        && a.content == b.content
        && a.attr.perm == b.attr.perm
        && a.attr.uid == b.attr.uid
        && a.attr.gid == b.attr.gid
        && a.attr.size == b.attr.size
        && a.attr.rdev == b.attr.rdev
        && a.xattrs == b.xattrs
}

fn dir_id(r: &Record) -> Option<NodeId> {
    match r.content {
        Content::Node(id) if r.kind == Kind::Dir => Some(id),
        _ => None,
    }
}

/// All differences between trees `a` and `b`, sorted by path.
pub fn diff_roots(store: &dyn ObjectStore, a: NodeId, b: NodeId) -> Result<Vec<DiffEntry>> {
    let mut out = Vec::new();
    if a == b {
        return Ok(out);
    }
    let ta = Tree::load(store, a)?;
    let tb = Tree::load(store, b)?;
    // Equal directory ids mean equal subtrees only if the hard-link records they
    // may refer to are equal too.
    let skip = ta.links_agree(&tb);
    diff_dirs(
        store,
        (&ta, dir_id(&ta.root.root)),
        (&tb, dir_id(&tb.root.root)),
        skip,
        &[],
        &mut out,
    )?;
    Ok(out)
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = prefix.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

fn diff_dirs(
    store: &dyn ObjectStore,
    (ta, a): (&Tree, Option<NodeId>),
    (tb, b): (&Tree, Option<NodeId>),
    skip: bool,
    prefix: &[u8],
    out: &mut Vec<DiffEntry>,
) -> Result<()> {
    if a == b && (a.is_none() || skip) {
        return Ok(());
    }
    let (da, db) = match (a, b) {
        (Some(a), Some(b)) if skip => load_differing(store, a, b)?,
        _ => (load_dir(store, a)?, load_dir(store, b)?),
    };
    let (mut i, mut j) = (0, 0);
    while i < da.entries.len() || j < db.entries.len() {
        let ord = match (da.entries.get(i), db.entries.get(j)) {
            (Some((na, _)), Some((nb, _))) => na.cmp(nb),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match ord {
            std::cmp::Ordering::Less => {
                let (name, e) = &da.entries[i];
                if let Some(r) = ta.resolve(e) {
                    whole(store, ta, r, &join(prefix, name), Change::Deleted, out)?;
                }
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                let (name, e) = &db.entries[j];
                if let Some(r) = tb.resolve(e) {
                    whole(store, tb, r, &join(prefix, name), Change::Added, out)?;
                }
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let (name, ea) = &da.entries[i];
                let eb = &db.entries[j].1;
                let path = join(prefix, name);
                match (ta.resolve(ea), tb.resolve(eb)) {
                    (Some(ra), Some(rb)) if ra.kind == Kind::Dir && rb.kind == Kind::Dir => {
                        if ra.attr.perm != rb.attr.perm
                            || ra.attr.uid != rb.attr.uid
                            || ra.attr.gid != rb.attr.gid
                            || ra.xattrs != rb.xattrs
                        {
                            out.push(DiffEntry {
                                path: path.clone(),
                                change: Change::Modified,
                                old: Some(ra.clone()),
                                new: Some(rb.clone()),
                            });
                        }
                        diff_dirs(
                            store,
                            (ta, dir_id(&ra)),
                            (tb, dir_id(&rb)),
                            skip,
                            &path,
                            out,
                        )?;
                    }
                    (Some(ra), Some(rb)) if ra.kind != rb.kind => {
                        whole(store, ta, ra, &path, Change::Deleted, out)?;
                        whole(store, tb, rb, &path, Change::Added, out)?;
                    }
                    (Some(ra), Some(rb)) => {
                        if !same(&ra, &rb) {
                            out.push(DiffEntry {
                                path,
                                change: Change::Modified,
                                old: Some(ra),
                                new: Some(rb),
                            });
                        }
                    }
                    (Some(ra), None) => whole(store, ta, ra, &path, Change::Deleted, out)?,
                    (None, Some(rb)) => whole(store, tb, rb, &path, Change::Added, out)?,
                    (None, None) => {}
                }
                i += 1;
                j += 1;
            }
        }
    }
    Ok(())
}

/// Report `r` and (for directories) everything below it as added or deleted.
fn whole(
    store: &dyn ObjectStore,
    t: &Tree,
    r: Record,
    path: &[u8],
    change: Change,
    out: &mut Vec<DiffEntry>,
) -> Result<()> {
    let dir = dir_id(&r);
    let is_dir = r.kind == Kind::Dir;
    let (old, new) = match change {
        Change::Deleted => (Some(r), None),
        _ => (None, Some(r)),
    };
    out.push(DiffEntry {
        path: path.to_vec(),
        change,
        old,
        new,
    });
    if is_dir {
        for (name, e) in load_dir(store, dir)?.entries {
            if let Some(child) = t.resolve(&e) {
                whole(store, t, child, &join(path, &name), change, out)?;
            }
        }
    }
    Ok(())
}

/// Read a regular file's bytes from its record (at most `limit` bytes).
pub fn read_file(store: &dyn ObjectStore, r: &Record, limit: u64) -> Result<Vec<u8>> {
    let size = r.attr.size.min(limit);
    let Content::Node(id) = r.content else {
        return Ok(Vec::new());
    };
    match FileNode::decode(&store.get(ObjKind::Node, &id.0)?)? {
        FileNode::Inline(d) => Ok(d[..(size as usize).min(d.len())].to_vec()),
        FileNode::Blocks { blocks, .. } => {
            let mut out = vec![0u8; size as usize];
            for (idx, c) in blocks {
                let start = idx * BLOCK_SIZE;
                if start >= size {
                    break;
                }
                let data = store.get(ObjKind::Chunk, &c.0)?;
                let n = (data.len() as u64).min(size - start) as usize;
                out[start as usize..start as usize + n].copy_from_slice(&data[..n]);
            }
            Ok(out)
        }
    }
}

/// Files larger than this are not diffed line by line.
pub const PATCH_LIMIT: u64 = 8 << 20;

/// Text of a file for line diffs, or `None` if binary or too large.
pub fn text_of(store: &dyn ObjectStore, r: Option<&Record>) -> Result<Option<String>> {
    let Some(r) = r else {
        return Ok(Some(String::new()));
    };
    if r.kind == Kind::Symlink
        && let Content::Bytes(b) = &r.content
    {
        return Ok(String::from_utf8(b.clone()).ok().map(|s| s + "\n"));
    }
    if r.kind != Kind::File {
        return Ok(Some(String::new()));
    }
    if r.attr.size > PATCH_LIMIT {
        return Ok(None);
    }
    let b = read_file(store, r, PATCH_LIMIT)?;
    if b.iter().take(8000).any(|&c| c == 0) {
        return Ok(None);
    }
    Ok(String::from_utf8(b).ok())
}

/// (lines added, lines removed) of one entry, `None` if binary.
pub fn line_counts(store: &dyn ObjectStore, e: &DiffEntry) -> Result<Option<(usize, usize)>> {
    let (Some(a), Some(b)) = (
        text_of(store, e.old.as_ref())?,
        text_of(store, e.new.as_ref())?,
    ) else {
        return Ok(None);
    };
    let d = similar::TextDiff::from_lines(&a, &b);
    let (mut add, mut del) = (0, 0);
    for op in d.iter_all_changes() {
        match op.tag() {
            similar::ChangeTag::Insert => add += 1,
            similar::ChangeTag::Delete => del += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    Ok(Some((add, del)))
}

/// A unified diff of one entry (git style headers).
pub fn patch(store: &dyn ObjectStore, e: &DiffEntry) -> Result<String> {
    let p = e.path_str();
    let (a_name, b_name) = (
        if e.old.is_some() {
            format!("a/{p}")
        } else {
            "/dev/null".into()
        },
        if e.new.is_some() {
            format!("b/{p}")
        } else {
            "/dev/null".into()
        },
    );
    let mut out = format!("diff --treefork a/{p} b/{p}\n");
    let is_dir = |r: &Option<Record>| r.as_ref().is_some_and(|r| r.kind == Kind::Dir);
    if is_dir(&e.old) || is_dir(&e.new) {
        return Ok(String::new());
    }
    match (
        text_of(store, e.old.as_ref())?,
        text_of(store, e.new.as_ref())?,
    ) {
        (Some(a), Some(b)) => {
            if a == b {
                out.push_str("(metadata only)\n");
            } else {
                let d = similar::TextDiff::from_lines(&a, &b);
                out.push_str(
                    &d.unified_diff()
                        .context_radius(3)
                        .header(&a_name, &b_name)
                        .to_string(),
                );
            }
        }
        _ => out.push_str(&format!("Binary files {a_name} and {b_name} differ\n")),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use crate::tree::{Attr, DirNode, Timespec};

    fn file(store: &MemStore, ino: u64, data: &[u8]) -> Record {
        let id = store
            .put(ObjKind::Node, &FileNode::Inline(data.to_vec()).encode())
            .unwrap();
        Record {
            kind: Kind::File,
            ino,
            attr: Attr {
                perm: 0o644,
                size: data.len() as u64,
                nlink: 1,
                mtime: Timespec {
                    sec: ino as i64,
                    nsec: 0,
                },
                ..Attr::default()
            },
            xattrs: vec![],
            content: Content::Node(NodeId(id)),
        }
    }

    fn dir(store: &MemStore, ino: u64, mut entries: Vec<(&str, Record)>) -> Record {
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let node = DirNode {
            entries: entries
                .into_iter()
                .map(|(n, r)| (n.as_bytes().to_vec(), Entry::Inline(r)))
                .collect(),
        };
        let id = store.put(ObjKind::Node, &node.encode()).unwrap();
        Record {
            kind: Kind::Dir,
            ino,
            attr: Attr {
                perm: 0o755,
                nlink: 2,
                ..Attr::default()
            },
            xattrs: vec![],
            content: Content::Node(NodeId(id)),
        }
    }

    fn root(store: &MemStore, r: Record) -> NodeId {
        NodeId(
            store
                .put(
                    ObjKind::Node,
                    &RootNode {
                        root: r,
                        links: vec![],
                        next_ino: 100,
                    }
                    .encode(),
                )
                .unwrap(),
        )
    }

    #[test]
    fn finds_added_modified_deleted_and_skips_equal() {
        let s = MemStore::default();
        let shared = dir(&s, 10, vec![("x", file(&s, 11, b"same"))]);
        let a = root(
            &s,
            dir(
                &s,
                1,
                vec![
                    ("keep", shared.clone()),
                    ("mod", file(&s, 2, b"one\ntwo\n")),
                    ("gone", dir(&s, 3, vec![("inner", file(&s, 4, b"z"))])),
                ],
            ),
        );
        let b = root(
            &s,
            dir(
                &s,
                1,
                vec![
                    ("keep", shared),
                    ("mod", file(&s, 2, b"one\nthree\n")),
                    ("new", file(&s, 5, b"n")),
                ],
            ),
        );
        let d = diff_roots(&s, a, b).unwrap();
        let got: Vec<(String, char)> = d
            .iter()
            .map(|e| (e.path_str(), e.change.letter()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("gone".into(), 'D'),
                ("gone/inner".into(), 'D'),
                ("mod".into(), 'M'),
                ("new".into(), 'A'),
            ]
        );
        let m = d.iter().find(|e| e.path == b"mod").unwrap();
        assert_eq!(line_counts(&s, m).unwrap(), Some((1, 1)));
        assert!(patch(&s, m).unwrap().contains("-two\n+three\n"));
        assert!(diff_roots(&s, a, a).unwrap().is_empty());
    }
}
