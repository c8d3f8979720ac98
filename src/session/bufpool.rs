//! A process-wide, bounded pool of block buffers (`Vec<u8>` of capacity
//! [`BLOCK_SIZE`]) for the write path.
//!
//! Why: a write that starts a block in memory used to allocate and zero a fresh
//! 64 KiB buffer, and the seal after every 32 MiB of writes freed them all and
//! trimmed the heap, so the next writes faulted every page in again: page faults
//! and the zeroing were ~20 % of the daemon's CPU in a 1 GiB sequential write
//! (perf, 2026-11-28). Sealed buffers now come back here and the next blocks reuse
//! them, already mapped and without zeroing.
//!
//! Invariants: the pool holds at most [`POOL_BUFFERS`] buffers (16 MiB), each of
//! capacity exactly `BLOCK_SIZE`; [`take`] always returns an empty buffer (len 0),
//! so no byte of an earlier file is ever visible through a reused buffer (writers
//! fill it by `extend`/`resize`, which initialise every byte they expose).

use std::sync::LazyLock;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::tree::BLOCK_SIZE;

/// How many buffers the pool keeps at most (16 MiB of 64 KiB blocks).
pub(crate) const POOL_BUFFERS: usize = 256;

/// Both ends of the pool's bounded channel.
type Pool = (Sender<Vec<u8>>, Receiver<Vec<u8>>);

static POOL: LazyLock<Pool> = LazyLock::new(|| bounded(POOL_BUFFERS));

/// An empty buffer with room for one block: a pooled one when there is one.
pub(crate) fn take() -> Vec<u8> {
    match POOL.1.try_recv() {
        Ok(v) => v,
        Err(_) => Vec::with_capacity(BLOCK_SIZE as usize),
    }
}

/// Give a buffer back (dropped instead when it is not block-sized or the pool is
/// full).
pub(crate) fn give(mut v: Vec<u8>) {
    if v.capacity() == BLOCK_SIZE as usize {
        v.clear();
        let _ = POOL.0.try_send(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_and_the_pool_is_bounded() {
        let mut v = take();
        assert_eq!(v.len(), 0);
        assert!(v.capacity() >= BLOCK_SIZE as usize);
        v.extend_from_slice(&[7u8; 100]);
        give(v);
        // Whatever comes out (this buffer or another test's), it is empty.
        for _ in 0..4 {
            let w = take();
            assert!(w.is_empty());
        }
        // Far more than the bound: the pool never holds more than POOL_BUFFERS.
        for _ in 0..POOL_BUFFERS * 2 {
            give(Vec::with_capacity(BLOCK_SIZE as usize));
        }
        assert!(POOL.1.len() <= POOL_BUFFERS);
        // A buffer of another size is not kept.
        let before = POOL.1.len();
        give(Vec::with_capacity(10));
        assert!(POOL.1.len() <= before.max(POOL_BUFFERS));
    }
}
