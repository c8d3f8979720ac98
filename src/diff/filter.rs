//! What a walk leaves out: paths outside the chosen ones, and paths the trees'
//! own ignore files ignore (`.gitignore` files, `.git/info/exclude`; see
//! [`crate::gitignore`]).
//!
//! Each side's rules are read from that side's tree, directory by directory as the
//! walk enters it; a path is ignored when every side that holds it ignores it (an
//! added path by the new side's rules, a deleted one by the old side's, a modified
//! one by both). An ignored directory is not entered ([`Ignores::Hide`]), or entered
//! with everything below it ignored ([`Ignores::Mark`]): git never re-includes a
//! path inside an excluded directory. A `.git` directory never appears while
//! ignores are followed. A directory above a chosen path is entered but not
//! reported.

use std::sync::Arc;

use crate::dirs;
use crate::error::Result;
use crate::gitignore::{self, Stack};
use crate::id::NodeId;
use crate::store::ObjectStore;
use crate::tree::{Kind, Record};

use super::Tree;

/// Whether a walk follows the trees' ignore files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ignores {
    /// Every difference (what the library's own comparisons use).
    #[default]
    Off,
    /// Leave ignored paths (and `.git`) out; ignored directories are not entered.
    Hide,
    /// Report ignored paths too, marked `ignored` (`.git` still left out).
    Mark,
}

/// What a walk reports ([`super::diff_walk_filtered`]).
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these paths and what is under them (workspace-relative, cleaned, no
    /// trailing `/`; an empty path is the whole tree). Empty: everything.
    pub paths: Vec<Vec<u8>>,
    /// Whether ignore files are followed.
    pub ignores: Ignores,
}

/// Where a directory pair stands: each side's rules there, and whether it is
/// inside an ignored directory.
#[derive(Clone, Default)]
pub(super) struct Scope {
    a: Option<Arc<Stack>>,
    b: Option<Arc<Stack>>,
    pub(super) ignored: bool,
}

/// What the filter says of one entry.
pub(super) enum Verdict {
    /// Neither reported nor entered.
    Skip,
    /// Reported when `report` (else only entered: a directory above a chosen
    /// path), marked ignored when `ignored`.
    Keep { report: bool, ignored: bool },
}

fn under(path: &[u8], p: &[u8]) -> bool {
    p.is_empty() || path == p || (path.starts_with(p) && path.get(p.len()) == Some(&b'/'))
}

impl Filter {
    /// Whether this filter leaves nothing out.
    pub fn is_off(&self) -> bool {
        self.paths.is_empty() && self.ignores == Ignores::Off
    }

    /// Judge the entry at `path` (named `name`; `ra`/`rb` its old and new records)
    /// in a directory pair at `scope`.
    pub(super) fn judge(
        &self,
        scope: &Scope,
        path: &[u8],
        name: &[u8],
        ra: Option<&Record>,
        rb: Option<&Record>,
    ) -> Verdict {
        let report = self.paths.is_empty() || self.paths.iter().any(|p| under(path, p));
        if !report && !self.paths.iter().any(|p| under(p, path)) {
            return Verdict::Skip;
        }
        if self.ignores == Ignores::Off {
            return Verdict::Keep {
                report,
                ignored: false,
            };
        }
        if name == b".git" {
            return Verdict::Skip;
        }
        let side = |s: &Option<Arc<Stack>>, r: Option<&Record>| {
            r.map(|r| {
                s.as_ref()
                    .is_some_and(|s| s.ignored(path, r.kind == Kind::Dir))
            })
        };
        let ignored = scope.ignored
            || match (side(&scope.a, ra), side(&scope.b, rb)) {
                (Some(x), Some(y)) => x && y,
                (Some(x), None) | (None, Some(x)) => x,
                (None, None) => false,
            };
        if ignored && self.ignores == Ignores::Hide {
            return Verdict::Skip;
        }
        Verdict::Keep { report, ignored }
    }

    /// The scope of the directory pair at `path` (`a`/`b`: each side's directory
    /// node, absent on a side without it) entered from `parent`; `ignored` when the
    /// directory itself is ignored.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scope(
        &self,
        store: &dyn ObjectStore,
        trees: (&Tree, &Tree),
        parent: &Scope,
        path: &[u8],
        a: Option<NodeId>,
        b: Option<NodeId>,
        ignored: bool,
    ) -> Result<Scope> {
        if self.ignores == Ignores::Off || ignored || parent.ignored {
            return Ok(Scope {
                ignored: ignored || parent.ignored,
                ..Scope::default()
            });
        }
        let side = |t: &Tree, parent: &Option<Arc<Stack>>, d: Option<NodeId>| -> Result<_> {
            let Some(d) = d else {
                return Ok(None);
            };
            let own = ignore_file(store, t, d, gitignore::FILE_NAME)?;
            if path.is_empty() {
                let exclude = match t.lookup(store, gitignore::EXCLUDE_PATH)? {
                    Some(r) => file_bytes(store, &r)?,
                    None => None,
                };
                return Ok(Stack::root(exclude.as_deref(), own.as_deref()));
            }
            Ok(Stack::child(parent.clone(), path, own.as_deref()))
        };
        Ok(Scope {
            a: side(trees.0, &parent.a, a)?,
            b: side(trees.1, &parent.b, b)?,
            ignored: false,
        })
    }
}

/// The bytes of the ignore file `name` in directory node `dir` of tree `t`, if it
/// is a regular file (a link is not followed, as git does not).
fn ignore_file(
    store: &dyn ObjectStore,
    t: &Tree,
    dir: NodeId,
    name: &[u8],
) -> Result<Option<Vec<u8>>> {
    match dirs::find_entry(store, dir, name)? {
        Some(e) => match t.resolve(&e) {
            Some(r) => file_bytes(store, &r),
            None => Ok(None),
        },
        None => Ok(None),
    }
}

fn file_bytes(store: &dyn ObjectStore, r: &Record) -> Result<Option<Vec<u8>>> {
    if r.kind != Kind::File {
        return Ok(None);
    }
    super::read_file(store, r, gitignore::MAX_FILE as u64).map(Some)
}
