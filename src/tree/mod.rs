//! Immutable Merkle tree nodes and their canonical encoding.
//!
//! Owns: [`Record`] (one inode: kind, ino, attributes, xattrs, content reference),
//! [`DirNode`] (sorted entries), [`FileNode`] (inline bytes or a sparse block list) and
//! [`RootNode`] (the workspace root: root directory record, hard-link table, next ino),
//! [`DirIndex`] (a large directory split into shards) and the shard boundary rule,
//! [`BlockMap`] + [`BlockLeaf`] (a large file's chunked block map).
//!
//! Encoding (little-endian), every node starts with magic "TFND", version u8 = 1 and a
//! type byte ('D' dir, 'F' file, 'R' root, 'I' dir index, 'M' block map, 'B' block
//! leaf). Encoding is canonical: entries sorted by name, xattrs sorted by name, a
//! directory's split into shards depends only on its names ([`shard_ranges`]), and a
//! file is an 'F' node up to [`MAP_MIN_SIZE`] bytes and an 'M' node over fixed
//! [`LEAF_BLOCKS`] spans above it ([`is_mapped`]), so equal trees have equal ids.
//! A directory of at most [`SHARD_THRESHOLD`] entries is one 'D' node; a larger one is
//! an 'I' node listing 'D' leaves whose concatenation is the directory. Changing one
//! entry of a large directory rewrites one leaf and the index, not the whole
//! directory. Decoders never panic on arbitrary input (property-tested). Pure code:
//! no I/O here. Files: `shard.rs` (sharded directories), `blockmap.rs` (block maps),
//! `tests.rs`.

use crate::error::{Error, Result};
use crate::id::{ChunkId, NodeId};

/// Magic at the start of every tree node.
pub const NODE_MAGIC: &[u8; 4] = b"TFND";
/// Current node encoding version.
pub const NODE_VERSION: u8 = 1;
/// File data block size: live files are cut into fixed, page-aligned blocks.
pub const BLOCK_SIZE: u64 = 64 * 1024;
/// Files at most this long are stored inline in their file node.
pub const INLINE_MAX: u64 = 4096;
/// Blocks per block-map leaf ([`BlockLeaf`]): leaf `k` holds the blocks with
/// indexes in `k * LEAF_BLOCKS .. (k + 1) * LEAF_BLOCKS` (32 MiB of file data).
pub const LEAF_BLOCKS: u64 = 512;
/// Files longer than this (one leaf's span) are stored as a [`BlockMap`] over
/// [`BlockLeaf`] nodes; shorter ones as one [`FileNode::Blocks`] list. The rule
/// depends only on the size, so equal content has equal ids.
pub const MAP_MIN_SIZE: u64 = LEAF_BLOCKS * BLOCK_SIZE;

/// Kind of inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Regular file.
    File = 1,
    /// Directory.
    Dir = 2,
    /// Symbolic link.
    Symlink = 3,
    /// Named pipe.
    Fifo = 4,
    /// Unix socket.
    Socket = 5,
    /// Character device.
    CharDev = 6,
    /// Block device.
    BlockDev = 7,
}

impl Kind {
    fn from_u8(b: u8) -> Result<Kind> {
        Ok(match b {
            1 => Kind::File,
            2 => Kind::Dir,
            3 => Kind::Symlink,
            4 => Kind::Fifo,
            5 => Kind::Socket,
            6 => Kind::CharDev,
            7 => Kind::BlockDev,
            _ => return Err(bad("unknown inode kind")),
        })
    }

    /// The S_IFMT bits of this kind.
    pub fn type_bits(self) -> u32 {
        match self {
            Kind::File => libc::S_IFREG,
            Kind::Dir => libc::S_IFDIR,
            Kind::Symlink => libc::S_IFLNK,
            Kind::Fifo => libc::S_IFIFO,
            Kind::Socket => libc::S_IFSOCK,
            Kind::CharDev => libc::S_IFCHR,
            Kind::BlockDev => libc::S_IFBLK,
        }
    }

    /// Kind from st_mode's S_IFMT bits.
    pub fn from_mode(mode: u32) -> Option<Kind> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::CharDev,
            libc::S_IFBLK => Kind::BlockDev,
            _ => return None,
        })
    }
}

/// Seconds + nanoseconds since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Timespec {
    /// Seconds (may be negative).
    pub sec: i64,
    /// Nanoseconds, < 1e9.
    pub nsec: u32,
}

impl Timespec {
    /// The current time.
    pub fn now() -> Timespec {
        let d = crate::clock::since_epoch();
        Timespec {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        }
    }
}

/// Inode attributes stored in a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Attr {
    /// Permission bits (0o7777), without the type bits.
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes (file length, symlink target length, 0 for others).
    pub size: u64,
    /// 512-byte blocks allocated (holes take none), as of the last flush. Lets
    /// `stat` answer without loading the file's block list.
    pub blocks: u64,
    /// Link count (directories: 2 + subdirectories).
    pub nlink: u32,
    /// Device number for device nodes.
    pub rdev: u32,
    /// Access time.
    pub atime: Timespec,
    /// Modification time.
    pub mtime: Timespec,
    /// Status change time.
    pub ctime: Timespec,
}

/// What a record's content is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// No content (empty file, device, fifo, socket).
    None,
    /// A stored node: [`FileNode`] for files, [`DirNode`] for directories.
    Node(NodeId),
    /// Literal bytes (symlink target).
    Bytes(Vec<u8>),
}

/// One inode as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Kind.
    pub kind: Kind,
    /// Persistent inode number.
    pub ino: u64,
    /// Attributes.
    pub attr: Attr,
    /// Extended attributes, sorted by name.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Content reference.
    pub content: Content,
}

/// A directory entry: the inode inline, or a reference into the root's hard-link table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The inode record itself (single-linked inode).
    Inline(Record),
    /// An inode with several links: its record is in [`RootNode::links`].
    HardLink {
        /// Inode number (key into the link table).
        ino: u64,
        /// Kind (always a non-directory).
        kind: Kind,
    },
}

impl Entry {
    /// The entry's inode number.
    pub fn ino(&self) -> u64 {
        match self {
            Entry::Inline(r) => r.ino,
            Entry::HardLink { ino, .. } => *ino,
        }
    }
    /// The entry's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Entry::Inline(r) => r.kind,
            Entry::HardLink { kind, .. } => *kind,
        }
    }
}

/// A directory: entries sorted by name.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DirNode {
    /// (name, entry), strictly increasing by name.
    pub entries: Vec<(Vec<u8>, Entry)>,
}

/// A regular file's content node ('F' or 'M').
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileNode {
    /// Small file, bytes inline.
    Inline(Vec<u8>),
    /// Sparse list of [`BLOCK_SIZE`] blocks; absent indexes are holes (zeros).
    Blocks {
        /// File length.
        size: u64,
        /// (block index, chunk), strictly increasing by index.
        blocks: Vec<(u64, ChunkId)>,
    },
    /// A large file's chunked block map (type 'M').
    Map(BlockMap),
}

/// The root of a workspace tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootNode {
    /// Record of the root directory (ino 1).
    pub root: Record,
    /// Hard-link table: records of inodes with several links, sorted by ino.
    pub links: Vec<Record>,
    /// Next inode number to allocate in sessions starting from this tree.
    pub next_ino: u64,
}

fn bad(why: &str) -> Error {
    Error::corrupt("tree node", why)
}

// ---- encoding helpers ----

fn header(out: &mut Vec<u8>, ty: u8) {
    out.extend_from_slice(NODE_MAGIC);
    out.push(NODE_VERSION);
    out.push(ty);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn put_ts(out: &mut Vec<u8>, t: Timespec) {
    out.extend_from_slice(&t.sec.to_le_bytes());
    out.extend_from_slice(&t.nsec.to_le_bytes());
}

fn put_record(out: &mut Vec<u8>, r: &Record) {
    out.push(r.kind as u8);
    out.extend_from_slice(&r.ino.to_le_bytes());
    let a = &r.attr;
    for v in [a.perm, a.uid, a.gid] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&a.size.to_le_bytes());
    out.extend_from_slice(&a.blocks.to_le_bytes());
    out.extend_from_slice(&a.nlink.to_le_bytes());
    out.extend_from_slice(&a.rdev.to_le_bytes());
    put_ts(out, a.atime);
    put_ts(out, a.mtime);
    put_ts(out, a.ctime);
    out.extend_from_slice(&(r.xattrs.len() as u32).to_le_bytes());
    for (k, v) in &r.xattrs {
        put_bytes(out, k);
        put_bytes(out, v);
    }
    match &r.content {
        Content::None => out.push(0),
        Content::Node(id) => {
            out.push(1);
            out.extend_from_slice(&id.0);
        }
        Content::Bytes(b) => {
            out.push(2);
            put_bytes(out, b);
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8], ty: u8) -> Result<Self> {
        if b.len() < 6 || &b[..4] != NODE_MAGIC {
            return Err(bad("bad magic"));
        }
        if b[4] != NODE_VERSION {
            return Err(bad("unsupported node version"));
        }
        if b[5] != ty {
            return Err(bad("unexpected node type"));
        }
        Ok(Reader { b, pos: 6 })
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() - self.pos < n {
            return Err(bad("truncated"));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn id(&mut self) -> Result<[u8; 32]> {
        Ok(self.take(32)?.try_into().unwrap())
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn ts(&mut self) -> Result<Timespec> {
        let sec = self.i64()?;
        let nsec = self.u32()?;
        if nsec >= 1_000_000_000 {
            return Err(bad("bad nanoseconds"));
        }
        Ok(Timespec { sec, nsec })
    }
    fn count(&mut self, min_item: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item) > self.b.len() - self.pos {
            return Err(bad("count exceeds node length"));
        }
        Ok(n)
    }
    fn record(&mut self) -> Result<Record> {
        let kind = Kind::from_u8(self.u8()?)?;
        let ino = self.u64()?;
        let attr = Attr {
            perm: self.u32()?,
            uid: self.u32()?,
            gid: self.u32()?,
            size: self.u64()?,
            blocks: self.u64()?,
            nlink: self.u32()?,
            rdev: self.u32()?,
            atime: self.ts()?,
            mtime: self.ts()?,
            ctime: self.ts()?,
        };
        let n = self.count(8)?;
        let mut xattrs = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.bytes()?;
            let v = self.bytes()?;
            xattrs.push((k, v));
        }
        let content = match self.u8()? {
            0 => Content::None,
            1 => Content::Node(NodeId(self.id()?)),
            2 => Content::Bytes(self.bytes()?),
            _ => return Err(bad("bad content tag")),
        };
        Ok(Record {
            kind,
            ino,
            attr,
            xattrs,
            content,
        })
    }
    fn end(&self) -> Result<()> {
        if self.pos != self.b.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(())
    }
}

impl DirNode {
    /// Canonical encoding. Entries must already be sorted by name.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.entries.len() * 96);
        header(&mut out, b'D');
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for (name, e) in &self.entries {
            put_bytes(&mut out, name);
            match e {
                Entry::Inline(r) => {
                    out.push(0);
                    put_record(&mut out, r);
                }
                Entry::HardLink { ino, kind } => {
                    out.push(1);
                    out.extend_from_slice(&ino.to_le_bytes());
                    out.push(*kind as u8);
                }
            }
        }
        out
    }

    /// Decode; rejects unsorted or duplicate names.
    pub fn decode(b: &[u8]) -> Result<DirNode> {
        let mut r = Reader::new(b, b'D')?;
        let n = r.count(6)?;
        let mut entries: Vec<(Vec<u8>, Entry)> = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.bytes()?;
            if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
                return Err(bad("invalid entry name"));
            }
            if let Some((prev, _)) = entries.last()
                && *prev >= name
            {
                return Err(bad("entries not sorted"));
            }
            let e = match r.u8()? {
                0 => Entry::Inline(r.record()?),
                1 => {
                    let ino = r.u64()?;
                    let kind = Kind::from_u8(r.u8()?)?;
                    Entry::HardLink { ino, kind }
                }
                _ => return Err(bad("bad entry tag")),
            };
            entries.push((name, e));
        }
        r.end()?;
        Ok(DirNode { entries })
    }
}

impl FileNode {
    /// Canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        header(&mut out, b'F');
        match self {
            FileNode::Inline(data) => {
                out.push(0);
                put_bytes(&mut out, data);
            }
            FileNode::Blocks { size, blocks } => {
                out.push(1);
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
                for (i, c) in blocks {
                    out.extend_from_slice(&i.to_le_bytes());
                    out.extend_from_slice(&c.0);
                }
            }
            FileNode::Map(m) => return m.encode(),
        }
        out
    }

    /// Decode an 'F' or an 'M' node; rejects unsorted blocks or blocks past the end
    /// of the file. Either type is accepted at any size (stores written before block
    /// maps hold 'F' nodes of large files).
    pub fn decode(b: &[u8]) -> Result<FileNode> {
        if b.get(5) == Some(&b'M') {
            return BlockMap::decode(b).map(FileNode::Map);
        }
        let mut r = Reader::new(b, b'F')?;
        let node = match r.u8()? {
            0 => FileNode::Inline(r.bytes()?),
            1 => {
                let size = r.u64()?;
                let n = r.count(40)?;
                let mut blocks: Vec<(u64, ChunkId)> = Vec::with_capacity(n);
                for _ in 0..n {
                    let i = r.u64()?;
                    if blocks.last().is_some_and(|(p, _)| *p >= i) {
                        return Err(bad("blocks not sorted"));
                    }
                    if i.saturating_mul(BLOCK_SIZE) >= size {
                        return Err(bad("block past end of file"));
                    }
                    blocks.push((i, ChunkId(r.id()?)));
                }
                FileNode::Blocks { size, blocks }
            }
            _ => return Err(bad("bad file node tag")),
        };
        r.end()?;
        Ok(node)
    }
}

impl RootNode {
    /// Canonical encoding. `links` must be sorted by ino.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        header(&mut out, b'R');
        out.extend_from_slice(&self.next_ino.to_le_bytes());
        put_record(&mut out, &self.root);
        out.extend_from_slice(&(self.links.len() as u32).to_le_bytes());
        for l in &self.links {
            put_record(&mut out, l);
        }
        out
    }

    /// Decode.
    pub fn decode(b: &[u8]) -> Result<RootNode> {
        let mut r = Reader::new(b, b'R')?;
        let next_ino = r.u64()?;
        let root = r.record()?;
        if root.kind != Kind::Dir {
            return Err(bad("root is not a directory"));
        }
        let n = r.count(20)?;
        let mut links: Vec<Record> = Vec::with_capacity(n);
        for _ in 0..n {
            let rec = r.record()?;
            if links.last().is_some_and(|p| p.ino >= rec.ino) {
                return Err(bad("link table not sorted"));
            }
            links.push(rec);
        }
        r.end()?;
        Ok(RootNode {
            root,
            links,
            next_ino,
        })
    }
}

mod blockmap;
mod shard;
#[cfg(test)]
mod tests;

pub use blockmap::*;
pub use shard::*;
