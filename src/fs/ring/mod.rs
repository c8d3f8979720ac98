//! FUSE over io_uring: the transport that serves a mount's requests on rings, one
//! per possible CPU, instead of reads and writes of /dev/fuse.
//!
//! Owns: whether the kernel lets a mount use the ring ([`available`]); the kernel
//! ABI of the ring (`abi.rs`), parsing an entry's request (`parse.rs`), encoding
//! its reply (`encode.rs`), the queues and their threads (`queue.rs`), the mount's
//! whole transport (`rings.rs`), the pool of workers that answers slow requests off
//! the ring threads (`workers.rs`) and the translation of a parsed request into a
//! core call (`dispatch.rs`). The transport's names ([`Transport`], [`InUse`], [`RingUnavailable`]) are the leaf
//! [`crate::transport`]'s, re-exported here.
//!
//! Names no fuser type: INIT, FORGET, INTERRUPT and notifications stay on
//! /dev/fuse, served by the shared pool (`fs::devpool`), which also serves every
//! /dev/fuse request through this module's dispatcher. Never changes a kernel setting: whether the ring
//! may be used is root's choice through [`ENABLE_URING`]. See docs/design.md, "FUSE
//! over io_uring".

pub(crate) mod abi;
pub(crate) mod dispatch;
pub(crate) mod encode;
pub(crate) mod parse;
pub(crate) mod queue;
pub(crate) mod rings;
pub(crate) mod workers;

/// The transport's names, owned by the leaf [`crate::transport`] (so the layers
/// below `fs` can name them); re-exported so `fs::ring::*` paths keep working.
pub use crate::transport::{ENABLE_URING, InUse, RingUnavailable, Transport};
pub(crate) use rings::{MAX_WRITE, Preparing, Rings, prepare};

/// What serves a queue's requests (the dispatcher, or a test's fake).
pub(crate) trait Serve: Send + Sync + 'static {
    /// Whether the request in the entry may take long (it then runs on a worker,
    /// so the ring thread keeps serving).
    fn slow(&self, header: &parse::HeaderArea, payload: &[u8]) -> bool;
    /// Answer the request in the entry, writing the reply in place.
    fn serve(&self, header: &mut parse::HeaderArea, payload: &mut [u8]);
}

/// One entry's buffers, as registered with the kernel.
pub(crate) struct Slot {
    pub(crate) header: Box<parse::HeaderArea>,
    pub(crate) payload: Box<[u8]>,
}

/// Whether the kernel lets a new mount use the ring (it reads [`ENABLE_URING`]).
pub fn available() -> Result<(), RingUnavailable> {
    match std::fs::read_to_string(ENABLE_URING) {
        Err(_) => Err(RingUnavailable::NoKernelSupport),
        Ok(v) if v.trim() == "Y" || v.trim() == "1" => Ok(()),
        Ok(_) => Err(RingUnavailable::Disabled),
    }
}

/// How many CPUs are possible (the kernel's queue count):
/// `/sys/devices/system/cpu/possible`, e.g. `0-1` or `0,2-3`.
pub(crate) fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| count_cpu_list(&s))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The number of CPUs in a kernel CPU list (`0-3,8,10-11`).
fn count_cpu_list(s: &str) -> Option<usize> {
    let mut n = 0;
    for part in s.trim().split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0,2-3"), Some(3));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn memory_is_bounded() {
        use rings::{MAX_ENTRIES, MEMORY_BOUND, PAYLOAD, entries_per_queue};
        assert_eq!(entries_per_queue(2), MAX_ENTRIES);
        for q in [1, 2, 4, 8, 16, 64] {
            let e = entries_per_queue(q);
            assert!((1..=MAX_ENTRIES).contains(&e));
            assert!(e == 1 || e * q * PAYLOAD <= MEMORY_BOUND, "{q} queues");
        }
    }
}
