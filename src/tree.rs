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
//! no I/O here.

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
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
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

/// The block map of a file longer than [`MAP_MIN_SIZE`] (type 'M'): its non-empty
/// leaves, by leaf number. Changing one block of the file rewrites one leaf and this
/// index (about 40 bytes per 32 MiB of file), not a list of every block.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BlockMap {
    /// File length.
    pub size: u64,
    /// (leaf number, [`BlockLeaf`] node id), strictly increasing by leaf number;
    /// every leaf starts before `size`.
    pub leaves: Vec<(u64, NodeId)>,
}

/// One leaf of a [`BlockMap`] (type 'B'): the blocks of one [`LEAF_BLOCKS`] span,
/// absolute block indexes, non-empty. Which leaf it is follows from its blocks.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BlockLeaf {
    /// (block index, chunk), strictly increasing, all in the same leaf span.
    pub blocks: Vec<(u64, ChunkId)>,
}

/// The leaf number of block `idx`.
pub fn leaf_of(idx: u64) -> u64 {
    idx / LEAF_BLOCKS
}

/// Whether a file of `size` bytes is stored as a [`BlockMap`] (canonical rule).
pub fn is_mapped(size: u64) -> bool {
    size > MAP_MIN_SIZE
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

/// Directories with more entries than this are stored as a [`DirIndex`] of shards.
pub const SHARD_THRESHOLD: usize = 256;
/// A shard ends after a name whose boundary hash has these low bits all zero
/// (about 64 entries per shard).
const SHARD_MASK: u64 = 63;
/// Fewest entries in a shard before a boundary may end it.
const SHARD_MIN: usize = 16;
/// Most entries in a shard (bounds a leaf even for adversarial names).
const SHARD_MAX: usize = 512;

/// A sharded directory: its entries are the concatenation of the leaf [`DirNode`]s,
/// in order (each leaf non-empty, names increasing across leaves).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DirIndex {
    /// (number of entries, leaf node id) per shard, in name order.
    pub shards: Vec<(u32, NodeId)>,
}

/// How a directory of `names` (sorted) is split into shards: one range when it has at
/// most [`SHARD_THRESHOLD`] entries, otherwise content-defined ranges (a boundary
/// depends only on the names around it, so inserting or removing a name changes one
/// shard, rarely two).
pub fn shard_ranges<'a>(
    names: impl ExactSizeIterator<Item = &'a [u8]>,
) -> Vec<std::ops::Range<usize>> {
    let n = names.len();
    if n <= SHARD_THRESHOLD {
        return std::iter::once(0..n).collect();
    }
    let mut out = Vec::with_capacity(n / 32 + 1);
    let mut start = 0;
    for (i, name) in names.enumerate() {
        let len = i + 1 - start;
        if len >= SHARD_MAX || (len >= SHARD_MIN && boundary_hash(name) & SHARD_MASK == 0) {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < n {
        out.push(start..n);
    }
    out
}

/// FNV-1a with a murmur3 finalizer: fast, stable across versions and platforms
/// (part of the on-disk format: it decides shard boundaries).
fn boundary_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Digest of a shard's membership: names, inode numbers, kinds and whether each
/// entry is a hard-link reference. Two shards with equal digests whose inline
/// records are unchanged encode to the same leaf (lets a flush reuse clean leaves).
#[derive(Default)]
pub struct ShardDigest(blake3::Hasher);

impl ShardDigest {
    /// Add one entry, in name order.
    pub fn add(&mut self, name: &[u8], ino: u64, kind: Kind, hardlink: bool) {
        self.0.update(&(name.len() as u32).to_le_bytes());
        self.0.update(name);
        self.0.update(&ino.to_le_bytes());
        self.0.update(&[kind as u8, hardlink as u8]);
    }
    /// The digest.
    pub fn finish(&self) -> [u8; 32] {
        *self.0.finalize().as_bytes()
    }
}

/// Whether encoded node `b` is a [`DirIndex`] (by its type byte; not validated).
pub fn is_dir_index(b: &[u8]) -> bool {
    b.len() > 5 && &b[..4] == NODE_MAGIC && b[5] == b'I'
}

/// A directory content node of either shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyDir {
    /// All entries in one node.
    Flat(DirNode),
    /// A sharded directory's index.
    Index(DirIndex),
}

impl AnyDir {
    /// Decode a 'D' or an 'I' node.
    pub fn decode(b: &[u8]) -> Result<AnyDir> {
        match b.get(5) {
            Some(b'I') => DirIndex::decode(b).map(AnyDir::Index),
            _ => DirNode::decode(b).map(AnyDir::Flat),
        }
    }
}

impl DirIndex {
    /// Canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + self.shards.len() * 36);
        header(&mut out, b'I');
        out.extend_from_slice(&(self.shards.len() as u32).to_le_bytes());
        for (n, id) in &self.shards {
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&id.0);
        }
        out
    }

    /// Decode; rejects empty indexes and empty shards.
    pub fn decode(b: &[u8]) -> Result<DirIndex> {
        let mut r = Reader::new(b, b'I')?;
        let n = r.count(36)?;
        if n == 0 {
            return Err(bad("empty directory index"));
        }
        let mut shards = Vec::with_capacity(n);
        for _ in 0..n {
            let count = r.u32()?;
            if count == 0 {
                return Err(bad("empty shard"));
            }
            shards.push((count, NodeId(r.id()?)));
        }
        r.end()?;
        Ok(DirIndex { shards })
    }

    /// Total number of entries.
    pub fn len(&self) -> u64 {
        self.shards.iter().map(|(n, _)| *n as u64).sum()
    }

    /// Whether the index lists no entries (never true for a decoded index).
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }
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

impl BlockMap {
    /// Canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(18 + self.leaves.len() * 40);
        header(&mut out, b'M');
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&(self.leaves.len() as u32).to_le_bytes());
        for (k, id) in &self.leaves {
            out.extend_from_slice(&k.to_le_bytes());
            out.extend_from_slice(&id.0);
        }
        out
    }

    /// Decode; rejects unsorted leaves and leaves past the end of the file.
    pub fn decode(b: &[u8]) -> Result<BlockMap> {
        let mut r = Reader::new(b, b'M')?;
        let size = r.u64()?;
        let n = r.count(40)?;
        let mut leaves: Vec<(u64, NodeId)> = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.u64()?;
            if leaves.last().is_some_and(|(p, _)| *p >= k) {
                return Err(bad("leaves not sorted"));
            }
            if k.saturating_mul(MAP_MIN_SIZE) >= size {
                return Err(bad("leaf past end of file"));
            }
            leaves.push((k, NodeId(r.id()?)));
        }
        r.end()?;
        Ok(BlockMap { size, leaves })
    }
}

impl BlockLeaf {
    /// Canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + self.blocks.len() * 40);
        header(&mut out, b'B');
        out.extend_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        for (i, c) in &self.blocks {
            out.extend_from_slice(&i.to_le_bytes());
            out.extend_from_slice(&c.0);
        }
        out
    }

    /// Decode a leaf expected at leaf number `leaf` of a file of `size` bytes;
    /// rejects empty leaves, unsorted blocks and blocks outside the leaf or the file.
    pub fn decode(b: &[u8], leaf: u64, size: u64) -> Result<BlockLeaf> {
        Self::decode_at(b, Some(leaf), size)
    }

    /// Decode a leaf found without its index (gc, fsck of live ids): the leaf number
    /// is that of its first block.
    pub fn decode_unplaced(b: &[u8]) -> Result<BlockLeaf> {
        Self::decode_at(b, None, u64::MAX)
    }

    fn decode_at(b: &[u8], mut leaf: Option<u64>, size: u64) -> Result<BlockLeaf> {
        let mut r = Reader::new(b, b'B')?;
        let n = r.count(40)?;
        if n == 0 || n as u64 > LEAF_BLOCKS {
            return Err(bad("bad block leaf count"));
        }
        let mut blocks: Vec<(u64, ChunkId)> = Vec::with_capacity(n);
        for _ in 0..n {
            let i = r.u64()?;
            if blocks.last().is_some_and(|(p, _)| *p >= i) {
                return Err(bad("blocks not sorted"));
            }
            if *leaf.get_or_insert(leaf_of(i)) != leaf_of(i) || i.saturating_mul(BLOCK_SIZE) >= size
            {
                return Err(bad("block outside its leaf"));
            }
            blocks.push((i, ChunkId(r.id()?)));
        }
        r.end()?;
        Ok(BlockLeaf { blocks })
    }

    /// Split a sorted block list into leaves: (leaf number, leaf), in order.
    pub fn split(blocks: &[(u64, ChunkId)]) -> Vec<(u64, BlockLeaf)> {
        let mut out: Vec<(u64, BlockLeaf)> = Vec::new();
        for &(i, c) in blocks {
            match out.last_mut() {
                Some((k, l)) if *k == leaf_of(i) => l.blocks.push((i, c)),
                _ => out.push((
                    leaf_of(i),
                    BlockLeaf {
                        blocks: vec![(i, c)],
                    },
                )),
            }
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(ino: u64, kind: Kind) -> Record {
        Record {
            kind,
            ino,
            attr: Attr {
                perm: 0o644,
                uid: 1,
                gid: 2,
                size: 10,
                blocks: 8,
                nlink: 1,
                rdev: 0,
                atime: Timespec { sec: -5, nsec: 7 },
                mtime: Timespec { sec: 1, nsec: 2 },
                ctime: Timespec::now(),
            },
            xattrs: vec![(b"user.a".to_vec(), b"v".to_vec())],
            content: Content::Node(NodeId::of(b"x")),
        }
    }

    #[test]
    fn dir_round_trip() {
        let d = DirNode {
            entries: vec![
                (b"a".to_vec(), Entry::Inline(rec(5, Kind::File))),
                (
                    b"b".to_vec(),
                    Entry::HardLink {
                        ino: 9,
                        kind: Kind::File,
                    },
                ),
            ],
        };
        assert_eq!(DirNode::decode(&d.encode()).unwrap(), d);
    }

    #[test]
    fn root_round_trip() {
        let mut r = rec(1, Kind::Dir);
        r.content = Content::None;
        let root = RootNode {
            root: r,
            links: vec![rec(3, Kind::File), rec(4, Kind::Symlink)],
            next_ino: 100,
        };
        assert_eq!(RootNode::decode(&root.encode()).unwrap(), root);
    }

    /// The 'F' encoding is unchanged by block maps: a file node as written before
    /// them (bytes spelled out here) still decodes, large or small.
    #[test]
    fn old_file_nodes_still_decode() {
        let mut old = b"TFND\x01F\x01".to_vec();
        let size: u64 = 10 << 30;
        old.extend_from_slice(&size.to_le_bytes());
        old.extend_from_slice(&2u32.to_le_bytes());
        for i in [7u64, 100_000] {
            old.extend_from_slice(&i.to_le_bytes());
            old.extend_from_slice(&ChunkId::of(&i.to_le_bytes()).0);
        }
        let want = FileNode::Blocks {
            size,
            blocks: vec![
                (7, ChunkId::of(&7u64.to_le_bytes())),
                (100_000, ChunkId::of(&100_000u64.to_le_bytes())),
            ],
        };
        assert_eq!(FileNode::decode(&old).unwrap(), want);
        assert_eq!(want.encode(), old);
        let inline = b"TFND\x01F\x00\x02\x00\x00\x00hi".to_vec();
        assert_eq!(
            FileNode::decode(&inline).unwrap(),
            FileNode::Inline(b"hi".to_vec())
        );
        // Unsorted or misplaced leaves are refused.
        let m = BlockMap {
            size: 3 * MAP_MIN_SIZE,
            leaves: vec![(1, NodeId::of(b"a")), (0, NodeId::of(b"b"))],
        };
        assert!(BlockMap::decode(&m.encode()).is_err());
        let m = BlockMap {
            size: 3 * MAP_MIN_SIZE,
            leaves: vec![(3, NodeId::of(b"a"))],
        };
        assert!(BlockMap::decode(&m.encode()).is_err());
        assert!(BlockLeaf::decode(&BlockLeaf::default().encode(), 0, u64::MAX).is_err());
    }

    #[test]
    fn unsorted_dir_is_rejected() {
        let d = DirNode {
            entries: vec![
                (b"b".to_vec(), Entry::Inline(rec(5, Kind::File))),
                (b"a".to_vec(), Entry::Inline(rec(6, Kind::File))),
            ],
        };
        assert!(DirNode::decode(&d.encode()).is_err());
    }

    #[test]
    fn index_round_trip() {
        let i = DirIndex {
            shards: vec![(3, NodeId::of(b"a")), (70, NodeId::of(b"b"))],
        };
        assert_eq!(DirIndex::decode(&i.encode()).unwrap(), i);
        assert_eq!(AnyDir::decode(&i.encode()).unwrap(), AnyDir::Index(i));
        let empty = DirIndex::default().encode();
        assert!(DirIndex::decode(&empty).is_err());
    }

    fn names(n: usize, salt: &str) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("{salt}{i:06}.rs").into_bytes())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn small_dirs_are_one_shard() {
        let v = names(SHARD_THRESHOLD, "f");
        assert_eq!(
            shard_ranges(v.iter().map(|n| n.as_slice())),
            vec![0..v.len()]
        );
        let empty = shard_ranges(std::iter::empty());
        assert_eq!((empty.len(), empty[0].len()), (1, 0));
    }

    proptest! {
        #[test]
        fn shards_cover_and_are_stable(n in 257usize..3000, ins in 0usize..3000, salt in "[a-z]{0,3}") {
            let v = names(n, &salt);
            let r = shard_ranges(v.iter().map(|n| n.as_slice()));
            // Contiguous, complete, within bounds.
            prop_assert_eq!(r[0].start, 0);
            prop_assert_eq!(r.last().unwrap().end, n);
            for w in r.windows(2) { prop_assert_eq!(w[0].end, w[1].start); }
            for x in &r { prop_assert!(!x.is_empty() && x.len() <= SHARD_MAX); }
            // Inserting one name changes at most two shards' memberships.
            let mut v2 = v.clone();
            let extra = format!("{salt}{:06}x", ins % n).into_bytes();
            let pos = v2.binary_search(&extra).unwrap_err();
            v2.insert(pos, extra);
            let r2 = shard_ranges(v2.iter().map(|n| n.as_slice()));
            let sets = |v: &Vec<Vec<u8>>, r: &Vec<std::ops::Range<usize>>| -> std::collections::HashSet<Vec<Vec<u8>>> {
                r.iter().map(|x| v[x.clone()].to_vec()).collect()
            };
            let (a, b) = (sets(&v, &r), sets(&v2, &r2));
            prop_assert!(a.difference(&b).count() <= 2, "{} shards changed", a.difference(&b).count());
        }

        #[test]
        fn file_round_trip(size in 1u64..1<<40, idx in proptest::collection::btree_set(0u64..1000, 0..20)) {
            let blocks: Vec<(u64, ChunkId)> = idx.into_iter()
                .filter(|i| i * BLOCK_SIZE < size)
                .map(|i| (i, ChunkId::of(&i.to_le_bytes()))).collect();
            let f = FileNode::Blocks { size, blocks };
            prop_assert_eq!(FileNode::decode(&f.encode()).unwrap(), f);
        }

        /// Block maps and leaves round-trip; a leaf decodes only at its own leaf
        /// number and within the file.
        #[test]
        fn block_map_round_trip(
            size in (MAP_MIN_SIZE + 1)..(1u64 << 44),
            ks in proptest::collection::btree_set(0u64..100_000, 0..40),
            offs in proptest::collection::btree_set(0u64..LEAF_BLOCKS, 1..20),
        ) {
            let leaves: Vec<(u64, NodeId)> = ks.iter().copied()
                .filter(|k| k * MAP_MIN_SIZE < size)
                .map(|k| (k, NodeId::of(&k.to_le_bytes()))).collect();
            let m = BlockMap { size, leaves };
            prop_assert_eq!(BlockMap::decode(&m.encode()).unwrap(), m.clone());
            prop_assert_eq!(FileNode::decode(&m.encode()).unwrap(), FileNode::Map(m));
            let k = ks.iter().next().copied().unwrap_or(3);
            let leaf = BlockLeaf {
                blocks: offs.iter().map(|o| (k * LEAF_BLOCKS + o, ChunkId::of(&o.to_le_bytes()))).collect(),
            };
            let enc = leaf.encode();
            prop_assert_eq!(BlockLeaf::decode(&enc, k, u64::MAX).unwrap(), leaf.clone());
            prop_assert_eq!(BlockLeaf::decode_unplaced(&enc).unwrap(), leaf.clone());
            prop_assert!(BlockLeaf::decode(&enc, k + 1, u64::MAX).is_err());
            let last = leaf.blocks.last().unwrap().0;
            prop_assert!(BlockLeaf::decode(&enc, k, last * BLOCK_SIZE).is_err());
        }

        #[test]
        fn decoders_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..300), ty in 0usize..6) {
            if bytes.len() >= 6 {
                bytes[..4].copy_from_slice(NODE_MAGIC);
                bytes[4] = NODE_VERSION;
                bytes[5] = [b'D', b'F', b'R', b'I', b'M', b'B'][ty];
            }
            let _ = BlockMap::decode(&bytes);
            let _ = BlockLeaf::decode(&bytes, 0, u64::MAX);
            let _ = BlockLeaf::decode_unplaced(&bytes);
            let _ = AnyDir::decode(&bytes);
            let _ = DirIndex::decode(&bytes);
            let _ = DirNode::decode(&bytes);
            let _ = FileNode::decode(&bytes);
            let _ = RootNode::decode(&bytes);
        }
    }
}
