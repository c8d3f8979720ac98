//! The shared /dev/fuse server: one pool of worker threads, sized to the machine,
//! serves every mount's /dev/fuse connection (issue 42). A mount is data (a
//! [`Conn`] in the pool's table and its descriptor in one epoll set), not threads:
//! an idle mount costs a descriptor and a few hundred bytes.
//!
//! How a request is served: each descriptor is in the epoll set with
//! `EPOLLONESHOT`. A worker woken for a connection reads one request (the
//! descriptor is non-blocking), re-arms the descriptor so another worker can read
//! the next request of the same mount, and serves its request through the ring's
//! dispatcher (`wire.rs` lays the message out as a ring entry). FORGET and
//! BATCH_FORGET (no reply), INTERRUPT (ENOSYS, as fuser answered: the kernel then
//! stops sending them) and DESTROY are answered here.
//!
//! Fairness: a connection is re-armed only while fewer than `Pool::share` of its
//! requests are in flight; the rest of the pool stays free for the other mounts
//! (the completion of one of its requests re-arms it). Epoll hands ready
//! descriptors out in the order they became ready, so busy mounts take turns, and a
//! worker goes back to the set after [`STREAK`] requests of one mount.
//!
//! Memory: a WRITE that would wait for a seal (the daemon-wide budget spent, or
//! its session past its own marks) is served by one of at most half the base
//! workers; beyond them it is parked and its mount is not re-armed until a waiter
//! answers it (`park.rs`), so sessions that do not write keep their workers.
//!
//! Latency: after answering, a worker that finds nothing queued waits up to
//! [`SPIN`] for the connection's next request without sleeping (only while another
//! worker is idle in the set), since waking a sleeping worker on an idle vCPU cost
//! more than a whole request (see [`spin`]).
//!
//! Elastic: requests that block in the core (a write gate held by a checkout, an
//! fsync, a remote fetch) hold their workers. So that blocked mounts cannot stall
//! the others, the worker that leaves the set as its last idle one starts a spare
//! (up to [`SPARES`] beyond the base count); a spare that waits [`SPARE_IDLE`]
//! with nothing to do exits, unless it is the last idle worker. So there is a
//! worker waiting in the set whenever the thread bound allows, and the daemon's
//! threads stay within base + [`SPARES`].
//!
//! Invariants: a connection's state (`inflight`, `armed`, `ended`) changes only
//! under its lock, and it is armed at most once at a time; it ends once (ENODEV:
//! the kernel let go of the mount), and once its last request in flight is
//! answered the core's `destroy` runs (the final flush) and [`Served::is_finished`]
//! turns true, exactly once. A panic while serving is the dispatcher's to catch (it
//! answers EIO); a worker never dies with a request.

mod park;
pub(crate) mod wire;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::Duration;

use crate::fs::TreeforkFs;
use crate::fs::ring::Serve;
use crate::fs::ring::abi::{self, op};
use crate::fs::ring::dispatch::Dispatch;
use crate::fs::ring::parse::HeaderArea;
use zerocopy::FromBytes;

/// The pool's workers: `TREEFORK_FUSE_WORKERS`, else 4 per CPU, within 4..=64.
fn workers() -> usize {
    std::env::var("TREEFORK_FUSE_WORKERS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            (4 * cpus).clamp(4, 64)
        })
}

/// Requests one worker serves of one connection before it goes back to epoll.
const STREAK: usize = 32;

/// How long a worker that just answered a connection waits for its next request
/// without sleeping (see [`spin`]).
const SPIN: Duration = Duration::from_micros(50);

/// Workers the pool may start beyond its base count while every worker is busy.
pub(crate) const SPARES: usize = 16;

/// How long a spare worker waits for work before it exits.
const SPARE_IDLE: Duration = Duration::from_secs(10);

/// One mount's /dev/fuse connection.
struct Conn {
    name: String,
    fd: OwnedFd,
    core: Arc<TreeforkFs>,
    dispatch: Dispatch,
    state: Mutex<ConnState>,
    finished: Condvar,
}

#[derive(Default)]
struct ConnState {
    /// Requests read and not yet answered.
    inflight: usize,
    /// In the epoll set and armed (a worker will be woken for its next request).
    armed: bool,
    /// The kernel ended the connection (no more reads).
    ended: bool,
    /// A write of it is parked (`park.rs`): not re-armed until it is answered.
    parked: bool,
    /// The final `destroy` was started (by exactly one worker).
    finishing: bool,
    /// Ended, its last request answered and the core destroyed.
    finished: bool,
}

/// The server of every mount's /dev/fuse connection (one per process: [`pool`]).
pub(crate) struct Pool {
    ep: OwnedFd,
    conns: RwLock<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
    /// At most this many requests of one connection in flight.
    share: usize,
    /// Workers that never exit.
    base: usize,
    /// Live workers (base and spares).
    live: AtomicUsize,
    /// Workers waiting in the epoll set.
    idle: AtomicUsize,
    /// Spares started, ever (for names and the log).
    spares_started: AtomicU64,
    /// Spares that could not be started (the log says so now and then).
    spawn_failures: AtomicU64,
    /// Writes that would wait for memory: half the base workers at most.
    park: park::Park<Arc<Conn>>,
}

/// A served connection, held by the mount's table entry.
pub struct Served {
    conn: Arc<Conn>,
}

impl Served {
    /// Whether the kernel ended the connection and its last request was answered.
    pub fn is_finished(&self) -> bool {
        self.conn
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .finished
    }

    /// Wait up to `wait` for [`Served::is_finished`]; returns it.
    pub fn wait(&self, wait: Duration) -> bool {
        let s = self.conn.state.lock().unwrap_or_else(|p| p.into_inner());
        let (s, _) = self
            .conn
            .finished
            .wait_timeout_while(s, wait, |s| !s.finished)
            .unwrap_or_else(|p| p.into_inner());
        s.finished
    }
}

/// The process's pool, started (its workers spawned) on first use.
pub(crate) fn pool() -> io::Result<&'static Arc<Pool>> {
    static POOL: OnceLock<Arc<Pool>> = OnceLock::new();
    static START: Mutex<()> = Mutex::new(());
    if let Some(p) = POOL.get() {
        return Ok(p);
    }
    let _g = START.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = POOL.get() {
        return Ok(p);
    }
    let p = Pool::start(workers())?;
    Ok(POOL.get_or_init(|| p))
}

impl Pool {
    fn start(threads: usize) -> io::Result<Arc<Pool>> {
        // SAFETY: epoll_create1 has no memory arguments; the fd is checked.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let ep = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(ep) };
        let pool = Arc::new(Pool {
            ep,
            conns: RwLock::new(HashMap::new()),
            next: AtomicU64::new(1),
            share: (threads - threads / 4).max(1),
            base: threads,
            live: AtomicUsize::new(threads),
            idle: AtomicUsize::new(0),
            spares_started: AtomicU64::new(0),
            spawn_failures: AtomicU64::new(0),
            park: park::Park::new(threads / 2),
        });
        for i in 0..threads {
            let p = pool.clone();
            std::thread::Builder::new()
                .name(format!("fuse-{i}"))
                .spawn(move || p.work(false))?;
        }
        log::info!(
            "serving /dev/fuse with {threads} workers (at most {} per mount at once, up to {SPARES} spares while all are busy)",
            pool.share
        );
        Ok(pool)
    }

    /// The last idle worker just left the set: start a spare, within the bound.
    fn spare(self: &Arc<Self>) {
        let live = self.live.fetch_add(1, Ordering::AcqRel);
        if live >= self.base + SPARES {
            self.live.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let n = self.spares_started.fetch_add(1, Ordering::Relaxed);
        let p = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("fuse-spare-{n}"))
            .spawn(move || p.work(true));
        if let Err(e) = spawned {
            self.live.fetch_sub(1, Ordering::AcqRel);
            // Once per 1,024 failures (the thread limit is reached while it lasts).
            if self
                .spawn_failures
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(1024)
            {
                log::warn!("cannot start a spare /dev/fuse worker ({live} live): {e}");
            }
        } else {
            log::debug!(
                "every /dev/fuse worker is busy: spare {n} started ({} live)",
                live + 1
            );
        }
    }

    /// Serve the connection `fd` (INIT already answered) with `core`, as session
    /// `name` (for logs).
    pub(crate) fn serve(
        &self,
        name: &str,
        fd: OwnedFd,
        core: Arc<TreeforkFs>,
    ) -> io::Result<Served> {
        // The flag is the open file's: the connection's other descriptors (the
        // notifications' duplicate, the ring's) share it; nothing reads them.
        set_nonblocking(&fd)?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            name: name.to_string(),
            fd,
            dispatch: Dispatch::new(core.clone()),
            core,
            state: Mutex::new(ConnState {
                armed: true,
                ..Default::default()
            }),
            finished: Condvar::new(),
        });
        self.conns
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, conn.clone());
        if let Err(e) = self.ctl(libc::EPOLL_CTL_ADD, &conn, id) {
            self.conns
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            return Err(e);
        }
        Ok(Served { conn })
    }

    fn ctl(&self, what: libc::c_int, conn: &Conn, id: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
            u64: id,
        };
        // SAFETY: both descriptors are live; `ev` is a live epoll_event.
        let r = unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), what, conn.fd.as_raw_fd(), &mut ev) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether a connection in state `s` is to be armed again.
    fn may_arm(&self, s: &ConnState) -> bool {
        !s.ended && !s.armed && !s.parked && s.inflight < self.share
    }

    /// Arm `conn` again (under its lock, with `armed` false).
    fn arm(&self, conn: &Conn, id: u64, s: &mut ConnState) {
        match self.ctl(libc::EPOLL_CTL_MOD, conn, id) {
            Ok(()) => s.armed = true,
            // Unserved and never ending would hang its programs: end it (they
            // get ENOTCONN once the kernel's connection is aborted at unmount).
            Err(e) => {
                log::error!(
                    "session {}: cannot wait for the next /dev/fuse request: {e}; the mount is no longer served",
                    conn.name
                );
                s.ended = true;
            }
        }
    }

    /// A worker's life: wait in the set, serve a turn, again. A spare exits after
    /// [`SPARE_IDLE`] without work unless it is the last idle worker.
    fn work(self: Arc<Self>, spare: bool) {
        let mut buf = vec![0u8; wire::BUF];
        let mut header = Box::new([0u8; abi::REQ_HEADER_SZ]);
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }];
        let timeout = if spare {
            SPARE_IDLE.as_millis() as libc::c_int
        } else {
            -1
        };
        // Whether this worker is counted in `idle` (it stays counted across a
        // timeout or an EINTR, while it goes on waiting).
        let mut counted = false;
        loop {
            if !counted {
                self.idle.fetch_add(1, Ordering::AcqRel);
                counted = true;
            }
            // SAFETY: `ev` is a live array of one event.
            let n = unsafe { libc::epoll_wait(self.ep.as_raw_fd(), ev.as_mut_ptr(), 1, timeout) };
            if n == 0 && spare {
                // Leave only if another worker stays idle: `live` first, so a
                // worker that then leaves the set as the last idle one may start
                // a spare in this one's place.
                self.live.fetch_sub(1, Ordering::AcqRel);
                let left = self
                    .idle
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |k| {
                        (k >= 2).then(|| k - 1)
                    })
                    .is_ok();
                if left {
                    return;
                }
                self.live.fetch_add(1, Ordering::AcqRel);
                continue;
            }
            if n <= 0 {
                continue;
            }
            counted = false;
            if self.idle.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.spare();
            }
            let id = ev[0].u64;
            let conn = self
                .conns
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(&id)
                .cloned();
            if let Some(c) = conn {
                self.turn(&c, id, &mut buf, &mut header);
            }
        }
    }

    /// One wakeup for `conn`: read a request, re-arm, serve it; then read the next
    /// one straight away (no epoll round trip, no handoff to another worker) while
    /// there is one and the connection is under its share, up to [`STREAK`]
    /// requests, after which the worker goes back to the epoll set (other mounts'
    /// turn). Measured: without the direct reads, 8 threads doing LOOKUPs on one
    /// mount got 60,000/s against 108,000/s with fuser's 4 blocking readers.
    fn turn(&self, conn: &Arc<Conn>, id: u64, buf: &mut [u8], header: &mut HeaderArea) {
        let lock = || conn.state.lock().unwrap_or_else(|p| p.into_inner());
        {
            let mut s = lock();
            s.armed = false;
            // An event taken from the set just before `end` removed it.
            if s.ended {
                return;
            }
            // The slot of the read below (an event comes only under the share).
            s.inflight += 1;
        }
        for streak in 1..=STREAK {
            // SAFETY: `buf` is a live, writable buffer of its length.
            let n = unsafe { libc::read(conn.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                // Nothing queued: wait a moment for the connection's next request
                // without sleeping, while another worker waits in the set for the
                // other mounts (see `spin`).
                if e.raw_os_error() == Some(libc::EAGAIN)
                    && streak < STREAK
                    && self.idle.load(Ordering::Acquire) > 0
                    && spin(&conn.fd)
                {
                    // A request came: read it (the slot is still ours).
                    continue;
                }
                let mut s = lock();
                s.inflight -= 1;
                match e.raw_os_error() {
                    // None pending (another worker took it), or it was interrupted
                    // before it was read.
                    Some(libc::EAGAIN | libc::EINTR | libc::ENOENT) => {
                        if self.may_arm(&s) {
                            self.arm(conn, id, &mut s);
                        }
                        if s.ended && s.inflight == 0 && !s.finishing {
                            s.finishing = true;
                            drop(s);
                            self.finish(conn, id);
                        }
                    }
                    errno => {
                        drop(s);
                        if errno != Some(libc::ENODEV) {
                            log::error!(
                                "session {}: reading /dev/fuse: {e}; the mount is no longer served",
                                conn.name
                            );
                        }
                        self.end(conn, id)
                    }
                }
                return;
            }
            let n = n as usize;
            let waits = wire::in_header(&buf[..n]).is_some_and(|h| h.opcode == op::WRITE)
                && conn.core.write_would_wait();
            {
                let mut s = lock();
                if waits {
                    // Marked before a waiter can take it (it clears the mark
                    // under this lock once it has answered).
                    s.parked = true;
                    if !self.park.enter_or_park(conn, id, &buf[..n]) {
                        // Parked: its slot stays in flight; a waiter answers it.
                        return;
                    }
                    s.parked = false;
                }
                if self.may_arm(&s) {
                    self.arm(conn, id, &mut s);
                }
            }
            self.serve_one(conn, id, buf, n, header);
            if waits {
                // A waiter: answer the parked writes too, then back to the set.
                self.answered(conn, id, false);
                while let Some(mut p) = self.park.next() {
                    self.serve_one(&p.conn, p.id, &mut p.msg, p.n, header);
                    self.answered(&p.conn, p.id, true);
                }
                return;
            }
            let mut s = lock();
            s.inflight -= 1;
            if s.ended {
                if s.inflight == 0 && !s.finishing {
                    s.finishing = true;
                    drop(s);
                    self.finish(conn, id);
                }
                return;
            }
            if streak == STREAK || s.inflight >= self.share {
                // At the share, a request in flight re-arms it when it is done.
                if self.may_arm(&s) {
                    self.arm(conn, id, &mut s);
                }
                if s.ended && s.inflight == 0 && !s.finishing {
                    s.finishing = true;
                    drop(s);
                    self.finish(conn, id);
                }
                return;
            }
            // The slot of the next direct read.
            s.inflight += 1;
        }
    }

    /// One request of `conn` was answered outside a streak (a parked one when
    /// `unparked`): its slot is free; re-arm, or finish an ended connection.
    fn answered(&self, conn: &Conn, id: u64, unparked: bool) {
        let mut s = conn.state.lock().unwrap_or_else(|p| p.into_inner());
        s.inflight -= 1;
        if unparked {
            s.parked = false;
        }
        if self.may_arm(&s) {
            self.arm(conn, id, &mut s);
        }
        if s.ended && s.inflight == 0 && !s.finishing {
            s.finishing = true;
            drop(s);
            self.finish(conn, id);
        }
    }

    /// Answer one request (`buf[..n]`).
    fn serve_one(&self, conn: &Conn, id: u64, buf: &mut [u8], n: usize, header: &mut HeaderArea) {
        let fd = conn.fd.as_fd();
        let Some(h) = buf.get(..n).and_then(wire::in_header) else {
            log::warn!(
                "session {}: a malformed /dev/fuse message ({n} bytes) ignored",
                conn.name
            );
            return;
        };
        let sent = match h.opcode {
            op::FORGET => {
                if let Some(a) = fixed::<abi::ForgetIn>(&buf[..n]) {
                    conn.core.forget(h.nodeid, a.nlookup);
                }
                return;
            }
            op::BATCH_FORGET => {
                forget_batch(&conn.core, &buf[..n]);
                return;
            }
            op::INTERRUPT => wire::send_status(fd, h.unique, libc::ENOSYS),
            op::INIT => {
                log::error!("session {}: a second INIT answered EIO", conn.name);
                wire::send_status(fd, h.unique, libc::EIO)
            }
            op::DESTROY => {
                let r = wire::send_status(fd, h.unique, 0);
                self.end(conn, id);
                r
            }
            _ => match wire::as_entry(buf, n, header) {
                Ok(payload) => {
                    conn.dispatch.serve(header, payload);
                    wire::send_entry_reply(fd, header, payload)
                }
                Err(m) => {
                    log::warn!(
                        "session {}: malformed request (opcode {}, unique {}): answered {}",
                        conn.name,
                        h.opcode,
                        h.unique,
                        io::Error::from_raw_os_error(m.errno)
                    );
                    wire::send_status(fd, h.unique, m.errno)
                }
            },
        };
        if let Err(e) = sent {
            // ENOENT: the kernel gave up on the request (interrupted); ENODEV: the
            // connection ended. Neither loses anything the request did.
            if !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENODEV)) {
                log::error!(
                    "session {}: answering request {} (opcode {}): {e}",
                    conn.name,
                    h.unique,
                    h.opcode
                );
            }
        }
    }

    /// The kernel ended `conn`: read no more; finish once nothing is in flight.
    fn end(&self, conn: &Conn, id: u64) {
        let mut s = conn.state.lock().unwrap_or_else(|p| p.into_inner());
        if !s.ended {
            s.ended = true;
            s.armed = false;
            let mut ev = libc::epoll_event { events: 0, u64: 0 };
            // SAFETY: both descriptors are live; `ev` is ignored by DEL but must be valid.
            unsafe {
                libc::epoll_ctl(
                    self.ep.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    conn.fd.as_raw_fd(),
                    &mut ev,
                )
            };
        }
        if s.inflight == 0 && !s.finishing {
            s.finishing = true;
            drop(s);
            self.finish(conn, id);
        }
    }

    /// The last act of a connection: the final flush, then finished.
    fn finish(&self, conn: &Conn, id: u64) {
        conn.core.destroy();
        self.conns
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        let mut s = conn.state.lock().unwrap_or_else(|p| p.into_inner());
        s.finished = true;
        conn.finished.notify_all();
        log::debug!("session {}: /dev/fuse connection finished", conn.name);
    }
}

/// The fixed argument after the in header of `msg`.
fn fixed<T: FromBytes>(msg: &[u8]) -> Option<T> {
    let rest = msg.get(size_of::<abi::InHeader>()..)?;
    T::read_from_prefix(rest).ok().map(|(v, _)| v)
}

/// A BATCH_FORGET: `count` nodes after its fixed argument (as many as are there).
fn forget_batch(core: &TreeforkFs, msg: &[u8]) {
    let Some(a) = fixed::<abi::BatchForgetIn>(msg) else {
        return;
    };
    let off = size_of::<abi::InHeader>() + size_of::<abi::BatchForgetIn>();
    let mut rest = msg.get(off..).unwrap_or(&[]);
    for _ in 0..a.count {
        let Ok((one, r)) = abi::ForgetOne::read_from_prefix(rest) else {
            break;
        };
        core.forget(one.nodeid, one.nlookup);
        rest = r;
    }
}

/// Wait up to [`SPIN`] (`TREEFORK_FUSE_SPIN_US` overrides it, 0 turns it off) for
/// a request on `fd` without sleeping; true when one is there. Why: a program
/// issuing requests one after another (a shell, `tar`, `git`, a build) sends the
/// next one tens of microseconds after its answer, and a worker that went to sleep
/// in the meantime is woken on an idle vCPU, which costs more than the request:
/// a LOOKUP took 58-86 us through the pool against 30-45 us with fuser's blocked
/// readers (which a wakeup reaches on the waker's CPU more often); spinning 50 us
/// it took 28-30 us, and the bench's metadata rows went from 1.2x slower than
/// fuser to even (bench/RESULTS.md, "Issue 42: single-session A/B"). The cost is
/// CPU: up to [`SPIN`] per burst of requests, spent only while another worker is
/// idle (the caller checks), so no other mount waits for it.
fn spin(fd: &OwnedFd) -> bool {
    static US: OnceLock<u64> = OnceLock::new();
    let us = *US.get_or_init(|| {
        std::env::var("TREEFORK_FUSE_SPIN_US")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(SPIN.as_micros() as u64)
    });
    if us == 0 {
        return false;
    }
    let until = std::time::Instant::now() + Duration::from_micros(us);
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    while std::time::Instant::now() < until {
        // SAFETY: one live pollfd; a zero timeout does not block.
        if unsafe { libc::poll(&mut p, 1, 0) } > 0 {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on a live descriptor, no memory arguments.
    let fl = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if fl < 0 || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
