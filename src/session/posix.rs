//! Namespace and attribute operations of a session (lookup, create, unlink, rename,
//! link, setattr, directory listing; xattrs are in `xattr`). Each takes the table lock once, checks
//! POSIX preconditions, mutates, and marks dirty paths (see `inode` invariants).

use super::inode::{Data, FileData, Inode};
use super::{Session, Stat, check_name, stat_of};
use crate::error::{Error, Result, posix};
use crate::id::NodeId;
use crate::tree::{Kind, Timespec};

/// Which attributes a setattr changes.
#[derive(Default, Debug, Clone)]
pub struct SetAttr {
    /// New permission bits (type bits ignored).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate / extend).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<Timespec>,
    /// New modification time.
    pub mtime: Option<Timespec>,
    /// Explicit change time.
    pub ctime: Option<Timespec>,
    /// Clear set-user-id (and set-group-id when group-executable) of a regular
    /// file, as Linux does on truncation by an unprivileged caller (the kernel
    /// leaves this to us under FUSE_HANDLE_KILLPRIV_V2). Ignored when `mode` is set.
    pub kill_suidgid: bool,
    /// The request is a chown (also one that changes nothing) by this caller: drop
    /// set-user-id / set-group-id of a non-directory by Linux's rules
    /// ([`chown_killed`]). Ignored when `mode` is set.
    pub chown: Option<Caller>,
}

/// Who asks for a chown (for its set-group-id rule).
#[derive(Default, Debug, Clone)]
pub struct Caller {
    /// Holds CAP_FSETID (uid 0 stands for it).
    pub privileged: bool,
    /// Primary and supplementary groups.
    pub groups: Vec<u32>,
}

/// Permission bits of a non-directory after a chown, as Linux computes them
/// (`chown_common`, `setattr_should_drop_sgid`): set-user-id always goes, even for
/// root; set-group-id goes with group execute, and otherwise when the caller is
/// neither in the file's group (before the change) nor privileged.
pub fn chown_killed(perm: u32, gid: u32, by: &Caller) -> u32 {
    let mut p = perm & !libc::S_ISUID;
    if p & libc::S_ISGID != 0
        && (p & libc::S_IXGRP != 0 || !(by.privileged || by.groups.contains(&gid)))
    {
        p &= !libc::S_ISGID;
    }
    p
}

/// Permission bits after a privilege-dropping change (Linux `should_remove_suid`):
/// set-user-id always goes; set-group-id only with group execute (otherwise it marks
/// mandatory locking, not privilege).
pub fn killed_suidgid(perm: u32) -> u32 {
    let mut p = perm & !libc::S_ISUID;
    if p & libc::S_IXGRP != 0 {
        p &= !libc::S_ISGID;
    }
    p
}

/// One directory entry of a listing snapshot.
#[derive(Clone, Debug)]
pub struct DirEntry {
    /// Name.
    pub name: Vec<u8>,
    /// Inode number.
    pub ino: u64,
    /// Kind.
    pub kind: Kind,
}

/// What a new inode is.
pub enum NewNode<'a> {
    /// Directory.
    Dir,
    /// Regular file.
    File,
    /// Symlink to a target.
    Symlink(&'a [u8]),
    /// Fifo, socket or device with rdev.
    Special(Kind, u32),
    /// A regular file referring to stored content (nothing is read): its file
    /// node as a tree records it (`None`: none), size, allocated 512-byte blocks.
    Stored {
        /// The file node.
        node: Option<NodeId>,
        /// Size in bytes.
        size: u64,
        /// Allocated 512-byte blocks.
        blocks: u64,
    },
}

pub use super::xattr::{DEBUG_PANIC_XATTR, XATTR_CREATE, XATTR_REPLACE};

impl Session {
    /// Look up `name` in `parent`; counts a kernel reference on success.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Stat> {
        if name.len() > super::NAME_MAX {
            return posix(libc::ENAMETOOLONG);
        }
        let mut st = self.lock();
        let ino = st
            .child(&**self.store(), parent, name)?
            .ok_or(Error::Posix(libc::ENOENT))?;
        st.get_mut(ino)?.lookups += 1;
        stat_of(&st, ino)
    }

    /// Drop one kernel reference to each of `inos` (under one lock).
    pub fn forget_many(&self, inos: &[u64]) {
        if inos.is_empty() {
            return;
        }
        let mut st = self.lock();
        for &ino in inos {
            drop_lookups(&mut st, ino, 1);
        }
        st.maybe_sweep();
    }

    /// Drop `n` kernel references to `ino`. The last one makes its directory an
    /// eviction candidate ([`super::evict`]).
    pub fn forget(&self, ino: u64, n: u64) {
        let mut st = self.lock();
        drop_lookups(&mut st, ino, n);
        st.maybe_sweep();
    }

    /// Create an inode named `name` in `parent`; counts a kernel reference.
    pub fn create_node(
        &self,
        parent: u64,
        name: &[u8],
        node: NewNode<'_>,
        perm: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Stat> {
        let _gate = self.gate_shared();
        check_name(name)?;
        let mut st = self.lock();
        let store = self.store().clone();
        if st.child(&*store, parent, name)?.is_some() {
            return posix(libc::EEXIST);
        }
        check_room(&mut st, parent)?;
        let p = st.get(parent)?;
        if st.replaced.contains(&parent) {
            return posix(libc::ESTALE);
        }
        if p.attr.nlink == 0 {
            return posix(libc::ENOENT);
        }
        let (kind, mut perm, mut gid) = (
            match node {
                NewNode::Dir => Kind::Dir,
                NewNode::File | NewNode::Stored { .. } => Kind::File,
                NewNode::Symlink(_) => Kind::Symlink,
                NewNode::Special(k, _) => k,
            },
            perm & 0o7777,
            gid,
        );
        if p.attr.perm & libc::S_ISGID != 0 {
            gid = p.attr.gid;
            if kind == Kind::Dir {
                perm |= libc::S_ISGID;
            }
        }
        let ino = st.alloc_ino();
        let mut inode = Inode::new(kind, perm, uid, gid, parent);
        match node {
            NewNode::Symlink(target) => {
                if target.len() > super::SYMLINK_MAX {
                    return posix(libc::ENAMETOOLONG);
                }
                inode.attr.perm = 0o777;
                inode.attr.size = target.len() as u64;
                inode.data = Data::Symlink(target.to_vec());
            }
            NewNode::Special(_, rdev) => inode.attr.rdev = rdev,
            NewNode::Stored { node, size, blocks } => {
                inode.attr.size = size;
                inode.attr.blocks = blocks;
                inode.data = Data::File(FileData::new(node));
                st.total_bytes += size as i64;
            }
            _ => {}
        }
        inode.lookups = 1;
        let now = inode.attr.ctime;
        st.inodes.insert(ino, inode);
        st.insert_entry(parent, name.to_vec(), ino)?;
        let p = st.get_mut(parent)?;
        p.attr.mtime = now;
        p.attr.ctime = now;
        if kind == Kind::Dir {
            p.attr.nlink += 1;
        }
        st.total_inodes += 1;
        st.mark_dir_changed(parent);
        st.mark_dirty(ino);
        stat_of(&st, ino)
    }

    /// Read a symlink's target.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        match &self.lock().get(ino)?.data {
            Data::Symlink(t) => Ok(t.clone()),
            _ => posix(libc::EINVAL),
        }
    }

    /// Remove a non-directory (`dir == false`) or an empty directory (`dir == true`).
    pub fn remove(&self, parent: u64, name: &[u8], dir: bool) -> Result<()> {
        let _gate = self.gate_shared();
        if name.len() > super::NAME_MAX {
            return posix(libc::ENAMETOOLONG);
        }
        let mut st = self.lock();
        let store = self.store().clone();
        let ino = st
            .child(&*store, parent, name)?
            .ok_or(Error::Posix(libc::ENOENT))?;
        let is_dir = st.get(ino)?.kind == Kind::Dir;
        match (dir, is_dir) {
            (true, false) => return posix(libc::ENOTDIR),
            (false, true) => return posix(libc::EISDIR),
            (true, true) => {
                st.load_dir(&*store, ino)?;
                if !st.entries_mut(ino)?.is_empty() {
                    return posix(libc::ENOTEMPTY);
                }
            }
            _ => {}
        }
        st.remove_entry(parent, name)?;
        let now = Timespec::now();
        let p = st.get_mut(parent)?;
        p.attr.mtime = now;
        p.attr.ctime = now;
        if is_dir {
            p.attr.nlink -= 1;
        }
        st.mark_dir_changed(parent);
        drop_link(&mut st, ino, now);
        Ok(())
    }

    /// rename(2) with RENAME_NOREPLACE / RENAME_EXCHANGE flags.
    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<()> {
        let _gate = self.gate_shared();
        check_name(newname)?;
        if name.len() > super::NAME_MAX {
            return posix(libc::ENAMETOOLONG);
        }
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        if flags & !(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE) != 0 || (noreplace && exchange)
        {
            return posix(libc::EINVAL);
        }
        let mut st = self.lock();
        let store = self.store().clone();
        let src = st
            .child(&*store, parent, name)?
            .ok_or(Error::Posix(libc::ENOENT))?;
        let dst = st.child(&*store, newparent, newname)?;
        let src_dir = st.get(src)?.kind == Kind::Dir;
        // A directory may not move below itself.
        if src_dir || exchange {
            let mut cur = newparent;
            while cur != 0 {
                if cur == src || Some(cur) == dst.filter(|_| exchange) {
                    return posix(libc::EINVAL);
                }
                cur = st.get(cur)?.parent;
            }
        }
        let now = Timespec::now();
        if exchange {
            let dst = dst.ok_or(Error::Posix(libc::ENOENT))?;
            let dst_dir = st.get(dst)?.kind == Kind::Dir;
            st.insert_entry(parent, name.to_vec(), dst)?;
            st.insert_entry(newparent, newname.to_vec(), src)?;
            if parent != newparent && src_dir != dst_dir {
                let (d_from, d_to) = if src_dir {
                    (parent, newparent)
                } else {
                    (newparent, parent)
                };
                st.get_mut(d_from)?.attr.nlink -= 1;
                st.get_mut(d_to)?.attr.nlink += 1;
            }
            for (ino, p) in [(src, newparent), (dst, parent)] {
                let i = st.get_mut(ino)?;
                if !i.hardlink {
                    i.parent = p;
                }
                i.attr.ctime = now;
            }
            touch_dirs(&mut st, parent, newparent, now)?;
            st.mark_dirty(src);
            st.mark_dirty(dst);
            return Ok(());
        }
        if let Some(dst) = dst {
            if noreplace {
                return posix(libc::EEXIST);
            }
            if dst == src {
                return Ok(());
            }
            let dst_dir = st.get(dst)?.kind == Kind::Dir;
            match (src_dir, dst_dir) {
                (true, false) => return posix(libc::ENOTDIR),
                (false, true) => return posix(libc::EISDIR),
                (true, true) => {
                    st.load_dir(&*store, dst)?;
                    if !st.entries_mut(dst)?.is_empty() {
                        return posix(libc::ENOTEMPTY);
                    }
                    st.get_mut(newparent)?.attr.nlink -= 1;
                }
                _ => {}
            }
            st.remove_entry(newparent, newname)?;
            drop_link(&mut st, dst, now);
        } else if newparent != parent {
            check_room(&mut st, newparent)?;
        }
        st.remove_entry(parent, name)?;
        st.insert_entry(newparent, newname.to_vec(), src)?;
        if src_dir && parent != newparent {
            st.get_mut(parent)?.attr.nlink -= 1;
            st.get_mut(newparent)?.attr.nlink += 1;
        }
        let i = st.get_mut(src)?;
        if !i.hardlink {
            i.parent = newparent;
        }
        i.attr.ctime = now;
        touch_dirs(&mut st, parent, newparent, now)?;
        st.mark_dirty(src);
        Ok(())
    }

    /// Add a hard link `newname` in `newparent` to `ino`; counts a kernel reference.
    pub fn link(&self, ino: u64, newparent: u64, newname: &[u8]) -> Result<Stat> {
        let _gate = self.gate_shared();
        check_name(newname)?;
        let mut st = self.lock();
        let store = self.store().clone();
        if st.get(ino)?.kind == Kind::Dir {
            return posix(libc::EPERM);
        }
        if st.child(&*store, newparent, newname)?.is_some() {
            return posix(libc::EEXIST);
        }
        if st.get(ino)?.attr.nlink == 0 {
            return posix(libc::ENOENT);
        }
        if st.get(ino)?.attr.nlink >= 65000 {
            return posix(libc::EMLINK);
        }
        check_room(&mut st, newparent)?;
        let now = Timespec::now();
        let old_parent = st.get(ino)?.parent;
        if !st.get(ino)?.hardlink {
            // Its record moves into the link table (the root node): bounded.
            let bound = st.get(ino)?.record_bound();
            if st.link_bytes + bound > super::LINK_TABLE_MAX {
                return posix(libc::ENOSPC);
            }
            st.link_bytes += bound;
            // The old entry becomes a link-table reference: its directory changes.
            st.mark_dir_changed(old_parent);
            let i = st.get_mut(ino)?;
            i.hardlink = true;
            i.parent = 0;
            st.links.insert(ino);
            // Its one name so far (a single-linked inode is named once, in `parent`).
            st.index_link(ino, old_parent);
        }
        let i = st.get_mut(ino)?;
        i.attr.nlink += 1;
        i.attr.ctime = now;
        i.lookups += 1;
        st.insert_entry(newparent, newname.to_vec(), ino)?;
        let p = st.get_mut(newparent)?;
        p.attr.mtime = now;
        p.attr.ctime = now;
        st.mark_dir_changed(newparent);
        st.mark_dirty(ino);
        stat_of(&st, ino)
    }

    /// Change attributes (chmod, chown, truncate, utimens).
    pub fn setattr(&self, ino: u64, a: SetAttr) -> Result<Stat> {
        let _gate = self.gate_shared();
        // A truncation reads what it needs outside the table lock and returns with
        // the lock held, so the other changes apply atomically with it.
        let mut st = match a.size {
            Some(size) => self.truncate(ino, size)?,
            None => self.lock(),
        };
        let now = Timespec::now();
        let i = st.get_mut(ino)?;
        if let Some(by) = &a.chown
            && a.mode.is_none()
            && i.kind != Kind::Dir
        {
            // Before the new group is set: the rule looks at the old one.
            i.attr.perm = chown_killed(i.attr.perm, i.attr.gid, by);
        }
        if let Some(m) = a.mode {
            i.attr.perm = m & 0o7777;
        }
        if let Some(u) = a.uid {
            i.attr.uid = u;
        }
        if let Some(g) = a.gid {
            i.attr.gid = g;
        }
        if let Some(t) = a.atime {
            i.attr.atime = t;
        }
        if let Some(t) = a.mtime {
            i.attr.mtime = t;
        }
        if a.kill_suidgid && a.mode.is_none() && i.kind == Kind::File {
            i.attr.perm = killed_suidgid(i.attr.perm);
        }
        i.attr.ctime = a.ctime.unwrap_or(now);
        st.mark_dirty(ino);
        stat_of(&st, ino)
    }

    /// Drop set-user-id / set-group-id after an unprivileged write (the kernel asks
    /// with FUSE_WRITE_KILL_SUIDGID). Returns whether the mode changed.
    pub fn kill_suidgid(&self, ino: u64) -> Result<bool> {
        let _gate = self.gate_shared();
        let mut st = self.lock();
        let i = st.get_mut(ino)?;
        let p = killed_suidgid(i.attr.perm);
        if p == i.attr.perm || i.kind != Kind::File {
            return Ok(false);
        }
        i.attr.perm = p;
        i.attr.ctime = Timespec::now();
        st.mark_dirty(ino);
        Ok(true)
    }

    /// One page of a listing of directory `ino`: the entries after cookie `after`
    /// (0 = from the start; `.` is 1, `..` is 2, names follow — see
    /// [`Entries`](super::inode::Entries)), at most `max`. With `plus`, each name's
    /// attributes come too and each counts a kernel reference, like a lookup (the
    /// caller forgets those it could not send). Stateless: no open handle.
    pub fn readdir_page(
        &self,
        ino: u64,
        after: u64,
        max: usize,
        plus: bool,
    ) -> Result<Vec<(u64, DirEntry, Option<Stat>)>> {
        let mut st = self.lock();
        st.load_dir(&**self.store(), ino)?;
        let i = st.get_mut(ino)?;
        let parent = if i.parent == 0 { ino } else { i.parent };
        let Data::Dir(d) = &mut i.data else {
            return posix(libc::ENOTDIR);
        };
        let page = d.entries.as_mut().unwrap().page(after, 3, max);
        let mut out = Vec::with_capacity(page.len() + 2);
        for (cookie, name, dot) in [(1, &b"."[..], ino), (2, &b".."[..], parent)] {
            if after < cookie {
                let e = DirEntry {
                    name: name.to_vec(),
                    ino: dot,
                    kind: Kind::Dir,
                };
                out.push((cookie, e, None));
            }
        }
        for (cookie, name, child) in page {
            let Some(c) = st.inodes.get_mut(&child) else {
                continue;
            };
            let kind = c.kind;
            let stat = if plus {
                c.lookups += 1;
                Some(stat_of(&st, child)?)
            } else {
                None
            };
            out.push((
                cookie,
                DirEntry {
                    name,
                    ino: child,
                    kind,
                },
                stat,
            ));
        }
        Ok(out)
    }

    /// Count an open handle on `ino` (file or directory).
    pub fn open_handle(&self, ino: u64, write: bool) -> Result<Stat> {
        let mut st = self.lock();
        if st.replaced.contains(&ino) {
            // Reached through an entry cached before a graft replaced it.
            return posix(libc::ESTALE);
        }
        let i = st.get_mut(ino)?;
        if write && i.kind == Kind::Dir {
            return posix(libc::EISDIR);
        }
        stat_of(&st, ino)
    }

    /// Release an open handle. Open files are not counted: an open file pins its
    /// kernel inode, so its lookup count already keeps it (even unlinked) alive.
    pub fn release(&self, ino: u64) {
        self.lock().maybe_reap(ino);
    }
}

/// Drop `n` kernel references to `ino`; at the last one, note it for eviction
/// and reap it if unlinked.
fn drop_lookups(st: &mut super::inode::State, ino: u64, n: u64) {
    let Some(i) = st.inodes.get_mut(&ino) else {
        return;
    };
    let was = i.lookups;
    i.lookups = was.saturating_sub(n);
    if was > 0 && i.lookups == 0 {
        st.note_forgotten(ino);
    }
    st.maybe_reap(ino);
}

/// Room for one more name in directory `dir` (its entries loaded): at most
/// [`super::DIR_ENTRIES_MAX`].
fn check_room(st: &mut super::inode::State, dir: u64) -> Result<()> {
    if st.entries_mut(dir)?.len() >= super::DIR_ENTRIES_MAX {
        return posix(libc::ENOSPC);
    }
    Ok(())
}

fn touch_dirs(st: &mut super::inode::State, a: u64, b: u64, now: Timespec) -> Result<()> {
    for d in [a, b] {
        let p = st.get_mut(d)?;
        p.attr.mtime = now;
        p.attr.ctime = now;
        st.mark_dir_changed(d);
    }
    Ok(())
}

/// Drop one link to `ino` (its directory entry is already gone).
pub(crate) fn drop_link(st: &mut super::inode::State, ino: u64, now: Timespec) {
    let Some(i) = st.inodes.get_mut(&ino) else {
        return;
    };
    let is_dir = i.kind == Kind::Dir;
    let bound = i.record_bound();
    i.attr.ctime = now;
    i.attr.nlink = if is_dir {
        0
    } else {
        i.attr.nlink.saturating_sub(1)
    };
    let gone = i.attr.nlink == 0;
    let hard = i.hardlink;
    if gone {
        i.parent = 0;
        let size = i.attr.size as i64;
        if i.kind == Kind::File {
            st.total_bytes -= size;
        }
        st.total_inodes -= 1;
        if hard {
            st.link_bytes = st.link_bytes.saturating_sub(bound);
            st.links.remove(&ino);
            st.links_dirty = true;
            st.changed = true;
        }
        st.maybe_reap(ino);
    } else {
        st.mark_dirty(ino);
        if hard && !is_dir {
            st.unlink_to_one(ino);
        }
    }
}
