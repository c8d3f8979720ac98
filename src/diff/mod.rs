//! Differences between two workspace trees.
//!
//! Owns: comparing two root nodes path by path, skipping subtrees whose node ids are
//! equal (so the cost is proportional to what differs, not to tree size), optionally
//! limited to chosen paths and following the trees' ignore files ([`filter`]: what
//! `status` and `diff` show), and rendering file differences ([`render`]: stat
//! counts, unified patches).
//! Inode numbers, link counts, allocation and timestamps are not compared: two
//! entries are the same when kind, permissions, owner, size, device, xattrs and
//! content are the same.

mod filter;
mod render;

use std::collections::HashMap;

use crate::dirs::{load_differing, load_dir};
use crate::error::Result;
use crate::id::NodeId;
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{Content, DirNode, Entry, Kind, Record, RootNode};

pub use filter::{Filter, Ignores};
use filter::{Scope, Verdict};
pub use render::{PATCH_LIMIT, line_counts, patch, read_file, text_of};

/// How a path changed.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
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

    /// The wire name (`added`, `modified`, `deleted`).
    pub fn name(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
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
    /// The trees' ignore files ignore it (only a walk with [`Ignores::Mark`] reports
    /// such paths).
    pub ignored: bool,
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
        let root = RootNode::decode(&store.get(ObjKind::Node, &id.into())?)?;
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
    diff_walk(store, a, b, &mut |e| {
        out.push(e);
        true
    })?;
    Ok(out)
}

/// The number of differences between trees `a` and `b` (without keeping them).
pub fn diff_count(store: &dyn ObjectStore, a: NodeId, b: NodeId) -> Result<u64> {
    let mut n = 0u64;
    diff_walk(store, a, b, &mut |_| {
        n += 1;
        true
    })?;
    Ok(n)
}

/// Whether trees `a` and `b` differ at all (stops at the first difference).
pub fn differ(store: &dyn ObjectStore, a: NodeId, b: NodeId) -> Result<bool> {
    let mut any = false;
    diff_walk(store, a, b, &mut |_| {
        any = true;
        false
    })?;
    Ok(any)
}

/// A directory pair being compared: both sides' entries (one side empty for a
/// subtree that was added or deleted whole) and the position in each.
struct Frame {
    da: std::sync::Arc<DirNode>,
    db: std::sync::Arc<DirNode>,
    i: usize,
    j: usize,
    path: Vec<u8>,
    /// The ignore rules in force here (empty when the walk does not follow them).
    scope: Scope,
}

/// A step of the walk: compare a directory pair, or report an entry after the
/// subtree pushed before it (a directory replaced by a file: the deleted subtree
/// comes before the added file, in path order).
enum Step {
    Frame(Frame),
    Emit(Box<DiffEntry>),
}

/// Visit every difference between trees `a` and `b` in path order, until `visit`
/// returns false. Iterative (an explicit stack of directory pairs, one per level
/// being compared): no tree depth can overflow the thread's stack.
pub fn diff_walk(
    store: &dyn ObjectStore,
    a: NodeId,
    b: NodeId,
    visit: &mut dyn FnMut(DiffEntry) -> bool,
) -> Result<()> {
    diff_walk_filtered(store, a, b, &Filter::default(), visit)
}

/// [`diff_walk`] limited by `filter`: only the chosen paths, and ignored paths left
/// out (their directories not entered) or marked (see [`filter`]).
pub fn diff_walk_filtered(
    store: &dyn ObjectStore,
    a: NodeId,
    b: NodeId,
    filter: &Filter,
    visit: &mut dyn FnMut(DiffEntry) -> bool,
) -> Result<()> {
    if a == b {
        return Ok(());
    }
    let ta = Tree::load(store, a)?;
    let tb = Tree::load(store, b)?;
    // Equal directory ids mean equal subtrees only if the hard-link records they
    // may refer to are equal too.
    let skip = ta.links_agree(&tb);
    let w = Walk {
        store,
        ta: &ta,
        tb: &tb,
        skip,
        filter,
    };
    let mut stack = Vec::new();
    let (ra, rb) = (dir_id(&ta.root.root), dir_id(&tb.root.root));
    if let Some(f) = w.frame(ra, rb, Vec::new(), &Scope::default(), false)? {
        stack.push(Step::Frame(f));
    }
    while let Some(step) = stack.pop() {
        let mut f = match step {
            Step::Emit(e) => {
                if !visit(*e) {
                    return Ok(());
                }
                continue;
            }
            Step::Frame(f) => f,
        };
        let Some(steps) = w.next(&mut f)? else {
            continue;
        };
        stack.push(Step::Frame(f));
        stack.extend(steps.into_iter().rev());
    }
    Ok(())
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(prefix.len() + 1 + name.len());
    p.extend_from_slice(prefix);
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

struct Walk<'a> {
    store: &'a dyn ObjectStore,
    ta: &'a Tree,
    tb: &'a Tree,
    skip: bool,
    filter: &'a Filter,
}

/// What one entry of a frame yields, in path order: differences to report and
/// directory pairs to compare.
type Next = Vec<Step>;

fn steps(e: Option<DiffEntry>, sub: Option<Frame>) -> impl Iterator<Item = Step> {
    e.map(|e| Step::Emit(Box::new(e)))
        .into_iter()
        .chain(sub.map(Step::Frame))
}

impl Walk<'_> {
    /// The frame comparing directory nodes `a` and `b` at `path` (None: nothing to
    /// compare), entered from `parent`'s scope; `ignored` when the directory is.
    fn frame(
        &self,
        a: Option<NodeId>,
        b: Option<NodeId>,
        path: Vec<u8>,
        parent: &Scope,
        ignored: bool,
    ) -> Result<Option<Frame>> {
        if a == b && (a.is_none() || self.skip) {
            return Ok(None);
        }
        let trees = (self.ta, self.tb);
        let scope = self
            .filter
            .scope(self.store, trees, parent, &path, a, b, ignored)?;
        let (da, db) = match (a, b) {
            (Some(a), Some(b)) if self.skip => load_differing(self.store, a, b)?,
            _ => (load_dir(self.store, a)?, load_dir(self.store, b)?),
        };
        Ok(Some(Frame {
            da,
            db,
            i: 0,
            j: 0,
            path,
            scope,
        }))
    }

    /// `r` (in the old tree for `Deleted`, else the new one) reported whole: the
    /// entry now, its subtree as a one-sided frame.
    fn whole(
        &self,
        r: Record,
        path: Vec<u8>,
        change: Change,
        (scope, ignored): (&Scope, bool),
    ) -> Result<(DiffEntry, Option<Frame>)> {
        let dir = dir_id(&r);
        let (old, new) = match change {
            Change::Deleted => (Some(r), None),
            _ => (None, Some(r)),
        };
        let sub = match (dir, change) {
            (None, _) => None,
            (d, Change::Deleted) => self.frame(d, None, path.clone(), scope, ignored)?,
            (d, _) => self.frame(None, d, path.clone(), scope, ignored)?,
        };
        Ok((
            DiffEntry {
                path,
                change,
                old,
                new,
                ignored,
            },
            sub,
        ))
    }

    /// Advance `f` to its next differing entry the filter keeps (None: the frame
    /// is done).
    fn next(&self, f: &mut Frame) -> Result<Option<Next>> {
        let (ta, tb) = (self.ta, self.tb);
        while f.i < f.da.entries.len() || f.j < f.db.entries.len() {
            let ord = match (f.da.entries.get(f.i), f.db.entries.get(f.j)) {
                (Some((na, _)), Some((nb, _))) => na.cmp(nb),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            let (ra, rb, name) = match ord {
                std::cmp::Ordering::Less => {
                    let (name, e) = &f.da.entries[f.i];
                    f.i += 1;
                    (ta.resolve(e), None, name)
                }
                std::cmp::Ordering::Greater => {
                    let (name, e) = &f.db.entries[f.j];
                    f.j += 1;
                    (None, tb.resolve(e), name)
                }
                std::cmp::Ordering::Equal => {
                    let (name, ea) = &f.da.entries[f.i];
                    let eb = &f.db.entries[f.j].1;
                    f.i += 1;
                    f.j += 1;
                    (ta.resolve(ea), tb.resolve(eb), name)
                }
            };
            let path = join(&f.path, name);
            let Verdict::Keep { report, ignored } =
                self.filter
                    .judge(&f.scope, &path, name, ra.as_ref(), rb.as_ref())
            else {
                continue;
            };
            let Some(mut steps) = self.pair(ra, rb, path, (&f.scope, ignored))? else {
                continue;
            };
            for s in &mut steps {
                if let Step::Emit(e) = s {
                    e.ignored = ignored;
                }
            }
            if !report {
                steps.retain(|s| matches!(s, Step::Frame(_)));
            }
            if !steps.is_empty() {
                return Ok(Some(steps));
            }
        }
        Ok(None)
    }

    /// What the entry at `path` (old record `ra`, new `rb`) yields: nothing when
    /// the two are the same.
    fn pair(
        &self,
        ra: Option<Record>,
        rb: Option<Record>,
        path: Vec<u8>,
        at: (&Scope, bool),
    ) -> Result<Option<Next>> {
        Ok(match (ra, rb) {
            (Some(ra), Some(rb)) if ra.kind == Kind::Dir && rb.kind == Kind::Dir => {
                let attrs_differ = ra.attr.perm != rb.attr.perm
                    || ra.attr.uid != rb.attr.uid
                    || ra.attr.gid != rb.attr.gid
                    || ra.xattrs != rb.xattrs;
                let sub = self.frame(dir_id(&ra), dir_id(&rb), path.clone(), at.0, at.1)?;
                let emit = attrs_differ.then_some(DiffEntry {
                    path,
                    change: Change::Modified,
                    old: Some(ra),
                    new: Some(rb),
                    ignored: false,
                });
                (emit.is_some() || sub.is_some()).then(|| steps(emit, sub).collect())
            }
            (Some(ra), Some(rb)) if ra.kind != rb.kind => {
                let (del, sub) = self.whole(ra, path.clone(), Change::Deleted, at)?;
                let (add, add_sub) = self.whole(rb, path, Change::Added, at)?;
                Some(
                    steps(Some(del), sub)
                        .chain(steps(Some(add), add_sub))
                        .collect(),
                )
            }
            (Some(ra), Some(rb)) => (!same(&ra, &rb)).then(|| {
                let e = DiffEntry {
                    path,
                    change: Change::Modified,
                    old: Some(ra),
                    new: Some(rb),
                    ignored: false,
                };
                vec![Step::Emit(Box::new(e))]
            }),
            (Some(ra), None) => {
                let (e, sub) = self.whole(ra, path, Change::Deleted, at)?;
                Some(steps(Some(e), sub).collect())
            }
            (None, Some(rb)) => {
                let (e, sub) = self.whole(rb, path, Change::Added, at)?;
                Some(steps(Some(e), sub).collect())
            }
            (None, None) => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use crate::tree::FileNode;
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
            content: Content::Node(id.node()),
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
            content: Content::Node(id.node()),
        }
    }

    fn root(store: &MemStore, r: Record) -> NodeId {
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
            .unwrap()
            .node()
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
