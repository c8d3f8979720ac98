//! The ring queues of one mount: per possible CPU one io_uring with 128-byte SQEs,
//! its entries (a header area and a payload buffer each) and the thread that serves
//! them, pinned to that CPU.
//!
//! Life of a queue: its thread is spawned *before* INIT is answered, creates its
//! ring and allocates its buffers, and reports [`Prepared`]; INIT offers
//! FUSE_OVER_IO_URING only when every queue did. Once INIT is answered (fuser's
//! `Session::from_fd` returned) the thread is told to go: it REGISTERs every entry
//! (EAGAIN, the kernel not initialized yet, is retried briefly) and reports the
//! outcome, then loops: wait for completions, serve each request (or hand it to the
//! worker pool, see `workers.rs`), COMMIT_AND_FETCH the reply.
//!
//! Invariants:
//! - Only the queue's thread touches its ring (one SQ producer; the ring is created
//!   SINGLE_ISSUER | DEFER_TASKRUN, so the kernel copies requests into our buffers
//!   only inside this thread's `io_uring_enter`). Workers hand entries back through
//!   a channel and wake the thread through an eventfd it polls in the same ring.
//! - An entry's buffers never move (boxed; a worker gets the boxes, not copies) and
//!   are freed only once the kernel let go of the entry (its command completed with
//!   an error: ENOTCONN at teardown) — on a forced stop they are leaked instead.
//! - The thread ends when every entry is dead (the connection ended) or on a forced
//!   stop; it never blocks unmount (the kernel completes its entries itself).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use zerocopy::IntoBytes;

use super::abi;
use super::parse::ent_in_out;
use super::workers::{Job, Wake};
use super::{Serve, Slot};

/// What a queue's thread reports to the mount that spawned it.
pub(crate) enum Report {
    /// Its ring and buffers exist (or why not).
    Prepared(u16, Result<(), String>),
    /// Its entries are registered (how many) or why none could be.
    Registered(u16, Result<usize, i32>),
}

/// user_data of the eventfd poll; entries use their index.
const WAKE: u64 = u64::MAX;
/// How long REGISTER is retried while the kernel answers EAGAIN.
const REGISTER_RETRY: Duration = Duration::from_secs(2);
/// How long after the last REGISTER a queue waits for an immediate failure.
const REGISTER_SETTLE: Duration = Duration::from_millis(20);

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Registered or committed: the kernel owns it.
    Kernel,
    /// Its request runs on a worker.
    Worker,
    /// Its command failed: the kernel let go of it.
    Dead,
}

/// A queue being served (lives on its thread).
pub(crate) struct Queue<S: Serve> {
    qid: u16,
    /// The mount's /dev/fuse connection (set by [`Queue::run`]).
    dev: Option<Arc<OwnedFd>>,
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    slots: Vec<Option<Slot>>,
    state: Vec<State>,
    /// The commit id of the request each entry holds.
    commit: Vec<u64>,
    /// The iovecs REGISTER points at, kept for the entries' life (the vector never
    /// grows after [`Queue::new`], so they never move).
    iovs: Vec<[libc::iovec; 2]>,
    serve: Arc<S>,
    jobs: Sender<Job>,
    back_tx: Sender<(usize, Slot)>,
    back_rx: Receiver<(usize, Slot)>,
    wake: Arc<Wake>,
    stop: Arc<AtomicBool>,
    poll_armed: bool,
}

/// The parameters every queue of a mount shares.
pub(crate) struct Shared<S: Serve> {
    pub(crate) serve: Arc<S>,
    pub(crate) jobs: Sender<Job>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) entries: usize,
    pub(crate) payload: usize,
}

impl<S: Serve> Queue<S> {
    /// Create queue `qid`'s ring and buffers (on its own thread).
    pub(crate) fn new(qid: u16, sh: &Shared<S>, wake: Arc<Wake>) -> std::io::Result<Self> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(((sh.entries + 2) as u32).next_power_of_two())?;
        let mut slots = Vec::with_capacity(sh.entries);
        let mut iovs = Vec::with_capacity(sh.entries);
        for _ in 0..sh.entries {
            let mut s = Slot {
                header: Box::new([0u8; abi::REQ_HEADER_SZ]),
                payload: vec![0u8; sh.payload].into_boxed_slice(),
            };
            iovs.push([
                libc::iovec {
                    iov_base: s.header.as_mut_ptr().cast(),
                    iov_len: s.header.len(),
                },
                libc::iovec {
                    iov_base: s.payload.as_mut_ptr().cast(),
                    iov_len: s.payload.len(),
                },
            ]);
            slots.push(Some(s));
        }
        let (back_tx, back_rx) = crossbeam_channel::unbounded();
        Ok(Queue {
            qid,
            dev: None,
            ring,
            state: vec![State::Kernel; sh.entries],
            commit: vec![0; sh.entries],
            slots,
            iovs,
            serve: sh.serve.clone(),
            jobs: sh.jobs.clone(),
            back_tx,
            back_rx,
            wake,
            stop: sh.stop.clone(),
            poll_armed: false,
        })
    }

    /// A REGISTER (`cmd_op` 1) or COMMIT_AND_FETCH (2) of entry `idx`.
    fn cmd(&self, cmd_op: u32, idx: usize) -> squeue::Entry128 {
        let req = abi::UringCmdReq {
            commit_id: self.commit[idx],
            qid: self.qid,
            ..Default::default()
        };
        let mut area = [0u8; 80];
        area[..size_of::<abi::UringCmdReq>()].copy_from_slice(req.as_bytes());
        let fd = self.dev.as_ref().map_or(-1, |d| d.as_raw_fd());
        let mut e = opcode::UringCmd80::new(types::Fd(fd), cmd_op)
            .cmd(area)
            .addr(Some(self.iovs[idx].as_ptr() as u64))
            .build()
            .user_data(idx as u64);
        // sqe->len = 2 (the iovec count); UringCmd80 has no setter for it.
        // SAFETY: Entry128 is #[repr(C)] with the kernel's struct io_uring_sqe at
        // offset 0, whose `len` is the u32 at byte 24; the write is within `e`.
        unsafe {
            let p = (&mut e as *mut squeue::Entry128).cast::<u8>();
            p.add(24).cast::<u32>().write_unaligned(2);
        }
        e
    }

    /// Queue one SQE, submitting first if the SQ is full.
    fn push(&mut self, e: &squeue::Entry128) {
        loop {
            // SAFETY: every buffer an SQE points at (iovecs, and through them the
            // entry's areas) lives in `self` until the entry is dead.
            if unsafe { self.ring.submission().push(e) }.is_ok() {
                return;
            }
            if let Err(err) = self.ring.submit() {
                log::error!("ring queue {}: submit failed: {err}", self.qid);
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    fn arm_wake(&mut self) {
        if !self.poll_armed {
            let e = opcode::PollAdd::new(types::Fd(self.wake.fd()), libc::POLLIN as u32)
                .build()
                .user_data(WAKE);
            self.push(&e.into());
            self.poll_armed = true;
        }
    }

    fn live(&self) -> usize {
        self.state.iter().filter(|s| **s != State::Dead).count()
    }

    /// Register every entry and report how that went, then serve until the
    /// connection ends (every entry dead) or a forced stop.
    pub(crate) fn run(mut self, dev: Arc<OwnedFd>, report: &Sender<Report>) {
        self.dev = Some(dev);
        for idx in 0..self.slots.len() {
            let e = self.cmd(abi::CMD_REGISTER, idx);
            self.push(&e);
        }
        self.arm_wake();
        let started = Instant::now();
        let mut settle = Some(Instant::now());
        let mut first_err = None;
        let mut cqes = Vec::new();
        loop {
            if self.stop.load(Ordering::Acquire) {
                return self.forced();
            }
            if self.live() == 0 {
                break;
            }
            let waited = match settle {
                Some(_) => {
                    let ts = types::Timespec::from(REGISTER_SETTLE);
                    let args = types::SubmitArgs::new().timespec(&ts);
                    self.ring.submitter().submit_with_args(1, &args)
                }
                None => self.ring.submit_and_wait(1),
            };
            match waited {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => {
                    log::error!("ring queue {}: wait failed: {e}", self.qid);
                    return self.forced();
                }
            }
            cqes.clear();
            cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
            for &(ud, res) in &cqes {
                if ud == WAKE {
                    self.poll_armed = false;
                    self.wake.drain();
                } else if res < 0 {
                    let retry = self.failed(ud as usize, -res, started);
                    if retry {
                        settle = settle.map(|_| Instant::now());
                    } else if settle.is_some() {
                        first_err.get_or_insert(-res);
                    }
                } else {
                    self.request(ud as usize);
                }
            }
            while let Ok((idx, slot)) = self.back_rx.try_recv() {
                self.slots[idx] = Some(slot);
                self.state[idx] = State::Kernel;
                let e = self.cmd(abi::CMD_COMMIT_AND_FETCH, idx);
                self.push(&e);
            }
            self.arm_wake();
            if let Some(t) = settle
                && t.elapsed() >= REGISTER_SETTLE
            {
                settle = None;
                let live = self.live();
                let r = match (live, first_err) {
                    (0, Some(e)) => Err(e),
                    (0, None) => Err(libc::ENOTCONN),
                    (n, _) => Ok(n),
                };
                let _ = report.send(Report::Registered(self.qid, r));
            }
        }
        if settle.is_some() {
            let _ = report.send(Report::Registered(
                self.qid,
                Err(first_err.unwrap_or(libc::ENOTCONN)),
            ));
        }
        log::debug!("ring queue {}: connection ended", self.qid);
    }

    /// Entry `idx`'s command failed with `errno`. Returns whether it was retried.
    fn failed(&mut self, idx: usize, errno: i32, started: Instant) -> bool {
        let Some(state) = self.state.get(idx).copied() else {
            log::error!("ring queue {}: completion of unknown entry {idx}", self.qid);
            return false;
        };
        if state == State::Dead {
            return false;
        }
        match errno {
            // The kernel is not initialized yet: REGISTER again shortly.
            libc::EAGAIN if started.elapsed() < REGISTER_RETRY => {
                std::thread::sleep(Duration::from_millis(1));
                let e = self.cmd(abi::CMD_REGISTER, idx);
                self.push(&e);
                return true;
            }
            // Teardown: the connection ended or was aborted, or our task is dying.
            libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED | libc::ENODEV => {}
            _ => log::error!(
                "ring queue {}: entry {idx} failed: {}; the queue serves on with one entry less",
                self.qid,
                std::io::Error::from_raw_os_error(errno)
            ),
        }
        self.state[idx] = State::Dead;
        false
    }

    /// Entry `idx` holds a request: serve it here or on a worker.
    fn request(&mut self, idx: usize) {
        let Some(mut slot) = self.slots.get_mut(idx).and_then(Option::take) else {
            log::error!(
                "ring queue {}: request in entry {idx} it does not hold",
                self.qid
            );
            return;
        };
        self.commit[idx] = ent_in_out(&slot.header).commit_id;
        if self.serve.slow(&slot.header, &slot.payload) {
            self.state[idx] = State::Worker;
            let job = Job {
                idx,
                slot,
                back: self.back_tx.clone(),
                wake: self.wake.clone(),
            };
            match self.jobs.send(job) {
                Ok(()) => return,
                // No pool (shutting down): serve it here.
                Err(e) => slot = e.into_inner().slot,
            }
        }
        self.serve.serve(&mut slot.header, &mut slot.payload);
        self.slots[idx] = Some(slot);
        self.state[idx] = State::Kernel;
        let e = self.cmd(abi::CMD_COMMIT_AND_FETCH, idx);
        self.push(&e);
    }

    /// A forced stop: close the ring first (the kernel cancels its commands), then
    /// leak the buffers of entries it may still name rather than free them.
    fn forced(self) {
        let Queue {
            qid,
            ring,
            slots,
            state,
            iovs,
            ..
        } = self;
        drop(ring);
        let mut leaked = 0;
        for (slot, st) in slots.into_iter().zip(state) {
            if st != State::Dead
                && let Some(s) = slot
            {
                std::mem::forget(s);
                leaked += 1;
            }
        }
        std::mem::forget(iovs);
        log::warn!(
            "ring queue {qid}: stopped while the connection lived ({leaked} entries' buffers left to the kernel)"
        );
    }
}
