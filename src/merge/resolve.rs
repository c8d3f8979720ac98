//! The resolution of each path theirs changed against ours: what to write into
//! the merged tree ([`Action`]) and what conflicts ([`Conflict`]); the rules are in
//! the module docs of `crate::merge`. Reads the store (ours' records, file bytes
//! for text merges), writes nothing: each action goes to the caller's sink as soon
//! as it is decided ([`resolve`]), so nothing here holds more than one file's bytes.
//!
//! Bytes: a version of theirs that is written whole (beside ours, or back after
//! ours deleted it) is referred to by its content node ([`Body::Node`]), never
//! read. Only the files both sides changed are read (base, ours and theirs, each
//! at most [`TEXT_MAX`], for the line merge), and files compared byte for byte
//! (same size, different node ids); all of it counts against [`READ_MAX`] per
//! resolution. Past it a file is not read: a `binary` conflict (ours kept, theirs
//! beside it by node id) whose detail names the budget.

use std::collections::HashSet;
use std::sync::Arc;

use super::{
    BESIDE_MAX, Change, Conflict, ConflictKind, TEXT_MAX, THEIRS_SUFFIX, Theirs, Ver, text,
};
use crate::diff::Tree;
use crate::error::Result;
use crate::id::NodeId;
use crate::store::ObjectStore;
use crate::tree::{Content, Kind};

/// Most file bytes one resolution reads (the texts of line merges and files
/// compared byte for byte, summed); past it files are not read (see the module
/// docs).
pub const READ_MAX: u64 = 256 << 20;

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
    /// A regular file with this content and permission bits (replacing a
    /// non-directory there).
    Write {
        /// Path.
        path: Vec<u8>,
        /// Content.
        body: Body,
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

/// The content of a file an [`Action::Write`] makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// These bytes (a line merge's result, a git blob).
    Bytes(Arc<Vec<u8>>),
    /// A stored file's content as its tree records it: its file node (`None`:
    /// no content), size and allocated 512-byte blocks. Referred to, never read.
    Node {
        /// The file node.
        node: Option<NodeId>,
        /// Size in bytes.
        size: u64,
        /// Allocated 512-byte blocks.
        blocks: u64,
    },
}

/// Where each action goes as soon as it is decided (in path order).
pub type Sink<'s> = dyn FnMut(Action) -> Result<()> + 's;

/// A file merge's three texts: base, ours, theirs.
type Texts = (Vec<u8>, Vec<u8>, Vec<u8>);

/// Resolve every change against the tree `ours`, reading at most `read_max`
/// bytes of files ([`READ_MAX`] for a merge): each action is handed to `sink` in
/// path order; the answer is the conflicts, sorted by path.
pub fn resolve(
    store: &dyn ObjectStore,
    ours: NodeId,
    changes: &[Change],
    theirs: Theirs,
    read_max: u64,
    sink: &mut Sink<'_>,
) -> Result<Vec<Conflict>> {
    let tree = Tree::load(store, ours)?;
    let mut r = Resolver {
        store,
        tree: &tree,
        theirs,
        sink,
        conflicts: Vec::new(),
        covered: HashSet::new(),
        read_max,
        read_left: read_max,
    };
    for c in changes {
        if !r.is_covered(&c.path) {
            r.one(c)?;
        }
    }
    r.conflicts.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(r.conflicts)
}

struct Resolver<'a, 's> {
    store: &'a dyn ObjectStore,
    tree: &'a Tree,
    theirs: Theirs,
    sink: &'a mut Sink<'s>,
    conflicts: Vec<Conflict>,
    /// Paths whose subtree is decided (grafted whole, or kept as ours).
    covered: HashSet<Vec<u8>>,
    /// The read budget, and what is left of it.
    read_max: u64,
    read_left: u64,
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

impl Resolver<'_, '_> {
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
        self.conflicts.push(Conflict {
            path: lossy(path),
            kind,
            theirs_at: theirs_at.as_deref().map(lossy),
            detail,
        });
    }

    /// Hand `a` to the sink.
    fn act(&mut self, a: Action) -> Result<()> {
        (self.sink)(a)
    }

    /// Take `n` bytes from the read budget, if that many are left.
    fn charge(&mut self, n: u64) -> bool {
        let ok = n <= self.read_left;
        if ok {
            self.read_left -= n;
        }
        ok
    }

    /// Whether `a` and `b` are the same ([`same_within`] the read budget).
    fn same(&mut self, a: Option<&Ver>, b: Option<&Ver>) -> Result<bool> {
        let mut left = self.read_left;
        let r = same_within(self.store, a, b, &mut left);
        self.read_left = left;
        r
    }

    fn one(&mut self, c: &Change) -> Result<()> {
        let ours = self.tree.lookup(self.store, &c.path)?.map(Ver::Rec);
        let (b, o, t) = (c.base.as_ref(), ours.as_ref(), c.theirs.as_ref());
        if self.same(o, t)? {
            if o.is_some_and(|o| o.kind() != Kind::Dir) {
                self.covered.insert(c.path.clone());
            }
            return Ok(());
        }
        if self.same(o, b)? {
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
            (Some(Kind::Dir), None) => self.act(Action::RemoveDir(path.to_vec()))?,
            (Some(Kind::Dir), Some(tv)) if tv.kind() == Kind::Dir => {
                if let Some(a) = Attrs::of(tv) {
                    self.act(Action::Attr(path.to_vec(), a))?;
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
            (_, None) => self.act(Action::Remove(path.to_vec()))?,
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
        self.act(a)
    }

    /// The action writing version `v` at `path` (ours there: `o`).
    fn written(&self, path: &[u8], v: &Ver, o: Option<&Ver>) -> Result<Action> {
        let owner = o
            .and_then(Ver::record)
            .or(v.record())
            .map(|r| (r.attr.uid, r.attr.gid));
        Ok(match v.kind() {
            // A symlink's target is in its record (at most 4,095 bytes).
            Kind::Symlink => Action::Link {
                path: path.to_vec(),
                target: v.bytes(self.store, u64::MAX)?,
                owner,
            },
            _ => Action::Write {
                path: path.to_vec(),
                body: body_of(v),
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
                    (a, false) if a != oa => self.act(Action::Attr(path.to_vec(), a))?,
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
            self.act(a)?;
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
        let (base, ours, theirs) = match self.texts(b, ov, tv)? {
            Sides::Read(t) => t,
            Sides::Binary => return self.binary(path, tv, "this binary (or very large) file"),
            Sides::OverBudget => {
                let what = format!(
                    "this file, not line-merged: the merge's read budget ({} MiB) is spent",
                    self.read_max >> 20
                );
                return self.binary(path, tv, &what);
            }
        };
        let (data, clean) = text::merge3_labeled(&base, &ours, &theirs, self.theirs.labels());
        drop((base, ours, theirs));
        self.act(Action::Write {
            path: path.to_vec(),
            body: Body::Bytes(Arc::new(data)),
            perm,
            owner,
        })?;
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

    /// Both changed a file that is not line-merged (`what`): ours stays, theirs
    /// beside it by node id when not too large.
    fn binary(&mut self, path: &[u8], tv: &Ver, what: &str) -> Result<()> {
        let at = (tv.size() <= BESIDE_MAX).then(|| beside_name(path));
        if let Some(at) = &at {
            let a = self.written(at, tv, None)?;
            self.act(a)?;
        }
        self.conflict(
            path,
            ConflictKind::Binary,
            at.clone(),
            format!(
                "both changed {what}: ours kept{}",
                if at.is_some() {
                    ", theirs beside it"
                } else {
                    ", theirs only in the merged ref"
                }
            ),
        );
        Ok(())
    }

    /// The three texts of a file merge (a missing base is empty), unless a side
    /// is binary or too large, or the read budget cannot pay for them.
    fn texts(&mut self, b: Option<&Ver>, ov: &Ver, tv: &Ver) -> Result<Sides> {
        let b = b.filter(|b| b.kind() == Kind::File);
        let sides = [Some(ov), Some(tv), b];
        if sides.into_iter().flatten().any(|v| v.size() > TEXT_MAX) {
            return Ok(Sides::Binary);
        }
        // Bytes already in memory (a git blob) cost nothing to read.
        let cost = sides
            .into_iter()
            .flatten()
            .filter(|v| v.record().is_some())
            .map(Ver::size)
            .sum();
        if !self.charge(cost) {
            return Ok(Sides::OverBudget);
        }
        let base = match b {
            Some(b) => b.bytes(self.store, TEXT_MAX)?,
            None => Vec::new(),
        };
        let ours = ov.bytes(self.store, TEXT_MAX)?;
        let theirs = tv.bytes(self.store, TEXT_MAX)?;
        if [&base, &ours, &theirs].iter().any(|d| text::is_binary(d)) {
            return Ok(Sides::Binary);
        }
        Ok(Sides::Read((base, ours, theirs)))
    }
}

/// What [`Resolver::texts`] found.
enum Sides {
    /// The three texts.
    Read(Texts),
    /// A side is binary or over [`TEXT_MAX`].
    Binary,
    /// The read budget cannot pay for them.
    OverBudget,
}

/// The content of file version `v`, by reference when it is stored.
fn body_of(v: &Ver) -> Body {
    match v {
        Ver::Rec(r) => match &r.content {
            Content::Node(id) => Body::Node {
                node: Some(*id),
                size: r.attr.size,
                blocks: r.attr.blocks,
            },
            Content::Bytes(b) => Body::Bytes(Arc::new(b.clone())),
            Content::None => Body::Node {
                node: None,
                size: r.attr.size,
                blocks: r.attr.blocks,
            },
        },
        Ver::Blob { data, .. } => Body::Bytes(Arc::clone(data)),
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
/// Reads at most `budget` bytes of stored files (taken from it); a comparison it
/// cannot pay answers "not the same".
fn same_within(
    store: &dyn ObjectStore,
    a: Option<&Ver>,
    b: Option<&Ver>,
    budget: &mut u64,
) -> Result<bool> {
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
            return same_bytes(store, a, b, budget);
        }
        return Ok(false);
    }
    if a.kind() == Kind::File && a.exec() != b.exec() {
        return Ok(false);
    }
    same_bytes(store, a, b, budget)
}

fn same_bytes(store: &dyn ObjectStore, a: &Ver, b: &Ver, budget: &mut u64) -> Result<bool> {
    if a.size() != b.size() || a.size() > TEXT_MAX {
        return Ok(false);
    }
    let cost: u64 = [a, b]
        .iter()
        .filter(|v| v.record().is_some_and(|r| r.kind == Kind::File))
        .map(|v| v.size())
        .sum();
    if cost > *budget {
        return Ok(false);
    }
    *budget -= cost;
    Ok(a.bytes(store, TEXT_MAX)? == b.bytes(store, TEXT_MAX)?)
}
