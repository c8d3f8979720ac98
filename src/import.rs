//! Importing a directory tree from the host filesystem into the store.
//!
//! Owns: turning a host directory into a root node. Never follows symlinks (they are
//! imported as symlinks), never writes outside the store, keeps hard links as hard
//! links (within the imported tree), and reports progress as (done, total) entries.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::error::{Error, Result};
use crate::id::{ChunkId, NodeId};
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
    progress: &'a mut dyn FnMut(u64, u64),
}

/// Count the entries below `dir` (for progress totals).
pub fn count_entries(dir: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            n += 1;
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                n += count_entries(&e.path());
            }
        }
    }
    n
}

/// Import `dir` into `store`; `progress(done, total)` is called as entries are stored.
pub fn import_dir(
    store: &dyn ObjectStore,
    dir: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Imported> {
    let md = fs::symlink_metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !md.is_dir() {
        return Err(Error::Invalid(format!(
            "--from {}: not a directory",
            dir.display()
        )));
    }
    let total = count_entries(dir);
    let mut ctx = Ctx {
        store,
        next_ino: 2,
        links: HashMap::new(),
        link_records: HashMap::new(),
        done: 0,
        total,
        bytes: 0,
        inodes: 1,
        progress,
    };
    let content = import_tree(&mut ctx, dir)?;
    let mut root = record_from(&md, Kind::Dir, 1, content);
    root.attr.nlink = 2 + count_subdirs(dir);
    let mut links: Vec<Record> = ctx.link_records.into_values().collect();
    links.sort_by_key(|r| r.ino);
    let node = RootNode {
        root,
        links,
        next_ino: ctx.next_ino,
    };
    let id = NodeId(store.put(ObjKind::Node, &node.encode())?);
    (ctx.progress)(ctx.total, ctx.total);
    Ok(Imported {
        root: id,
        bytes: ctx.bytes,
        inodes: ctx.inodes,
    })
}

fn count_subdirs(dir: &Path) -> u32 {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                .count() as u32
        })
        .unwrap_or(0)
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

fn import_file(ctx: &mut Ctx<'_>, path: &Path, size: u64) -> Result<Content> {
    if size == 0 {
        return Ok(Content::None);
    }
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let node = if size <= INLINE_MAX {
        let mut buf = Vec::with_capacity(size as usize);
        f.read_to_end(&mut buf).map_err(|e| Error::io(path, e))?;
        FileNode::Inline(buf)
    } else {
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
                blocks.push((idx, ChunkId(ctx.store.put(ObjKind::Chunk, &buf[..n])?)));
            }
            idx += 1;
            if n < buf.len() {
                break;
            }
        }
        FileNode::Blocks {
            size: total,
            blocks,
        }
    };
    Ok(Content::Node(NodeId(
        ctx.store.put(ObjKind::Node, &node.encode())?,
    )))
}

fn import_tree(ctx: &mut Ctx<'_>, dir: &Path) -> Result<Content> {
    let mut names: Vec<_> = fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::io(dir, e))?;
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let mut node = DirNode::default();
    for name in names {
        let path = dir.join(&name);
        let md = fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
        let ft = md.file_type();
        let kind = if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() {
            Kind::File
        } else if ft.is_symlink() {
            Kind::Symlink
        } else if ft.is_fifo() {
            Kind::Fifo
        } else if ft.is_socket() {
            Kind::Socket
        } else if ft.is_char_device() {
            Kind::CharDev
        } else {
            Kind::BlockDev
        };
        if kind != Kind::Dir
            && md.nlink() > 1
            && let Some(&ino) = ctx.links.get(&(md.dev(), md.ino()))
        {
            ctx.link_records.get_mut(&ino).unwrap().attr.nlink += 1;
            node.entries
                .push((name.as_bytes().to_vec(), Entry::HardLink { ino, kind }));
            tick(ctx);
            continue;
        }
        let content = match kind {
            Kind::Dir => import_tree(ctx, &path)?,
            Kind::File => {
                ctx.bytes += md.size() as i64;
                import_file(ctx, &path, md.size())?
            }
            Kind::Symlink => Content::Bytes(
                fs::read_link(&path)
                    .map_err(|e| Error::io(&path, e))?
                    .as_os_str()
                    .as_bytes()
                    .to_vec(),
            ),
            _ => Content::None,
        };
        let ino = ctx.next_ino;
        ctx.next_ino += 1;
        ctx.inodes += 1;
        let mut rec = record_from(&md, kind, ino, content);
        if kind == Kind::Dir {
            rec.attr.nlink = 2 + count_subdirs(&path);
        }
        if kind != Kind::Dir && md.nlink() > 1 {
            ctx.links.insert((md.dev(), md.ino()), ino);
            ctx.link_records.insert(ino, rec);
            node.entries
                .push((name.as_bytes().to_vec(), Entry::HardLink { ino, kind }));
        } else {
            node.entries
                .push((name.as_bytes().to_vec(), Entry::Inline(rec)));
        }
        tick(ctx);
    }
    Ok(Content::Node(crate::dirs::put_dir(
        ctx.store,
        node.entries,
    )?))
}

fn tick(ctx: &mut Ctx<'_>) {
    ctx.done += 1;
    if ctx.done.is_multiple_of(256) {
        (ctx.progress)(ctx.done, ctx.total);
    }
}
