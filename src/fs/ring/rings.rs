//! The ring transport of one mount as a whole: its queues' threads, the worker
//! pool, and the two-step start around INIT ([`prepare`] before it is answered,
//! [`Preparing::start`] after), then a bounded teardown ([`Rings::join_bounded`]).
//!
//! Sizing: one queue per possible CPU (the kernel makes as many and routes a
//! request to the queue of the CPU it was issued on; it uses the ring only once
//! every queue has an entry). Each entry's payload buffer holds the largest request
//! ([`PAYLOAD`]); entries per queue are as many as fit [`MEMORY_BOUND`] over all
//! queues, between 1 and [`MAX_ENTRIES`]. Buffers are allocated zeroed, so pages
//! the kernel never writes cost no memory.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::Serve;
use super::queue::{Queue, Report, Shared};
use super::workers::{Pool, Wake};
use super::{RingUnavailable, possible_cpus};

/// The largest WRITE the mount accepts (INIT's max_write, which the /dev/fuse
/// adapter sets from it; also its max_pages).
pub(crate) const MAX_WRITE: usize = 1 << 20;
/// An entry's payload buffer: max_write and a page.
pub(crate) const PAYLOAD: usize = MAX_WRITE + 4096;
/// Entries per queue at most.
pub(crate) const MAX_ENTRIES: usize = 8;
/// Payload memory of all queues of a mount at most (unless one entry per queue
/// already passes it).
pub(crate) const MEMORY_BOUND: usize = 64 << 20;
/// Workers per mount (as many as fuser's /dev/fuse threads); the requests they
/// serve (writes, flushes) are the ones /dev/fuse ran four at a time.
/// `TREEFORK_RING_WORKERS` overrides it (a measurement knob).
const WORKERS: usize = 4;

fn workers() -> usize {
    std::env::var("TREEFORK_RING_WORKERS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(WORKERS)
}
/// How long the queues may take to prepare and to register.
const STEP_WAIT: Duration = Duration::from_secs(5);

/// Entries per queue for `queues` queues.
pub(crate) fn entries_per_queue(queues: usize) -> usize {
    (MEMORY_BOUND / (PAYLOAD * queues.max(1))).clamp(1, MAX_ENTRIES)
}

/// The queues' threads, spawned, before INIT.
pub(crate) struct Preparing {
    threads: Vec<JoinHandle<()>>,
    go: Vec<Sender<Option<Arc<OwnedFd>>>>,
    reports: Receiver<Report>,
    parts: Parts,
}

/// What a running transport keeps for its teardown.
struct Parts {
    stop: Arc<AtomicBool>,
    wakes: Vec<Arc<Wake>>,
    pool: Pool,
    queues: usize,
    entries: usize,
}

/// A running ring transport.
pub(crate) struct Rings {
    threads: Vec<JoinHandle<()>>,
    parts: Parts,
}

/// Spawn one thread per possible CPU, each creating its ring and buffers, and
/// wait until all did.
pub(crate) fn prepare<S: Serve>(serve: Arc<S>) -> Result<Preparing, RingUnavailable> {
    let queues = possible_cpus();
    let entries = entries_per_queue(queues);
    let pool =
        Pool::new(workers(), serve.clone()).map_err(|e| RingUnavailable::Setup(e.to_string()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (report_tx, reports) = crossbeam_channel::unbounded();
    let mut prep = Preparing {
        threads: Vec::new(),
        go: Vec::new(),
        reports,
        parts: Parts {
            stop: stop.clone(),
            wakes: Vec::new(),
            pool,
            queues,
            entries,
        },
    };
    for qid in 0..queues {
        let wake = match Wake::new() {
            Ok(w) => Arc::new(w),
            Err(e) => {
                prep.abandon();
                return Err(RingUnavailable::Setup(format!("eventfd: {e}")));
            }
        };
        let shared = Shared {
            serve: serve.clone(),
            jobs: prep.parts.pool.sender(),
            stop: stop.clone(),
            entries,
            payload: PAYLOAD,
        };
        let (go_tx, go_rx) = crossbeam_channel::bounded(1);
        let (report, w) = (report_tx.clone(), wake.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("tf-ring{qid}"))
            .spawn(move || queue_thread(qid as u16, shared, w, report, go_rx));
        match spawned {
            Ok(t) => {
                prep.threads.push(t);
                prep.go.push(go_tx);
                prep.parts.wakes.push(wake);
            }
            Err(e) => {
                prep.abandon();
                return Err(RingUnavailable::Setup(format!("thread: {e}")));
            }
        }
    }
    let deadline = Instant::now() + STEP_WAIT;
    for _ in 0..queues {
        match prep.reports.recv_deadline(deadline) {
            Ok(Report::Prepared(_, Ok(()))) => {}
            Ok(Report::Prepared(qid, Err(e))) => {
                prep.abandon();
                return Err(RingUnavailable::Setup(format!("queue {qid}: {e}")));
            }
            Ok(Report::Registered(..)) | Err(_) => {
                prep.abandon();
                return Err(RingUnavailable::Setup(
                    "queues did not prepare in time".into(),
                ));
            }
        }
    }
    Ok(prep)
}

/// The body of queue `qid`'s thread.
fn queue_thread<S: Serve>(
    qid: u16,
    shared: Shared<S>,
    wake: Arc<Wake>,
    report: Sender<Report>,
    go: Receiver<Option<Arc<OwnedFd>>>,
) {
    pin_to(qid as usize);
    let q = match Queue::new(qid, &shared, wake) {
        Ok(q) => {
            let _ = report.send(Report::Prepared(qid, Ok(())));
            q
        }
        Err(e) => {
            let _ = report.send(Report::Prepared(qid, Err(e.to_string())));
            return;
        }
    };
    drop(shared);
    // Nothing registered yet: on "no", dropping the queue frees what the kernel
    // never saw.
    if let Ok(Some(dev)) = go.recv() {
        q.run(dev, &report);
    }
}

/// Pin the calling thread to `cpu`; a CPU that is possible but offline (or not
/// ours to use) leaves it unpinned.
fn pin_to(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it (cpu is checked
    // against its capacity); sched_setaffinity reads it for the calling thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * size_of::<libc::cpu_set_t>() {
            return;
        }
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        log::debug!(
            "ring queue {cpu}: not pinned ({})",
            std::io::Error::last_os_error()
        );
    }
}

impl Preparing {
    /// INIT negotiated the ring: register every queue's entries with the mount's
    /// /dev/fuse connection `dev`. The error says the kernel refused them (it then
    /// serves the mount over /dev/fuse); the rings are returned either way, to be
    /// joined at the unmount.
    pub(crate) fn start(self, dev: OwnedFd) -> (Rings, Result<(), RingUnavailable>) {
        let Preparing {
            threads,
            go,
            reports,
            parts,
        } = self;
        let dev = Arc::new(dev);
        for g in &go {
            let _ = g.send(Some(dev.clone()));
        }
        let rings = Rings { threads, parts };
        let deadline = Instant::now() + STEP_WAIT;
        let mut r = Ok(());
        for _ in 0..rings.parts.queues {
            let failed = match reports.recv_deadline(deadline) {
                Ok(Report::Registered(_, Ok(_))) | Ok(Report::Prepared(..)) => continue,
                Ok(Report::Registered(qid, Err(errno))) => {
                    log::warn!(
                        "ring queue {qid}: REGISTER refused: {}",
                        std::io::Error::from_raw_os_error(errno)
                    );
                    RingUnavailable::Register(errno)
                }
                Err(_) => RingUnavailable::Register(libc::ETIMEDOUT),
            };
            if r.is_ok() {
                r = Err(failed);
            }
        }
        (rings, r)
    }

    /// INIT did not negotiate the ring (or the mount failed): end the threads.
    pub(crate) fn abandon(mut self) {
        for g in &self.go {
            let _ = g.send(None);
        }
        self.go.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.parts.pool.close();
        for t in self.parts.pool.take_threads() {
            let _ = t.join();
        }
    }
}

impl Rings {
    /// `queues × entries` for display.
    pub(crate) fn shape(&self) -> (usize, usize) {
        (self.parts.queues, self.parts.entries)
    }

    /// After the unmount: join the queue threads (they end as the kernel completes
    /// their entries) and the workers, waiting `wait` at most; past it, stop the
    /// queues by force (their buffers are leaked). Returns whether every thread
    /// was joined.
    pub(crate) fn join_bounded(self, name: &str, wait: Duration) -> bool {
        let Rings { threads, mut parts } = self;
        let t0 = Instant::now();
        while !threads.iter().all(|t| t.is_finished()) && t0.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(2));
        }
        if !threads.iter().all(|t| t.is_finished()) {
            log::error!(
                "session {name}: ring queues still running {wait:?} after the unmount; stopping them"
            );
            parts.stop.store(true, Ordering::Release);
            for w in &parts.wakes {
                w.wake();
            }
            let t1 = Instant::now();
            while !threads.iter().all(|t| t.is_finished()) && t1.elapsed() < Duration::from_secs(1)
            {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let mut all = true;
        for t in threads {
            if t.is_finished() {
                let _ = t.join();
            } else {
                all = false;
            }
        }
        parts.pool.close();
        let workers = parts.pool.take_threads();
        let t2 = Instant::now();
        while !workers.iter().all(|t| t.is_finished()) && t2.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(2));
        }
        for t in workers {
            if t.is_finished() {
                let _ = t.join();
            } else {
                all = false;
            }
        }
        if !all {
            log::error!("session {name}: ring threads left running after the unmount");
        }
        all
    }
}
