//! What an agent's composing operation may leave in its workspace: the check of a
//! tree built out of parts of several ([`check`]) before it replaces the
//! workspace.
//!
//! An agent (uid `A`, the uid its socket was made for) changes its workspace
//! through the kernel, which enforces POSIX permissions: it cannot add an entry to
//! a directory another uid owns and it cannot write, nor chmod or chown another
//! uid's entry. A whole-tree swap to an existing state (checkout, restore of the
//! whole tree, undo, adopt) keeps that true: every tree a session ever held was
//! made that way or by a checked operation. A *composing* operation (restore of
//! chosen paths, merge, cherry-pick, revert, rebase) builds a tree no one made:
//! root's `.git/hooks` with the agent's hook from another checkpoint in it, or
//! root's `.git` with the mode of the agent's `.git` (issue 38). So its result `R`
//! is checked against ours `O` (the workspace before) and its sources `S` (the
//! trees it takes parts from: theirs, the merge base, the restore source):
//!
//! - **m1, attributes as a unit**: an entry of `R` owned by another uid than `A`
//!   has the attributes (kind, owner, group, mode) of that path in `O` or in one
//!   source — never the owner of one and the mode of another.
//! - **m2, listings as a unit**: a directory of `R` that `A` cannot write (see
//!   [`writable`]) and whose listing differs from `O`'s equals, as a unit, the
//!   directory at that path in one source: its own attributes and its shallow
//!   listing (name → kind, owner, group, mode, and for non-directories the
//!   content). A subdirectory's own listing is checked on its own.
//!
//! Cost: the walk descends only where `R`'s directory ids differ from `O`'s, and
//! stops where a subtree of `R` is a source's subtree (same id: every entry in it
//! has that source's attributes and listing). Equal ids stand for equal subtrees
//! only when the hard-link records both trees hold agree (`Tree::links_agree`);
//! otherwise the walk reads the trees whole. A merge that grafts theirs' new
//! directory costs the graft's root, not its size.

use std::sync::Arc;

use crate::diff::Tree;
use crate::dirs::load_dir;
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::store::ObjectStore;
use crate::tree::{Content, DirNode, Kind, Record};

/// The attributes an entry carries as a unit (m1): kind, owner, group, mode.
type Attrs = (Kind, u32, u32, u32);

/// An entry as its directory's listing shows it (m2).
type Shallow<'a> = (Attrs, Option<(&'a Content, u32)>);

fn attrs(r: &Record) -> Attrs {
    (r.kind, r.attr.uid, r.attr.gid, r.attr.perm & 0o7777)
}

/// A directory entry as its directory's listing shows it (m2): its attributes and,
/// for a non-directory, its content (and device number).
fn shallow(r: &Record) -> Shallow<'_> {
    (
        attrs(r),
        (r.kind != Kind::Dir).then_some((&r.content, r.attr.rdev)),
    )
}

/// Whether the agent `agent` can change the entries `changed` (each: the entry
/// in ours, in the result) of directory `d`, as the kernel would let it: `d` is
/// its own, or writable by others — and then, when sticky, only entries it owns
/// on both sides. Group bits do not count (the agent's groups are not known). A
/// directory the agent owns counts whatever its mode: the agent may chmod it.
pub fn writable(d: &Record, agent: u32, changed: &[(Option<&Record>, Option<&Record>)]) -> bool {
    if d.attr.uid == agent {
        return true;
    }
    if d.attr.perm & 0o002 == 0 {
        return false;
    }
    d.attr.perm & 0o1000 == 0
        || changed.iter().all(|(o, r)| {
            o.is_none_or(|o| o.attr.uid == agent) && r.is_none_or(|r| r.attr.uid == agent)
        })
}

/// The path as a message shows it (`.` for the workspace root).
fn shown(path: &[u8]) -> String {
    if path.is_empty() {
        ".".into()
    } else {
        String::from_utf8_lossy(path).into_owned()
    }
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = prefix.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

fn dir_id(r: &Record) -> Option<NodeId> {
    match r.content {
        Content::Node(id) if r.kind == Kind::Dir => Some(id),
        _ => None,
    }
}

/// A loaded tree and whether its equal directory ids stand for equal subtrees
/// beside the result's (their hard-link records agree).
struct Side {
    tree: Tree,
    skip: bool,
}

/// A directory of the result to check, with what ours and each source hold at
/// its path.
struct Frame {
    path: Vec<u8>,
    r: Record,
    o: Option<Record>,
    s: Vec<Option<Record>>,
}

/// A directory's entries, resolved (hard links to their records).
type Listing = Vec<(Vec<u8>, Record)>;

fn listing(store: &dyn ObjectStore, t: &Tree, r: Option<&Record>) -> Result<Listing> {
    let Some(id) = r.and_then(dir_id) else {
        return Ok(Vec::new());
    };
    let d: Arc<DirNode> = load_dir(store, Some(id))?;
    Ok(d.entries
        .iter()
        .filter_map(|(n, e)| t.resolve(e).map(|r| (n.clone(), r)))
        .collect())
}

fn find<'a>(l: &'a Listing, name: &[u8]) -> Option<&'a Record> {
    l.binary_search_by(|(n, _)| n.as_slice().cmp(name))
        .ok()
        .map(|i| &l[i].1)
}

/// Check the result `result` of the composing operation `what` (e.g. `merge`)
/// of the agent `agent` against ours `ours` and the trees `sources` it was made
/// from: `Err(Forbidden)` naming the first path that breaks m1 or m2 (see the
/// module docs), the owner, and that the agent cannot write it.
pub fn check(
    store: &dyn ObjectStore,
    agent: u32,
    what: &str,
    ours: NodeId,
    result: NodeId,
    sources: &[NodeId],
) -> Result<()> {
    if ours == result {
        return Ok(());
    }
    let r = Tree::load(store, result)?;
    let side = |id: NodeId| -> Result<Side> {
        let tree = Tree::load(store, id)?;
        let skip = r.links_agree(&tree);
        Ok(Side { tree, skip })
    };
    let o = side(ours)?;
    let s: Vec<Side> = sources.iter().map(|&id| side(id)).collect::<Result<_>>()?;
    let c = Checker {
        store,
        agent,
        what,
        r: &r,
        o: &o,
        s: &s,
    };
    let root = Frame {
        path: Vec::new(),
        r: r.root.root.clone(),
        o: Some(o.tree.root.root.clone()),
        s: s.iter().map(|x| Some(x.tree.root.root.clone())).collect(),
    };
    c.entry(&root.path, &root.r, root.o.as_ref(), &root.s)?;
    let mut stack = vec![root];
    while let Some(f) = stack.pop() {
        c.frame(f, &mut stack)?;
    }
    Ok(())
}

struct Checker<'a> {
    store: &'a dyn ObjectStore,
    agent: u32,
    what: &'a str,
    r: &'a Tree,
    o: &'a Side,
    s: &'a [Side],
}

impl Checker<'_> {
    /// m1 for the entry `r` at `path` (ours there: `o`, each source's: `s`).
    fn entry(
        &self,
        path: &[u8],
        r: &Record,
        o: Option<&Record>,
        s: &[Option<Record>],
    ) -> Result<()> {
        let a = attrs(r);
        if r.attr.uid == self.agent
            || o.is_some_and(|o| attrs(o) == a)
            || s.iter().flatten().any(|x| attrs(x) == a)
        {
            return Ok(());
        }
        Err(Error::Forbidden(format!(
            "{} refused: {:?} would be {} owned by uid {} (group {}) with mode {:o}, attributes \
             that neither the workspace nor a tree it is made from has there (the owner of one \
             with the mode of another), and the agent (uid {}) cannot write another uid's \
             attributes; nothing was changed",
            self.what,
            shown(path),
            kind_name(r.kind),
            r.attr.uid,
            r.attr.gid,
            r.attr.perm & 0o7777,
            self.agent
        )))
    }

    /// Whether the subtree at `f` is unchanged from ours (same content: its
    /// listing did not change), or is one source's whole (same content and the
    /// same attributes of its own: m2 holds for it and everything below).
    fn settled(&self, f: &Frame) -> bool {
        let id = dir_id(&f.r);
        let same = |x: &Option<Record>, side: &Side| {
            side.skip && id.is_some() && x.as_ref().and_then(dir_id) == id
        };
        same(&f.o, self.o)
            || f.s.iter().zip(self.s).any(|(x, side)| {
                same(x, side) && x.as_ref().is_some_and(|x| attrs(x) == attrs(&f.r))
            })
    }

    /// Check directory `f`: m1 for its entries, m2 for itself; push the
    /// subdirectories that differ.
    fn frame(&self, f: Frame, stack: &mut Vec<Frame>) -> Result<()> {
        if self.settled(&f) {
            return Ok(());
        }
        let rl = listing(self.store, self.r, Some(&f.r))?;
        let ol = listing(self.store, &self.o.tree, f.o.as_ref())?;
        let sl: Vec<Listing> =
            f.s.iter()
                .zip(self.s)
                .map(|(x, side)| listing(self.store, &side.tree, x.as_ref()))
                .collect::<Result<_>>()?;
        let mut changed: Vec<(&[u8], Option<&Record>, Option<&Record>)> = Vec::new();
        for (name, o) in &ol {
            if find(&rl, name).is_none() {
                changed.push((name, Some(o), None));
            }
        }
        for (name, r) in &rl {
            let o = find(&ol, name);
            if o.is_none_or(|o| shallow(o) != shallow(r)) {
                changed.push((name, o, Some(r)));
            }
            let path = join(&f.path, name);
            let s: Vec<Option<Record>> = sl.iter().map(|l| find(l, name).cloned()).collect();
            if o != Some(r) {
                self.entry(&path, r, o, &s)?;
            }
            if r.kind == Kind::Dir && o.is_none_or(|o| o != r || !self.o.skip) {
                stack.push(Frame {
                    path,
                    r: r.clone(),
                    o: o.cloned(),
                    s,
                });
            }
        }
        if changed.is_empty() {
            return Ok(());
        }
        let pairs: Vec<_> = changed.iter().map(|(_, o, r)| (*o, *r)).collect();
        if writable(&f.r, self.agent, &pairs) {
            return Ok(());
        }
        let whole = |x: &Option<Record>, l: &Listing| {
            x.as_ref().is_some_and(|x| attrs(x) == attrs(&f.r))
                && l.len() == rl.len()
                && l.iter()
                    .zip(&rl)
                    .all(|((n1, a), (n2, b))| n1 == n2 && shallow(a) == shallow(b))
        };
        if f.s.iter().zip(&sl).any(|(x, l)| whole(x, l)) {
            return Ok(());
        }
        let names: Vec<String> = changed
            .iter()
            .take(3)
            .map(|(n, _, _)| String::from_utf8_lossy(n).into_owned())
            .collect();
        Err(Error::Forbidden(format!(
            "{} refused: the directory {:?} is owned by uid {} (mode {:o}) and the agent \
             (uid {}) cannot write it; the result would change its entries ({}{}) into a \
             listing that neither the workspace nor a tree it is made from has there; nothing \
             was changed",
            self.what,
            shown(&f.path),
            f.r.attr.uid,
            f.r.attr.perm & 0o7777,
            self.agent,
            names.join(", "),
            if changed.len() > names.len() {
                ", ..."
            } else {
                ""
            }
        )))
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Dir => "a directory",
        Kind::File => "a file",
        Kind::Symlink => "a symbolic link",
        _ => "a special file",
    }
}

#[cfg(test)]
#[path = "contain_tests.rs"]
mod tests;
