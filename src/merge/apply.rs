//! Applying a merge's actions ([`super::resolve::Action`], as the resolution
//! decides them) to a private session opened on ours (`Session::build_beside`):
//! grafts from theirs' tree, files and links written, removals, attributes (owner,
//! group and mode together);
//! directories theirs deleted go last ([`Applier::finish`]), deepest first, and
//! only when empty. Missing parent directories are created (mode 0755, the
//! parent's owner). A file given by node id ([`Body::Node`]) is made to refer to
//! that stored content: nothing is read or copied.

use super::Theirs;
use super::resolve::{Action, Body, Owner};
use crate::error::{Error, Result};
use crate::session::Session;
use crate::session::posix::{NewNode, SetAttr};
use crate::tree::Kind;

/// Bytes written per call.
const WRITE_STEP: usize = 1 << 20;

/// Applies actions one at a time to `s` (a private session on ours).
pub struct Applier<'s> {
    s: &'s Session,
    theirs: Theirs,
    /// Directories theirs deleted, removed at the end if empty.
    dirs: Vec<Vec<u8>>,
}

impl<'s> Applier<'s> {
    /// An applier on `s`, grafting from `theirs`.
    pub fn new(s: &'s Session, theirs: Theirs) -> Applier<'s> {
        Applier {
            s,
            theirs,
            dirs: Vec::new(),
        }
    }

    /// Apply one action (a directory removal waits for [`Self::finish`]).
    pub fn act(&mut self, a: Action) -> Result<()> {
        let s = self.s;
        match a {
            Action::Graft(p) => {
                let Theirs::Tree(root) = self.theirs else {
                    return Err(Error::Invalid("a graft needs theirs' tree".into()));
                };
                let (_, r) = s.graft(root, Some(std::slice::from_ref(&p)), None);
                r?;
            }
            Action::Write {
                path,
                body,
                perm,
                owner,
            } => write(s, &path, &body, perm, owner)?,
            Action::Link {
                path,
                target,
                owner,
            } => {
                let (parent, name) = replace_at(s, &path, owner)?;
                let (uid, gid) = owner_or_parent(s, parent, owner)?;
                s.create_node(parent, name, NewNode::Symlink(&target), 0o777, uid, gid)?;
            }
            Action::Remove(p) => {
                if let Some((parent, name)) = parent_of(s, &p)? {
                    ignore_gone(s.remove(parent, name, false))?;
                    if matches!(self.theirs, Theirs::Blobs) {
                        prune(s, &p)?;
                    }
                }
            }
            Action::RemoveDir(p) => self.dirs.push(p),
            Action::Attr(p, attrs) => {
                if let Some(ino) = walk(s, &p)? {
                    let a = SetAttr {
                        mode: Some(attrs.perm),
                        uid: Some(attrs.uid),
                        gid: Some(attrs.gid),
                        ..SetAttr::default()
                    };
                    s.setattr(ino, a)?;
                }
            }
        }
        Ok(())
    }

    /// Remove the directories theirs deleted that are empty now, deepest first.
    pub fn finish(mut self) -> Result<()> {
        self.dirs.sort();
        for p in self.dirs.iter().rev() {
            rmdir_if_empty(self.s, p)?;
        }
        Ok(())
    }
}

fn write(s: &Session, path: &[u8], body: &Body, perm: u32, owner: Owner) -> Result<()> {
    let (parent, name) = replace_at(s, path, owner)?;
    let (uid, gid) = owner_or_parent(s, parent, owner)?;
    match body {
        Body::Node { node, size, blocks } => {
            let node = NewNode::Stored {
                node: *node,
                size: *size,
                blocks: *blocks,
            };
            s.create_node(parent, name, node, perm, uid, gid)?;
        }
        Body::Bytes(data) => {
            let st = s.create_node(parent, name, NewNode::File, perm, uid, gid)?;
            for (i, piece) in data.chunks(WRITE_STEP).enumerate() {
                s.write(st.ino, (i * WRITE_STEP) as u64, piece)?;
            }
        }
    }
    Ok(())
}

/// The parent directory of `path` (created as needed) and its last component,
/// with any non-directory there removed.
fn replace_at<'p>(s: &Session, path: &'p [u8], owner: Owner) -> Result<(u64, &'p [u8])> {
    let (dir, name) = split(path);
    let parent = mkdirs(s, dir, owner)?;
    match s.lookup(parent, name) {
        Ok(st) if st.kind == Kind::Dir => {
            return Err(Error::Invalid(format!(
                "merge: {} is a directory in the merged tree",
                String::from_utf8_lossy(path)
            )));
        }
        Ok(_) => s.remove(parent, name, false)?,
        Err(Error::Posix(libc::ENOENT)) => {}
        Err(e) => return Err(e),
    }
    Ok((parent, name))
}

fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&[], path),
    }
}

fn comps(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty())
}

/// The inode at `path`, if there is one.
fn walk(s: &Session, path: &[u8]) -> Result<Option<u64>> {
    let mut ino = 1;
    for c in comps(path) {
        match s.lookup(ino, c) {
            Ok(st) => ino = st.ino,
            Err(Error::Posix(libc::ENOENT | libc::ENOTDIR)) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(Some(ino))
}

fn parent_of<'p>(s: &Session, path: &'p [u8]) -> Result<Option<(u64, &'p [u8])>> {
    let (dir, name) = split(path);
    Ok(walk(s, dir)?.map(|p| (p, name)))
}

/// The directory at `path`, created (and its parents) where missing.
fn mkdirs(s: &Session, path: &[u8], owner: Owner) -> Result<u64> {
    let mut ino = 1;
    for c in comps(path) {
        ino = match s.lookup(ino, c) {
            Ok(st) if st.kind == Kind::Dir => st.ino,
            Ok(_) => {
                return Err(Error::Invalid(format!(
                    "merge: a parent of {} is not a directory in the merged tree",
                    String::from_utf8_lossy(path)
                )));
            }
            Err(Error::Posix(libc::ENOENT)) => {
                let (uid, gid) = owner_or_parent(s, ino, owner)?;
                s.create_node(ino, c, NewNode::Dir, 0o755, uid, gid)?.ino
            }
            Err(e) => return Err(e),
        };
    }
    Ok(ino)
}

fn owner_or_parent(s: &Session, parent: u64, owner: Owner) -> Result<(u32, u32)> {
    match owner {
        Some(o) => Ok(o),
        None => {
            let a = s.getattr(parent)?.attr;
            Ok((a.uid, a.gid))
        }
    }
}

fn ignore_gone(r: Result<()>) -> Result<()> {
    match r {
        Err(Error::Posix(libc::ENOENT | libc::ENOTEMPTY | libc::ENOTDIR)) => Ok(()),
        r => r,
    }
}

fn rmdir_if_empty(s: &Session, path: &[u8]) -> Result<()> {
    match parent_of(s, path)? {
        Some((parent, name)) => ignore_gone(s.remove(parent, name, true)),
        None => Ok(()),
    }
}

/// After a file theirs deleted (git): its parent directories that became empty
/// go too, as git's checkout does.
fn prune(s: &Session, path: &[u8]) -> Result<()> {
    let mut p = split(path).0;
    while !p.is_empty() {
        rmdir_if_empty(s, p)?;
        if walk(s, p)?.is_some() {
            break;
        }
        p = split(p).0;
    }
    Ok(())
}
