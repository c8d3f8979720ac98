//! Block maps: the file node of a file longer than [`MAP_MIN_SIZE`] ('M', an index of
//! leaves) and its leaves ('B', the blocks of one [`LEAF_BLOCKS`] span), with their
//! canonical encodings. Which leaf a block is in follows from its index alone, so
//! equal content gives equal ids.

use super::*;

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
