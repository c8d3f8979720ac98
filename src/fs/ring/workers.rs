//! The worker pool of one ring mount: the requests that may take long (writes,
//! fsync, flush, release, fallocate, truncation; see `dispatch::slow`) are served
//! here, so a ring thread never waits behind hashing, packing or a flush while
//! other requests queue on its CPU.
//!
//! Invariants: a [`Job`] carries its entry's buffers (boxes, so the addresses the
//! kernel holds stay put) and goes back to the queue that sent it, followed by a
//! wake of that queue's eventfd; only the queue's thread then commits the reply
//! (the ring has one SQ producer). Workers end when every sender of jobs is gone
//! (the queues ended and the mount dropped its handle).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use super::{Serve, Slot};

/// An eventfd a ring thread polls in its ring; workers write it after handing an
/// entry back.
pub(crate) struct Wake(OwnedFd);

impl Wake {
    pub(crate) fn new() -> std::io::Result<Wake> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new fd we
        // own from here on.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(Wake(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Wake the ring thread.
    pub(crate) fn wake(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. A full counter
        // (EAGAIN) already means "awake".
        unsafe { libc::write(self.fd(), (&one as *const u64).cast(), 8) };
    }

    /// Reset the counter (after the poll fired).
    pub(crate) fn drain(&self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64; non-blocking.
        unsafe { libc::read(self.fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

/// One slow request, with its entry.
pub(crate) struct Job {
    /// The entry's index in its queue.
    pub(crate) idx: usize,
    pub(crate) slot: Slot,
    /// Where the answered entry goes back.
    pub(crate) back: Sender<(usize, Slot)>,
    pub(crate) wake: Arc<Wake>,
}

/// The workers of one mount.
pub(crate) struct Pool {
    tx: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Start `n` workers serving through `serve`.
    pub(crate) fn new<S: Serve>(n: usize, serve: Arc<S>) -> std::io::Result<Pool> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (rx, serve) = (rx.clone(), serve.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("tf-ring-work{i}"))
                    .spawn(move || work(rx, &*serve))?,
            );
        }
        Ok(Pool {
            tx: Some(tx),
            threads,
        })
    }

    /// A sender for the queues.
    pub(crate) fn sender(&self) -> Sender<Job> {
        self.tx.clone().expect("pool is open")
    }

    /// Stop taking jobs; the workers end once the queues dropped their senders.
    pub(crate) fn close(&mut self) {
        self.tx = None;
    }

    /// The workers' threads (to join).
    pub(crate) fn take_threads(&mut self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut self.threads)
    }
}

fn work<S: Serve>(rx: Receiver<Job>, serve: &S) {
    for mut job in rx {
        serve.serve(&mut job.slot.header, &mut job.slot.payload);
        // The queue is gone only on a forced stop; the entry is ours then.
        if job.back.send((job.idx, job.slot)).is_ok() {
            job.wake.wake();
        }
    }
}
