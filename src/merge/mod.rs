//! Three-way merges of workspace trees: what `merge`, `cherry-pick` and `rebase`
//! compute before they graft the result into a live workspace.
//!
//! Owns: resolving, path by path, the changes "theirs" made since a base against
//! what "ours" (the workspace) made since the same base ([`resolve`]); merging text
//! with the `diffy` crate ([`text`]); building the merged tree beside the live one
//! ([`apply`], on [`Session::build_beside`](crate::session::Session)); the
//! merge base of two checkpoints ([`base`]); and what an agent's composed tree
//! may hold ([`contain`]: checked by restore of paths and every merge on an agent
//! socket); the typed state of a merge stopped on conflicts and its decoding
//! from the session record ([`stop`]).
//!
//! The inputs are a base, ours (always a stored tree: the workspace flushed) and
//! theirs' changes as a path-sorted list ([`Change`]): from a stored tree
//! ([`tree_changes`]: a checkpoint, a session, a remote ref) or from git (a
//! rebase: the blobs between two commits, [`Ver::Blob`]).
//!
//! Rules (a path at a time; git's, where git has one):
//! - ours did not change the path: theirs' version is taken (a directory theirs
//!   added arrives whole, by graft; a directory theirs deleted goes once empty);
//! - both made the same change: nothing to do (not a conflict);
//! - both changed a text file: a line merge; overlapping edits become conflict
//!   markers (`<<<<<<< ours` … `>>>>>>> theirs`) and a `content` conflict
//!   (`add_add` when neither had a base);
//! - binary or over [`TEXT_MAX`] (or past the read budget,
//!   [`resolve::READ_MAX`]): ours stays, theirs is written beside it as
//!   `PATH~theirs` (`binary`);
//! - one side deleted what the other changed: the changed version stays
//!   (`modify_delete`: ours kept; `delete_modify`: theirs written back);
//! - different kinds (file, directory, symlink): ours stays, theirs beside it as
//!   `PATH~theirs` when it is a file or symlink (`kind`);
//! - attributes (owner, group and permission bits, always as a unit, never the
//!   owner of one side with the mode of the other): the side that changed them
//!   wins; both, differently: ours, a `mode` conflict (against a git blob, only
//!   the execute bit, applied to ours).
//!
//! Renames are a delete plus an add (no rename detection). Invariants: nothing
//! here writes the live workspace or any record ([`stop`] only encodes and
//! decodes one); the result is a root (pinned by
//! the caller's live session) and the list of conflicts, sorted by path; a
//! version of theirs written whole is referred to by its content node, never
//! read, and each action is applied as soon as it is decided, so memory does not
//! grow with the number of paths (at most one file's texts are held).

pub mod apply;
pub mod base;
pub mod contain;
pub mod resolve;
pub mod stop;
#[cfg(test)]
mod tests;
pub mod text;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diff;
use crate::error::Result;
use crate::id::NodeId;
use crate::session::Session;
use crate::store::ObjectStore;
use crate::tree::{Kind, Record};

pub use base::merge_base;
pub use stop::Stop;

/// Text files up to this size are merged line by line; larger ones are binary.
pub const TEXT_MAX: u64 = diff::PATCH_LIMIT;
/// A version of theirs up to this size is written beside ours on a conflict
/// (`PATH~theirs`); a larger one stays only in theirs (the conflict says so).
pub const BESIDE_MAX: u64 = 64 << 20;
/// The suffix of the name theirs' version is written under beside ours.
pub const THEIRS_SUFFIX: &str = "~theirs";

/// What kind of conflict a path has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConflictKind {
    /// Both changed a text file in overlapping lines: conflict markers in the file.
    Content,
    /// Both added a text file with different content: conflict markers.
    AddAdd,
    /// Both changed a binary (or very large) file: ours kept, theirs beside it.
    Binary,
    /// Ours changed what theirs deleted: ours kept.
    ModifyDelete,
    /// Ours deleted what theirs changed: theirs written back.
    DeleteModify,
    /// Different kinds (file, directory, symlink) or two different symlinks: ours
    /// kept, theirs beside it when it is a file or a symlink.
    Kind,
    /// Both changed the attributes (owner, group, permission bits) differently:
    /// ours kept.
    Mode,
}

impl ConflictKind {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            ConflictKind::Content => "content",
            ConflictKind::AddAdd => "add_add",
            ConflictKind::Binary => "binary",
            ConflictKind::ModifyDelete => "modify_delete",
            ConflictKind::DeleteModify => "delete_modify",
            ConflictKind::Kind => "kind",
            ConflictKind::Mode => "mode",
        }
    }

    /// Whether the file at the path holds conflict markers to resolve.
    pub fn has_markers(self) -> bool {
        matches!(self, ConflictKind::Content | ConflictKind::AddAdd)
    }
}

/// One conflicted path: the same shape in every answer (CLI `--json`, MCP,
/// Python).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Conflict {
    /// The path, relative to the workspace root.
    pub path: String,
    /// What kind of conflict.
    pub kind: ConflictKind,
    /// Where theirs' version was written beside ours (`PATH~theirs`), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theirs_at: Option<String>,
    /// What each side did, in words.
    pub detail: String,
}

/// One version of a path on the base or theirs side.
#[derive(Clone, Debug)]
pub enum Ver {
    /// A record of a stored tree.
    Rec(Record),
    /// A git blob: its bytes and git mode (`100644`, `100755`, `120000`).
    Blob {
        /// The bytes (a symlink's target for mode `120000`).
        data: Arc<Vec<u8>>,
        /// The git mode, as a number (`0o100644`, ...).
        mode: u32,
    },
}

impl Ver {
    /// The kind.
    pub fn kind(&self) -> Kind {
        match self {
            Ver::Rec(r) => r.kind,
            Ver::Blob { mode, .. } if *mode & 0o170000 == 0o120000 => Kind::Symlink,
            Ver::Blob { .. } => Kind::File,
        }
    }

    /// Whether a regular file is executable by its owner.
    pub fn exec(&self) -> bool {
        match self {
            Ver::Rec(r) => r.attr.perm & 0o100 != 0,
            Ver::Blob { mode, .. } => mode & 0o100 != 0,
        }
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        match self {
            Ver::Rec(r) => r.attr.size,
            Ver::Blob { data, .. } => data.len() as u64,
        }
    }

    /// The bytes of a regular file or a symlink's target (at most `limit`).
    pub fn bytes(&self, store: &dyn ObjectStore, limit: u64) -> Result<Vec<u8>> {
        match self {
            Ver::Rec(r) => match (&r.kind, &r.content) {
                (Kind::Symlink, crate::tree::Content::Bytes(b)) => Ok(b.clone()),
                (Kind::File, _) => diff::read_file(store, r, limit),
                _ => Ok(Vec::new()),
            },
            Ver::Blob { data, .. } => Ok(data[..data.len().min(limit as usize)].to_vec()),
        }
    }

    /// The record, for a version of a stored tree.
    pub fn record(&self) -> Option<&Record> {
        match self {
            Ver::Rec(r) => Some(r),
            Ver::Blob { .. } => None,
        }
    }
}

/// Theirs' change to one path since the base.
#[derive(Clone, Debug)]
pub struct Change {
    /// The path (`/`-separated, relative).
    pub path: Vec<u8>,
    /// The base version (`None`: absent).
    pub base: Option<Ver>,
    /// Theirs' version (`None`: deleted).
    pub theirs: Option<Ver>,
}

/// The result of a merge: the merged tree and its conflicts.
#[derive(Clone, Debug)]
pub struct Merged {
    /// The merged tree's root (pinned in the live session's pin scope).
    pub root: NodeId,
    /// The conflicts, by path.
    pub conflicts: Vec<Conflict>,
}

/// Where theirs comes from, for what [`apply`] grafts whole.
#[derive(Clone, Copy, Debug)]
pub enum Theirs {
    /// A stored tree: directories theirs added are grafted from it.
    Tree(NodeId),
    /// Blobs only (git): everything is written. Only a rebase (and promote's
    /// baseline update) merges in the repository's blobs.
    Blobs,
}

impl Theirs {
    /// What the conflict markers call the sides: a rebase names the session and
    /// the repository outright (its "ours" is the session, the reverse of `git
    /// rebase`); a merge of stored trees writes `ours` / `theirs`.
    pub fn labels(self) -> text::Labels {
        match self {
            Theirs::Tree(_) => text::Labels::PLAIN,
            Theirs::Blobs => text::Labels::REBASE,
        }
    }
}

/// Theirs' changes between two stored trees, path-sorted, one per path (a path
/// whose kind changed is one change).
pub fn tree_changes(store: &dyn ObjectStore, base: NodeId, theirs: NodeId) -> Result<Vec<Change>> {
    let mut out: Vec<Change> = Vec::new();
    diff::diff_walk(store, base, theirs, &mut |e| {
        // A kind change is reported as a deletion (then the deleted subtree) and an
        // addition of the same path: fold the addition into the first entry.
        if let Some(c) = out.iter_mut().rev().find(|c| c.path == e.path) {
            c.theirs = e.new.map(Ver::Rec);
        } else {
            out.push(Change {
                path: e.path,
                base: e.old.map(Ver::Rec),
                theirs: e.new.map(Ver::Rec),
            });
        }
        true
    })?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Merge `changes` (theirs since the base) into the tree `ours`: the merged root,
/// built beside `live` (which pins it), and the conflicts. Each action is applied
/// as soon as it is decided, so at most one file's bytes are held at a time.
pub fn merge(live: &Session, ours: NodeId, changes: &[Change], theirs: Theirs) -> Result<Merged> {
    merge_within(live, ours, changes, theirs, resolve::READ_MAX)
}

/// [`merge`] reading at most `read_max` bytes of files.
fn merge_within(
    live: &Session,
    ours: NodeId,
    changes: &[Change],
    theirs: Theirs,
    read_max: u64,
) -> Result<Merged> {
    let store = live.store().clone();
    let mut conflicts = Vec::new();
    let root = live.build_beside(ours, &mut |s| {
        let mut out = apply::Applier::new(s, theirs);
        conflicts = resolve::resolve(&*store, ours, changes, theirs, read_max, &mut |a| {
            out.act(a)
        })?;
        out.finish()
    })?;
    Ok(Merged { root, conflicts })
}
