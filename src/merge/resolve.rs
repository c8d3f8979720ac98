//! The resolution of each path theirs changed against ours: what to write into
//! the merged tree ([`Action`]) and what conflicts ([`Conflict`]); the rules are in
//! the module docs of `crate::merge`. Reads the store (ours' records, file bytes
//! for text merges), writes nothing.

use std::collections::HashSet;

use super::{
    BESIDE_MAX, Change, Conflict, ConflictKind, TEXT_MAX, THEIRS_SUFFIX, Theirs, Ver, text,
};
use crate::diff::Tree;
use crate::error::Result;
use crate::id::NodeId;
use crate::store::ObjectStore;
use crate::tree::{Content, Kind};

/// Who owns a file written into the merged tree: `None` takes the parent
/// directory's owner.
pub type Owner = Option<(u32, u32)>;

/// An entry's attributes, taken as a unit: a merge never gives a path the owner
/// of one side and the permission bits of the other (`merge::contain`, m1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attrs {
    /// Permission bits (0o7777).
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

impl Attrs {
    /// The attributes of a record's version (`None` for a git blob).
    fn of(v: &Ver) -> Option<Attrs> {
        v.record().map(|r| Attrs {
            perm: r.attr.perm & 0o7777,
            uid: r.attr.uid,
            gid: r.attr.gid,
        })
    }
}

/// The merged attributes of a path both sides have (`b`: the base's, if any):
/// the side that changed them wins, whole; when both changed them differently,
/// ours, and `true` (a `mode` conflict).
fn merged_attrs(b: Option<Attrs>, o: Attrs, t: Attrs) -> (Attrs, bool) {
    match b {
        Some(b) if o == b => (t, false),
        Some(b) => (o, t != b && t != o),
        None => (o, false),
    }
}

/// One change to make to ours to get the merged tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Take theirs' entry at the path whole, from theirs' tree (with its subtree).
    Graft(Vec<u8>),
    /// A regular file with these bytes and permission bits (replacing a
    /// non-directory there).
    Write {
        /// Path.
        path: Vec<u8>,
        /// Bytes.
        data: Vec<u8>,
        /// Permission bits.
        perm: u32,
        /// Owner.
        owner: Owner,
    },
    /// A symbolic link (replacing a non-directory there).
    Link {
        /// Path.
        path: Vec<u8>,
        /// Target.
        target: Vec<u8>,
        /// Owner.
        owner: Owner,
    },
    /// Remove a non-directory.
    Remove(Vec<u8>),
    /// Remove a directory, once everything else is applied, if it is empty.
    RemoveDir(Vec<u8>),
    /// Set a directory's owner, group and permission bits (together).
    Attr(Vec<u8>, Attrs),
}

/// What a merge does: the actions in path order and the conflicts.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The changes to make to ours.
    pub actions: Vec<Action>,
    /// The conflicts, by path.
    pub conflicts: Vec<Conflict>,
}

/// A file merge's three texts: base, ours, theirs.
type Texts = (Vec<u8>, Vec<u8>, Vec<u8>);

/// Resolve every change against the tree `ours`.
pub fn plan(
    store: &dyn ObjectStore,
    ours: NodeId,
    changes: &[Change],
    theirs: Theirs,
) -> Result<Plan> {
    let tree = Tree::load(store, ours)?;
    let mut r = Resolver {
        store,
        tree: &tree,
        theirs,
        plan: Plan::default(),
        covered: HashSet::new(),
    };
    for c in changes {
        if !r.is_covered(&c.path) {
            r.one(c)?;
        }
    }
    r.plan.conflicts.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(r.plan)
}

struct Resolver<'a> {
    store: &'a dyn ObjectStore,
    tree: &'a Tree,
    theirs: Theirs,
    plan: Plan,
    /// Paths whose subtree is decided (grafted whole, or kept as ours).
    covered: HashSet<Vec<u8>>,
}

fn lossy(p: &[u8]) -> String {
    String::from_utf8_lossy(p).into_owned()
}

fn kind_name(v: Option<&Ver>) -> &'static str {
    match v.map(Ver::kind) {
        None => "nothing",
        Some(Kind::Dir) => "a directory",
        Some(Kind::File) => "a file",
        Some(Kind::Symlink) => "a symbolic link",
        Some(_) => "a special file",
    }
}

impl Resolver<'_> {
    fn is_covered(&self, path: &[u8]) -> bool {
        path.iter()
            .enumerate()
            .any(|(i, &b)| b == b'/' && self.covered.contains(&path[..i]))
    }

    fn conflict(
        &mut self,
        path: &[u8],
        kind: ConflictKind,
        theirs_at: Option<Vec<u8>>,
        detail: String,
    ) {
        self.plan.conflicts.push(Conflict {
            path: lossy(path),
            kind,
            theirs_at: theirs_at.as_deref().map(lossy),
            detail,
        });
    }

    fn one(&mut self, c: &Change) -> Result<()> {
        let ours = self.tree.lookup(self.store, &c.path)?.map(Ver::Rec);
        let (b, o, t) = (c.base.as_ref(), ours.as_ref(), c.theirs.as_ref());
        if same(self.store, o, t)? {
            if o.is_some_and(|o| o.kind() != Kind::Dir) {
                self.covered.insert(c.path.clone());
            }
            return Ok(());
        }
        if same(self.store, o, b)? {
            return self.take_theirs(&c.path, b, o, t);
        }
        self.both_changed(&c.path, b, o, t)
    }

    /// Ours left the path as it was in the base: theirs' version is the result.
    fn take_theirs(
        &mut self,
        path: &[u8],
        b: Option<&Ver>,
        o: Option<&Ver>,
        t: Option<&Ver>,
    ) -> Result<()> {
        match (o.map(Ver::kind), t) {
            (Some(Kind::Dir), None) => self.plan.actions.push(Action::RemoveDir(path.to_vec())),
            (Some(Kind::Dir), Some(tv)) if tv.kind() == Kind::Dir => {
                if let Some(a) = Attrs::of(tv) {
                    self.plan.actions.push(Action::Attr(path.to_vec(), a));
                }
            }
            (Some(Kind::Dir), Some(tv)) => {
                // Theirs replaced a directory by a file: only if ours changed
                // nothing below it.
                if !self.subtree_unchanged(b, o)? {
                    return self.kinds_differ(path, o, tv);
                }
                self.covered.insert(path.to_vec());
                self.put_theirs(path, tv, o)?;
            }
            (_, None) => self.plan.actions.push(Action::Remove(path.to_vec())),
            (_, Some(tv)) => {
                if tv.kind() == Kind::Dir || o.is_some() {
                    self.covered.insert(path.to_vec());
                }
                self.put_theirs(path, tv, o)?;
            }
        }
        Ok(())
    }

    /// Whether a directory ours kept has the base's content (nothing changed in it).
    fn subtree_unchanged(&self, b: Option<&Ver>, o: Option<&Ver>) -> Result<bool> {
        Ok(match (b.and_then(Ver::record), o.and_then(Ver::record)) {
            (Some(b), Some(o)) => b.content == o.content,
            _ => false,
        })
    }

    /// Put theirs' version `tv` at `path` (ours there: `o`).
    fn put_theirs(&mut self, path: &[u8], tv: &Ver, o: Option<&Ver>) -> Result<()> {
        let a = match (self.theirs, tv) {
            (Theirs::Tree(_), Ver::Rec(_)) => Action::Graft(path.to_vec()),
            (_, v) => self.written(path, v, o)?,
        };
        self.plan.actions.push(a);
        Ok(())
    }

    /// The action writing version `v` at `path` (ours there: `o`).
    fn written(&self, path: &[u8], v: &Ver, o: Option<&Ver>) -> Result<Action> {
        let owner = o
            .and_then(Ver::record)
            .or(v.record())
            .map(|r| (r.attr.uid, r.attr.gid));
        Ok(match v.kind() {
            Kind::Symlink => Action::Link {
                path: path.to_vec(),
                target: v.bytes(self.store, u64::MAX)?,
                owner,
            },
            _ => Action::Write {
                path: path.to_vec(),
                data: v.bytes(self.store, u64::MAX)?,
                perm: file_perm(None, o, v),
                owner,
            },
        })
    }

    fn both_changed(
        &mut self,
        path: &[u8],
        b: Option<&Ver>,
        o: Option<&Ver>,
        t: Option<&Ver>,
    ) -> Result<()> {
        let (ok, tk) = (o.map(Ver::kind), t.map(Ver::kind));
        match (o, t) {
            (Some(ov), Some(tv)) if ok == Some(Kind::Dir) && tk == Some(Kind::Dir) => {
                let (Some(oa), Some(ta)) = (Attrs::of(ov), Attrs::of(tv)) else {
                    return Ok(());
                };
                let ba = b.and_then(Attrs::of);
                match merged_attrs(ba, oa, ta) {
                    (_, true) => self.conflict(path, ConflictKind::Mode, None, format!(
                        "both changed the directory's owner or permissions (ours uid {} mode {:o}, theirs uid {} mode {:o}): ours kept",
                        oa.uid, oa.perm, ta.uid, ta.perm
                    )),
                    (a, false) if a != oa => self.plan.actions.push(Action::Attr(path.to_vec(), a)),
                    _ => {}
                }
                Ok(())
            }
            (Some(ov), Some(tv)) if ok == Some(Kind::File) && tk == Some(Kind::File) => {
                self.covered.insert(path.to_vec());
                self.files(path, b, ov, tv)
            }
            (Some(ov), None) => {
                if ov.kind() != Kind::Dir {
                    self.covered.insert(path.to_vec());
                    self.conflict(
                        path,
                        ConflictKind::ModifyDelete,
                        None,
                        format!(
                            "ours changed {}, theirs deleted it: ours kept",
                            kind_name(o)
                        ),
                    );
                }
                Ok(())
            }
            (None, Some(tv)) => {
                self.covered.insert(path.to_vec());
                self.put_theirs(path, tv, None)?;
                self.conflict(
                    path,
                    ConflictKind::DeleteModify,
                    None,
                    format!(
                        "ours deleted {}, theirs changed it: theirs written back",
                        kind_name(t)
                    ),
                );
                Ok(())
            }
            (Some(_), Some(tv)) => self.kinds_differ(path, o, tv),
            (None, None) => Ok(()),
        }
    }

    /// Different kinds, or two different symlinks (or special files): ours stays,
    /// theirs beside it when it is a file or a symlink.
    fn kinds_differ(&mut self, path: &[u8], o: Option<&Ver>, tv: &Ver) -> Result<()> {
        self.covered.insert(path.to_vec());
        let beside = matches!(tv.kind(), Kind::File | Kind::Symlink) && tv.size() <= BESIDE_MAX;
        let at = beside.then(|| beside_name(path));
        if let Some(at) = &at {
            let a = self.written(at, tv, None)?;
            self.plan.actions.push(a);
        }
        let kind = ConflictKind::Kind;
        let detail = format!(
            "ours has {} here, theirs {}: ours kept{}",
            kind_name(o),
            kind_name(Some(tv)),
            if at.is_some() {
                ", theirs beside it"
            } else {
                ""
            }
        );
        self.conflict(path, kind, at, detail);
        Ok(())
    }

    /// Both changed a regular file.
    fn files(&mut self, path: &[u8], b: Option<&Ver>, ov: &Ver, tv: &Ver) -> Result<()> {
        let (perm, owner, mode_clash) = match (Attrs::of(ov), Attrs::of(tv)) {
            // Between records, owner, group and mode go together.
            (Some(oa), Some(ta)) => {
                let (a, clash) = merged_attrs(b.and_then(Attrs::of), oa, ta);
                (a.perm, Some((a.uid, a.gid)), clash)
            }
            // A git blob carries only the execute bit: applied to ours.
            _ => (
                file_perm(b, Some(ov), tv),
                ov.record().map(|r| (r.attr.uid, r.attr.gid)),
                b.is_some_and(|b| {
                    let (be, oe, te) = (b.exec(), ov.exec(), tv.exec());
                    oe != be && te != be && oe != te
                }),
            ),
        };
        let texts = self.texts(b, ov, tv)?;
        let Some((base, ours, theirs)) = texts else {
            let at = (tv.size() <= BESIDE_MAX).then(|| beside_name(path));
            if let Some(at) = &at {
                let a = self.written(at, tv, None)?;
                self.plan.actions.push(a);
            }
            self.conflict(
                path,
                ConflictKind::Binary,
                at.clone(),
                format!(
                    "both changed this binary (or very large) file: ours kept{}",
                    if at.is_some() {
                        ", theirs beside it"
                    } else {
                        ", theirs only in the merged ref"
                    }
                ),
            );
            return Ok(());
        };
        let (data, clean) = text::merge3(&base, &ours, &theirs);
        self.plan.actions.push(Action::Write {
            path: path.to_vec(),
            data,
            perm,
            owner,
        });
        if !clean {
            let (kind, what) = match b {
                None => (
                    ConflictKind::AddAdd,
                    "both added this file with different content",
                ),
                Some(_) => (ConflictKind::Content, "both changed the same lines"),
            };
            self.conflict(
                path,
                kind,
                None,
                format!("{what}: conflict markers in the file"),
            );
        } else if mode_clash {
            self.conflict(
                path,
                ConflictKind::Mode,
                None,
                "both changed the owner or permission bits differently: ours kept".into(),
            );
        }
        Ok(())
    }

    /// The three texts of a file merge, or `None` when any side is binary or too
    /// large (a missing base is empty).
    fn texts(&self, b: Option<&Ver>, ov: &Ver, tv: &Ver) -> Result<Option<Texts>> {
        let b = b.filter(|b| b.kind() == Kind::File);
        if [Some(ov), Some(tv), b]
            .into_iter()
            .flatten()
            .any(|v| v.size() > TEXT_MAX)
        {
            return Ok(None);
        }
        let base = match b {
            Some(b) => b.bytes(self.store, TEXT_MAX)?,
            None => Vec::new(),
        };
        let ours = ov.bytes(self.store, TEXT_MAX)?;
        let theirs = tv.bytes(self.store, TEXT_MAX)?;
        if [&base, &ours, &theirs].iter().any(|d| text::is_binary(d)) {
            return Ok(None);
        }
        Ok(Some((base, ours, theirs)))
    }
}

/// `PATH~theirs`.
pub fn beside_name(path: &[u8]) -> Vec<u8> {
    let mut p = path.to_vec();
    p.extend_from_slice(THEIRS_SUFFIX.as_bytes());
    p
}

fn perm_of(v: &Ver) -> u32 {
    match v {
        Ver::Rec(r) => r.attr.perm & 0o7777,
        Ver::Blob { mode, .. } if mode & 0o100 != 0 => 0o755,
        Ver::Blob { .. } => 0o644,
    }
}

/// The permission bits of a merged file: the side that changed them wins (ours
/// when both did); a git blob only carries the execute bit, applied to ours'.
fn file_perm(b: Option<&Ver>, o: Option<&Ver>, t: &Ver) -> u32 {
    let Some(o) = o else {
        return perm_of(t);
    };
    let op = perm_of(o);
    match t {
        Ver::Blob { .. } => {
            let changed = b.is_none_or(|b| b.exec() != t.exec());
            if changed && o.exec() == b.is_some_and(Ver::exec) {
                if t.exec() {
                    op | ((op & 0o444) >> 2)
                } else {
                    op & !0o111
                }
            } else {
                op
            }
        }
        Ver::Rec(_) => {
            let bp = b.map(perm_of);
            if bp == Some(op) || bp.is_none() && op == perm_of(t) {
                perm_of(t)
            } else {
                op
            }
        }
    }
}

/// Whether two versions are the same for a merge: kind, content, permission bits
/// (just the execute bit against a git blob) and, between two records, owner.
pub fn same(store: &dyn ObjectStore, a: Option<&Ver>, b: Option<&Ver>) -> Result<bool> {
    let (a, b) = match (a, b) {
        (None, None) => return Ok(true),
        (Some(a), Some(b)) => (a, b),
        _ => return Ok(false),
    };
    if a.kind() != b.kind() {
        return Ok(false);
    }
    if let (Ver::Rec(x), Ver::Rec(y)) = (a, b) {
        if (x.attr.perm, x.attr.uid, x.attr.gid) != (y.attr.perm, y.attr.uid, y.attr.gid) {
            return Ok(false);
        }
        if x.kind == Kind::Dir {
            return Ok(true);
        }
        if x.content == y.content && x.attr.rdev == y.attr.rdev {
            return Ok(true);
        }
        if matches!(
            (&x.content, &y.content),
            (Content::Node(_), Content::Node(_))
        ) || x.kind == Kind::Symlink
        {
            return same_bytes(store, a, b);
        }
        return Ok(false);
    }
    if a.kind() == Kind::File && a.exec() != b.exec() {
        return Ok(false);
    }
    same_bytes(store, a, b)
}

fn same_bytes(store: &dyn ObjectStore, a: &Ver, b: &Ver) -> Result<bool> {
    if a.size() != b.size() || a.size() > TEXT_MAX {
        return Ok(false);
    }
    Ok(a.bytes(store, TEXT_MAX)? == b.bytes(store, TEXT_MAX)?)
}
