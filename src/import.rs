//! Importing a directory tree from the host filesystem into the store.
//!
//! Owns: turning a host directory into a root node. Never follows symlinks (they are
//! imported as symlinks), never reads outside the directory, never writes outside the
//! store, keeps hard links as hard links (within the imported tree), and reports
//! progress as (done, total) entries.
//!
//! The walk is descriptor-based so a tree that changes while it is imported cannot
//! redirect it: every entry is opened relative to its parent's descriptor with
//! `O_NOFOLLOW`, and a file or directory is read only through a descriptor checked to
//! be the inode that was examined (a swapped-in symlink or other file aborts the
//! import instead of being followed). Sockets and device nodes are skipped (logged and
//! counted): they are not content, and a device node would give the workspace's users
//! access to a host device. FIFOs are kept (as FIFOs; nothing is read from them).

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{
    Attr, BLOCK_SIZE, Content, DirNode, Entry, FileNode, INLINE_MAX, Kind, Record, RootNode,
    Timespec,
};

/// Result of an import.
#[derive(Debug, Clone, Copy)]
pub struct Imported {
    /// Root node of the imported tree.
    pub root: NodeId,
    /// Logical bytes of regular files.
    pub bytes: i64,
    /// Number of inodes.
    pub inodes: i64,
    /// Entries not imported (sockets, device nodes).
    pub skipped: u64,
}

struct Ctx<'a> {
    store: &'a dyn ObjectStore,
    next_ino: u64,
    links: HashMap<(u64, u64), u64>,
    link_records: HashMap<u64, Record>,
    done: u64,
    total: u64,
    bytes: i64,
    inodes: i64,
    skipped: u64,
    progress: &'a mut dyn FnMut(u64, u64),
}

/// Open `name` relative to `dir` (or the path `name` itself) without following a
/// final symlink.
fn open_at(dir: Option<&OwnedFd>, name: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c =
        CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let dfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: valid C string; the returned fd is owned below.
    let fd = unsafe { libc::openat(dfd, c.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// fstat of a descriptor (also an `O_PATH` one).
fn metadata(fd: &OwnedFd) -> io::Result<fs::Metadata> {
    File::from(fd.try_clone()?).metadata()
}

/// Require that `fd` is the inode `md` describes (the entry was not swapped).
fn same_inode(fd: &OwnedFd, md: &fs::Metadata, path: &Path) -> Result<()> {
    let now = metadata(fd).map_err(|e| Error::io(path, e))?;
    if now.dev() != md.dev() || now.ino() != md.ino() {
        return Err(Error::Conflict(format!(
            "{} changed while it was being imported; retry",
            path.display()
        )));
    }
    Ok(())
}

/// The names in directory `dir` (without `.`/`..`), sorted, with whether each is a
/// directory according to `d_type` (None: unknown).
fn list_dir(dir: &OwnedFd) -> io::Result<Vec<(OsString, Option<bool>)>> {
    let raw = dir.try_clone()?.into_raw_fd();
    // SAFETY: `raw` is an owned directory fd; fdopendir takes it over.
    let dp = unsafe { libc::fdopendir(raw) };
    if dp.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `raw` is still ours to close.
        unsafe { libc::close(raw) };
        return Err(e);
    }
    // The duplicate shares the offset with `dir`: start from the beginning.
    // SAFETY: `dp` is a valid DIR*.
    unsafe { libc::rewinddir(dp) };
    let mut out = Vec::new();
    let r = loop {
        // SAFETY: resetting errno to tell end-of-directory from an error.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `dp` is a valid DIR*; the entry is read before the next call.
        let ent = unsafe { libc::readdir(dp) };
        if ent.is_null() {
            let e = io::Error::last_os_error();
            break if e.raw_os_error().unwrap_or(0) == 0 {
                Ok(())
            } else {
                Err(e)
            };
        }
        // SAFETY: d_name is NUL-terminated within the entry.
        let (name, dt) = unsafe {
            (
                std::ffi::CStr::from_ptr((*ent).d_name.as_ptr())
                    .to_bytes()
                    .to_vec(),
                (*ent).d_type,
            )
        };
        if name == b"." || name == b".." {
            continue;
        }
        let is_dir = match dt {
            libc::DT_UNKNOWN => None,
            libc::DT_DIR => Some(true),
            _ => Some(false),
        };
        out.push((OsString::from_vec(name), is_dir));
    };
    // SAFETY: `dp` is valid and closed once (this also closes `raw`).
    unsafe { libc::closedir(dp) };
    r?;
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

/// A directory's names still to visit, with whether each is a directory.
type Names = std::vec::IntoIter<(OsString, Option<bool>)>;

/// Count the entries below the directory `dir` (for progress totals; best effort).
/// Iterative, with one descriptor open: a level keeps its remaining names, and the
/// walk climbs back through `..` (see [`up`]).
fn count_entries(dir: &OwnedFd) -> u64 {
    let mut n = 0;
    let Ok(first) = dir.try_clone() else { return 0 };
    let mut cur = first;
    // (names still to visit, identity of the directory they are in).
    let mut stack: Vec<(Names, (u64, u64))> = Vec::new();
    let Ok(md) = metadata(&cur) else { return 0 };
    stack.push((
        list_dir(&cur).unwrap_or_default().into_iter(),
        (md.dev(), md.ino()),
    ));
    while let Some((names, _)) = stack.last_mut() {
        let Some((name, is_dir)) = names.next() else {
            stack.pop();
            match stack.last() {
                Some((_, id)) => match up(&cur, *id) {
                    Ok(p) => cur = p,
                    Err(_) => return n,
                },
                None => return n,
            }
            continue;
        };
        n += 1;
        if is_dir != Some(false)
            && let Ok(sub) = open_at(Some(&cur), &name, libc::O_RDONLY | libc::O_DIRECTORY)
            && let Ok(md) = metadata(&sub)
        {
            let names = list_dir(&sub).unwrap_or_default().into_iter();
            stack.push((names, (md.dev(), md.ino())));
            cur = sub;
        }
    }
    n
}

/// The parent of directory `dir` (through its `..`), required to be the directory
/// `(dev, ino)` the walk came from: a directory moved during the walk aborts it.
/// Lets a walk keep one descriptor open however deep the tree is.
fn up(dir: &OwnedFd, want: (u64, u64)) -> io::Result<OwnedFd> {
    let p = open_at(
        Some(dir),
        OsStr::new(".."),
        libc::O_RDONLY | libc::O_DIRECTORY,
    )?;
    let md = metadata(&p)?;
    if (md.dev(), md.ino()) != want {
        return Err(io::Error::other("directory moved during the import"));
    }
    Ok(p)
}

/// Import `dir` into `store`; `progress(done, total)` is called as entries are stored.
pub fn import_dir(
    store: &dyn ObjectStore,
    dir: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Imported> {
    let fd = match open_at(None, dir.as_os_str(), libc::O_RDONLY | libc::O_DIRECTORY) {
        Ok(fd) => fd,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
            return Err(Error::Invalid(format!(
                "--from {}: not a directory",
                dir.display()
            )));
        }
        Err(e) => return Err(Error::io(dir, e)),
    };
    let md = metadata(&fd).map_err(|e| Error::io(dir, e))?;
    let total = count_entries(&fd);
    let mut ctx = Ctx {
        store,
        next_ino: 2,
        links: HashMap::new(),
        link_records: HashMap::new(),
        done: 0,
        total,
        bytes: 0,
        inodes: 1,
        skipped: 0,
        progress,
    };
    let (content, subdirs) = import_tree(&mut ctx, &fd, dir)?;
    let mut root = record_from(&md, Kind::Dir, 1, content);
    root.attr.nlink = 2 + subdirs;
    let mut links: Vec<Record> = ctx.link_records.into_values().collect();
    links.sort_by_key(|r| r.ino);
    let node = RootNode {
        root,
        links,
        next_ino: ctx.next_ino,
    };
    let id = store.put(ObjKind::Node, &node.encode())?.node();
    (ctx.progress)(ctx.total, ctx.total);
    Ok(Imported {
        root: id,
        bytes: ctx.bytes,
        inodes: ctx.inodes,
        skipped: ctx.skipped,
    })
}

fn ts(sec: i64, nsec: i64) -> Timespec {
    Timespec {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

fn record_from(md: &fs::Metadata, kind: Kind, ino: u64, content: Content) -> Record {
    Record {
        kind,
        ino,
        attr: Attr {
            perm: md.mode() & 0o7777,
            uid: md.uid(),
            gid: md.gid(),
            size: if kind == Kind::Dir { 0 } else { md.size() },
            blocks: if kind == Kind::File { md.blocks() } else { 0 },
            nlink: 1,
            rdev: md.rdev() as u32,
            atime: ts(md.atime(), md.atime_nsec()),
            mtime: ts(md.mtime(), md.mtime_nsec()),
            ctime: ts(md.ctime(), md.ctime_nsec()),
        },
        xattrs: Vec::new(),
        content,
    }
}

fn import_file(ctx: &mut Ctx<'_>, mut f: File, path: &Path, size: u64) -> Result<Content> {
    if size == 0 {
        return Ok(Content::None);
    }
    if size <= INLINE_MAX {
        let mut buf = Vec::with_capacity(size as usize);
        f.read_to_end(&mut buf).map_err(|e| Error::io(path, e))?;
        let node = FileNode::Inline(buf);
        return Ok(Content::Node(
            ctx.store.put(ObjKind::Node, &node.encode())?.node(),
        ));
    }
    {
        let mut blocks = Vec::new();
        let mut buf = vec![0u8; BLOCK_SIZE as usize];
        let mut idx = 0u64;
        let mut total = 0u64;
        loop {
            let mut n = 0;
            while n < buf.len() {
                let r = f.read(&mut buf[n..]).map_err(|e| Error::io(path, e))?;
                if r == 0 {
                    break;
                }
                n += r;
            }
            if n == 0 {
                break;
            }
            total += n as u64;
            if buf[..n].iter().any(|&b| b != 0) {
                blocks.push((idx, ctx.store.put(ObjKind::Chunk, &buf[..n])?.chunk()));
            }
            idx += 1;
            if n < buf.len() {
                break;
            }
        }
        // 'F' or a block map by size, as the session writes it.
        Ok(Content::Node(crate::files::put_blocks(
            ctx.store, total, blocks,
        )?))
    }
}

/// The target of the symlink open (`O_PATH | O_NOFOLLOW`) as `fd`.
fn read_link(fd: &OwnedFd) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: `buf` is valid for `buf.len()` bytes; "" with an O_PATH fd names
        // the link itself.
        let n = unsafe {
            libc::readlinkat(
                fd.as_raw_fd(),
                c"".as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if (n as usize) < buf.len() {
            buf.truncate(n as usize);
            return Ok(buf);
        }
        buf.resize(buf.len() * 2, 0);
    }
}

/// A directory being imported: its entries so far, the names still to visit, and
/// what its own record needs once it is done.
struct Level {
    node: DirNode,
    names: Names,
    subdirs: u32,
    /// Identity (dev, ino) of the directory: checked when the walk climbs back to
    /// it through `..` (only the deepest level keeps a descriptor open).
    id: (u64, u64),
    /// Its entry in the parent (name and metadata); None for the root.
    entry: Option<(OsString, fs::Metadata)>,
}

impl Level {
    fn open(dir: &OwnedFd, path: &Path, entry: Option<(OsString, fs::Metadata)>) -> Result<Level> {
        let md = metadata(dir).map_err(|e| Error::io(path, e))?;
        Ok(Level {
            node: DirNode::default(),
            names: list_dir(dir).map_err(|e| Error::io(path, e))?.into_iter(),
            subdirs: 0,
            id: (md.dev(), md.ino()),
            entry,
        })
    }
}

/// Import the directory open as `dir` (`path` is for messages): its content and
/// number of subdirectories. Iterative (a stack of [`Level`]s, one descriptor
/// open): a tree of any depth imports in constant thread stack and descriptors.
fn import_tree(ctx: &mut Ctx<'_>, dir: &OwnedFd, path: &Path) -> Result<(Content, u32)> {
    let mut cur = dir.try_clone().map_err(|e| Error::io(path, e))?;
    let mut stack = vec![Level::open(&cur, path, None)?];
    loop {
        let top = stack
            .last_mut()
            .expect("stack holds the root until it is done");
        let Some((name, _)) = top.names.next() else {
            // This directory is complete: store it and give it to its parent.
            let done = stack.pop().expect("top exists");
            let content = Content::Node(crate::dirs::put_dir(ctx.store, done.node.entries)?);
            let Some((name, md)) = done.entry else {
                return Ok((content, done.subdirs));
            };
            let parent_path = path_of(path, &stack, None);
            let parent = stack.last_mut().expect("a non-root level has a parent");
            cur = up(&cur, parent.id).map_err(|e| Error::io(parent_path, e))?;
            let ino = ctx.next_ino;
            ctx.next_ino += 1;
            ctx.inodes += 1;
            let mut rec = record_from(&md, Kind::Dir, ino, content);
            rec.attr.nlink = 2 + done.subdirs;
            parent
                .node
                .entries
                .push((name.as_bytes().to_vec(), Entry::Inline(rec)));
            tick(ctx)?;
            continue;
        };
        // Built per entry, never kept: a deep tree's paths would add up to
        // depth^2 bytes.
        let path = path_of(path, &stack, Some(&name));
        let top = stack.last_mut().expect("checked above");
        if let Some(sub) = import_entry(ctx, &cur, top, name, &path)? {
            top.subdirs += 1;
            let (d, name, md) = sub;
            stack.push(Level::open(&d, &path, Some((name, md)))?);
            cur = d;
        }
    }
}

/// The host path of entry `name` of the deepest level of `stack` (or of that level
/// itself), for messages.
fn path_of(root: &Path, stack: &[Level], name: Option<&OsStr>) -> std::path::PathBuf {
    let mut p = root.to_path_buf();
    for l in stack {
        if let Some((n, _)) = &l.entry {
            p.push(n);
        }
    }
    if let Some(n) = name {
        p.push(n);
    }
    p
}

/// Import entry `name` of the directory open as `dir` into `level`; a directory is
/// returned (open, with its name and metadata) for the caller to descend into.
fn import_entry(
    ctx: &mut Ctx<'_>,
    dir: &OwnedFd,
    level: &mut Level,
    name: OsString,
    path: &Path,
) -> Result<Option<(OwnedFd, OsString, fs::Metadata)>> {
    // The entry itself, never what a symlink points at.
    let entry = open_at(Some(dir), &name, libc::O_PATH).map_err(|e| Error::io(path, e))?;
    let md = metadata(&entry).map_err(|e| Error::io(path, e))?;
    let ft = md.file_type();
    let kind = if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_fifo() {
        Kind::Fifo
    } else {
        let what = if ft.is_socket() {
            "socket"
        } else {
            "device node"
        };
        log::warn!("import: skipping {} (a {what})", path.display());
        ctx.skipped += 1;
        tick(ctx)?;
        return Ok(None);
    };
    if kind != Kind::Dir
        && md.nlink() > 1
        && let Some(&ino) = ctx.links.get(&(md.dev(), md.ino()))
    {
        ctx.link_records.get_mut(&ino).unwrap().attr.nlink += 1;
        level
            .node
            .entries
            .push((name.as_bytes().to_vec(), Entry::HardLink { ino, kind }));
        tick(ctx)?;
        return Ok(None);
    }
    let content = match kind {
        Kind::Dir => {
            let d = open_at(Some(dir), &name, libc::O_RDONLY | libc::O_DIRECTORY)
                .map_err(|e| Error::io(path, e))?;
            same_inode(&d, &md, path)?;
            return Ok(Some((d, name, md)));
        }
        Kind::File => {
            // O_NONBLOCK: a FIFO swapped in must not block the import.
            let f = open_at(Some(dir), &name, libc::O_RDONLY | libc::O_NONBLOCK)
                .map_err(|e| Error::io(path, e))?;
            same_inode(&f, &md, path)?;
            ctx.bytes += md.size() as i64;
            import_file(ctx, File::from(f), path, md.size())?
        }
        Kind::Symlink => Content::Bytes(read_link(&entry).map_err(|e| Error::io(path, e))?),
        _ => Content::None,
    };
    let ino = ctx.next_ino;
    ctx.next_ino += 1;
    ctx.inodes += 1;
    let rec = record_from(&md, kind, ino, content);
    if kind != Kind::Dir && md.nlink() > 1 {
        ctx.links.insert((md.dev(), md.ino()), ino);
        ctx.link_records.insert(ino, rec);
        level
            .node
            .entries
            .push((name.as_bytes().to_vec(), Entry::HardLink { ino, kind }));
    } else {
        level
            .node
            .entries
            .push((name.as_bytes().to_vec(), Entry::Inline(rec)));
    }
    tick(ctx)?;
    Ok(None)
}

/// Entries between intermediate commits of an import: a 100,000-file import as one
/// sled batch peaked at 470 MiB of daemon memory.
const COMMIT_EVERY: u64 = 8192;

fn tick(ctx: &mut Ctx<'_>) -> Result<()> {
    ctx.done += 1;
    if ctx.done.is_multiple_of(256) {
        (ctx.progress)(ctx.done, ctx.total);
    }
    if ctx.done.is_multiple_of(COMMIT_EVERY) {
        // Index what is stored so far (nothing names it until the session record
        // is committed; a gc waits for the import, see `Daemon::publish`).
        ctx.store.commit(Vec::new())?;
    }
    Ok(())
}
