//! The daemon-wide budget of unsealed data (issue 45): written blocks held in
//! memory until a seal hashes, compresses and packs them, every session together.
//!
//! Owns: the [`Ledger`] (one per process, [`ledger`]): the budget (`limit`), what
//! every holder has charged (`used`), how many holders hold something (`active`),
//! the registered holders (weakly: a session unregisters by being dropped), and the
//! sealer thread that seals the largest holders when the total passes half the
//! budget.
//!
//! The rules (a holder is a live session; its writers apply them, see
//! `Session::write`):
//! - past the **soft** mark (half the limit) a writer whose session holds more
//!   than its **fair share** (the soft mark over the holders holding something)
//!   starts a seal of its session (without waiting for one already running), and
//!   the sealer is woken to seal the largest holders, idle ones included, until
//!   the total is back under the soft mark; a writer seals only in one of
//!   [`writer_slots`] slots (one per CPU), else it leaves the seal to the sealer;
//! - past the **limit**, a writer whose session holds anything seals it before
//!   its write takes more memory (backpressure on the writers of every session
//!   that holds data; a session holding nothing adds one write at most). The
//!   /dev/fuse pool lets only half its workers wait so ([`Ledger::over_limit`] asked
//!   before a write is served) and parks the other such writes, one per mount,
//!   so a session that writes nothing still finds a worker.
//!
//! So the total stays under the limit plus one write per writer in flight (the
//! FUSE workers bound those: at most `MAX_WRITE` plus a block each), whatever the
//! number of sessions; never an allocation failure or an unbounded queue.
//!
//! Invariants: a holder charges what it adds ([`Ledger::grew`]) and gives back
//! exactly what it charged once a seal has made those blocks stored or once it
//! is dropped ([`Ledger::released`]); `active` counts holders whose charge is
//! above zero (each 0 -> more transition is matched by one more -> 0).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, LazyLock, Mutex, Weak};
use std::time::Duration;

use crate::error::Result;

/// What holds unsealed data and can seal it: a live session.
pub trait Holder: Send + Sync {
    /// The bytes it has charged to the ledger.
    fn charged(&self) -> u64;
    /// Seal what it holds unless a seal of it is running (then `Ok(false)`).
    fn seal_for_budget(&self) -> Result<bool>;
    /// For logs.
    fn holder_name(&self) -> String;
}

/// The default limit: 1/16 of RAM, at least 256 MiB and at most 4 GiB
/// (`TREEFORK_UNSEALED_MB` overrides it; the store's `unsealed_bytes` limit,
/// when set, wins over both at daemon start and at `limits set`).
pub fn default_limit() -> u64 {
    super::ram_share(
        "TREEFORK_UNSEALED_MB",
        super::ram_bytes(),
        16,
        256 << 20,
        4 << 30,
    )
}

/// The process's ledger of unsealed data.
pub fn ledger() -> &'static Ledger {
    static L: LazyLock<Ledger> = LazyLock::new(|| Ledger::new(default_limit()));
    &L
}

/// Unsealed data of every holder against one limit.
pub struct Ledger {
    limit: AtomicU64,
    used: AtomicU64,
    active: AtomicU64,
    holders: Mutex<Vec<Weak<dyn Holder>>>,
    /// Set by [`Ledger::kick`], cleared by the sealer when it starts a round.
    kicked: Mutex<bool>,
    wake: Condvar,
    sealer: AtomicBool,
    /// Seals the sealer made (for `limits` and the bench).
    sealer_seals: AtomicU64,
    /// Writers that sealed their session before writing, past the limit.
    forced: AtomicU64,
    /// Writers sealing their own session in a slot ([`Ledger::writer_slot`]).
    writer_seals: AtomicUsize,
}

/// Writers that may seal their own sessions at once below the limit: one per CPU
/// (sealing is CPU work: more would only share the CPUs and hold FUSE workers).
pub fn writer_slots() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A writer's seal slot; given back when dropped.
pub struct WriterSlot<'a>(&'a Ledger);

impl Drop for WriterSlot<'_> {
    fn drop(&mut self) {
        self.0.writer_seals.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A snapshot of the ledger (shown by `treefork limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub limit: u64,
    pub used: u64,
    pub active: u64,
    pub sealer_seals: u64,
    pub forced: u64,
}

impl Ledger {
    /// A ledger with `limit` bytes (tests make their own; the daemon uses [`ledger`]).
    pub fn new(limit: u64) -> Ledger {
        Ledger {
            limit: AtomicU64::new(limit.max(1)),
            used: AtomicU64::new(0),
            active: AtomicU64::new(0),
            holders: Mutex::new(Vec::new()),
            kicked: Mutex::new(false),
            wake: Condvar::new(),
            sealer: AtomicBool::new(false),
            sealer_seals: AtomicU64::new(0),
            forced: AtomicU64::new(0),
            writer_seals: AtomicUsize::new(0),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Change the limit (the store's `unsealed_bytes`); takes effect at the next write.
    pub fn set_limit(&self, bytes: u64) {
        self.limit.store(bytes.max(1), Ordering::Relaxed);
        if self.used() > self.soft() {
            self.kick();
        }
    }

    /// Bytes charged now, every holder together.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Where sealing for the budget starts: half the limit.
    pub fn soft(&self) -> u64 {
        self.limit() / 2
    }

    /// The soft mark shared among the holders holding something.
    pub fn fair_share(&self) -> u64 {
        self.soft() / self.active.load(Ordering::Relaxed).max(1)
    }

    /// A snapshot for `limits`.
    pub fn usage(&self) -> Usage {
        Usage {
            limit: self.limit(),
            used: self.used(),
            active: self.active.load(Ordering::Relaxed),
            sealer_seals: self.sealer_seals.load(Ordering::Relaxed),
            forced: self.forced.load(Ordering::Relaxed),
        }
    }

    /// Register a holder (a session at open); dropped ones are pruned.
    pub fn register(&self, h: Weak<dyn Holder>) {
        let mut hs = self.holders.lock().unwrap_or_else(|p| p.into_inner());
        hs.retain(|w| w.strong_count() > 0);
        hs.push(h);
    }

    /// A holder whose charge was `before` charged `n` more bytes; wakes the
    /// sealer past the soft mark.
    pub fn grew(&self, before: u64, n: u64) {
        if n == 0 {
            return;
        }
        if before == 0 {
            self.active.fetch_add(1, Ordering::Relaxed);
        }
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
        if used > self.soft() {
            self.kick();
        }
    }

    /// A holder gave back `n` of its charge, leaving `after`.
    pub fn released(&self, n: u64, after: u64) {
        if n == 0 {
            return;
        }
        if after == 0 {
            self.active.fetch_sub(1, Ordering::Relaxed);
        }
        self.used.fetch_sub(n, Ordering::Relaxed);
    }

    /// Whether a holder charged `own` should start a seal now: past the soft
    /// mark and above its fair share.
    pub fn should_seal(&self, own: u64) -> bool {
        own > 0 && self.used() > self.soft() && own > self.fair_share()
    }

    /// Whether a writer of a holder charged `own` must seal before its write
    /// takes more memory: past the limit and holding anything. Counted.
    pub fn must_seal(&self, own: u64) -> bool {
        let must = self.over_limit(own);
        if must {
            self.forced.fetch_add(1, Ordering::Relaxed);
        }
        must
    }

    /// [`must_seal`](Self::must_seal) without counting (the FUSE pool asks it
    /// before it serves a write, to park writes that would wait).
    pub fn over_limit(&self, own: u64) -> bool {
        own > 0 && self.used() > self.limit()
    }

    /// A slot for a writer's own seal below the limit (past the soft mark or its
    /// session's threshold), or `None` when [`writer_slots`] writers are sealing
    /// already: the writer then goes on and the sealer is woken instead. So the
    /// seals made inside FUSE requests are few, whatever the number of sessions
    /// writing, and the other requests keep finding workers.
    pub fn writer_slot(&self) -> Option<WriterSlot<'_>> {
        let cap = writer_slots();
        self.writer_seals
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |k| {
                (k < cap).then_some(k + 1)
            })
            .ok()?;
        Some(WriterSlot(self))
    }

    /// Charge `n` bytes of parked writes (copies of WRITE requests the /dev/fuse
    /// pool holds until a worker may serve them): they count against the limit
    /// like unsealed data, so the sealer frees room for them; no holder owns them.
    pub fn parked(&self, n: u64) {
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
        if used > self.soft() {
            self.kick();
        }
    }

    /// Give back `n` bytes of [`Ledger::parked`] (the write was served).
    pub fn unparked(&self, n: u64) {
        self.used.fetch_sub(n, Ordering::Relaxed);
    }

    /// Wake the sealer when the total is past the soft mark (a writer that found
    /// no [`writer_slot`](Self::writer_slot)).
    pub fn nudge(&self) {
        if self.used() > self.soft() {
            self.kick();
        }
    }

    /// Wake the sealer (started on first use).
    fn kick(&self) {
        let mut k = self.kicked.lock().unwrap_or_else(|p| p.into_inner());
        if !*k {
            *k = true;
            self.wake.notify_one();
        }
        drop(k);
        if !self.sealer.load(Ordering::Acquire) && !self.sealer.swap(true, Ordering::AcqRel) {
            // Only the process-wide ledger has a sealer thread (it lives forever).
            if std::ptr::eq(self, ledger()) {
                let spawned = std::thread::Builder::new()
                    .name("sealer".into())
                    .spawn(|| ledger().seal_loop());
                if let Err(e) = spawned {
                    // Writers still seal their own sessions past the limit.
                    log::error!("cannot start the sealer thread: {e}");
                    self.sealer.store(false, Ordering::Release);
                }
            }
        }
    }

    /// The sealer: on each wake, seal the largest holders until the total is
    /// back under the soft mark. A panic in a round ends the thread and lets the
    /// next kick start another (writers still seal past the limit meanwhile).
    fn seal_loop(&self) {
        let _restart = Restart(self);
        loop {
            {
                let k = self.kicked.lock().unwrap_or_else(|p| p.into_inner());
                let mut k = self
                    .wake
                    .wait_timeout_while(k, Duration::from_secs(1), |k| !*k)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                *k = false;
            }
            if self.used() > self.soft() && !self.seal_round() {
                // Every seal failed (a full disk): writers see the error; retry
                // in a while rather than spin.
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }

    /// One round: the holders by charge, largest first, each sealed once, until
    /// the total is under the soft mark. Returns false when a seal failed and
    /// nothing was sealed.
    pub fn seal_round(&self) -> bool {
        // Each charge read once (a sort must see a fixed order); each holder
        // held only while it is sealed (an unmounted session is not kept alive).
        let mut hs: Vec<(u64, Weak<dyn Holder>)> = {
            let mut hs = self.holders.lock().unwrap_or_else(|p| p.into_inner());
            hs.retain(|w| w.strong_count() > 0);
            hs.iter()
                .filter_map(|w| Some((w.upgrade()?.charged(), w.clone())))
                .collect()
        };
        hs.sort_by_key(|(c, _)| std::cmp::Reverse(*c));
        let (mut sealed, mut failed) = (false, false);
        for (c, w) in hs {
            if self.used() <= self.soft() || c == 0 {
                break;
            }
            let Some(h) = w.upgrade() else { continue };
            match h.seal_for_budget() {
                Ok(true) => {
                    sealed = true;
                    self.sealer_seals.fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {}
                Err(e) => {
                    failed = true;
                    log::warn!(
                        "sealing session {} for the memory budget: {e}",
                        h.holder_name()
                    );
                }
            }
        }
        sealed || !failed
    }
}

/// Clears the sealer's flag when its thread ends (a panic included), so the
/// next [`Ledger::kick`] starts a new one.
struct Restart<'a>(&'a Ledger);

impl Drop for Restart<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            log::error!("the sealer thread panicked; the next need starts another");
        }
        self.0.sealer.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A holder whose seal gives back its whole charge.
    struct Fake {
        led: Arc<Ledger>,
        charged: AtomicU64,
        busy: AtomicBool,
    }

    impl Fake {
        fn add(&self, n: u64) {
            let before = self.charged.fetch_add(n, Ordering::Relaxed);
            self.led.grew(before, n);
        }
    }

    impl Holder for Fake {
        fn charged(&self) -> u64 {
            self.charged.load(Ordering::Relaxed)
        }
        fn seal_for_budget(&self) -> Result<bool> {
            if self.busy.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let n = self.charged.swap(0, Ordering::Relaxed);
            self.led.released(n, 0);
            Ok(true)
        }
        fn holder_name(&self) -> String {
            "fake".into()
        }
    }

    fn fake(led: &Arc<Ledger>) -> Arc<Fake> {
        let f = Arc::new(Fake {
            led: led.clone(),
            charged: AtomicU64::new(0),
            busy: AtomicBool::new(false),
        });
        let w: Weak<dyn Holder> = Arc::downgrade(&(f.clone() as Arc<dyn Holder>));
        led.register(w);
        f
    }

    #[test]
    fn the_fair_share_divides_the_soft_mark_among_holders_holding_data() {
        let led = Arc::new(Ledger::new(100));
        let (a, b) = (fake(&led), fake(&led));
        assert_eq!(led.fair_share(), 50);
        a.add(40);
        assert_eq!((led.used(), led.fair_share()), (40, 50));
        b.add(5);
        assert_eq!((led.used(), led.fair_share()), (45, 25));
        assert!(!led.should_seal(40), "under the soft mark nobody seals");
        b.add(10);
        assert!(
            led.should_seal(a.charged()),
            "past it, the large holder seals"
        );
        assert!(!led.should_seal(b.charged()), "the small one does not");
        assert!(!led.must_seal(a.charged()));
        a.add(50);
        assert!(
            led.must_seal(b.charged()),
            "past the limit, every holder seals"
        );
        assert!(!led.must_seal(0), "one holding nothing writes");
    }

    #[test]
    fn a_round_seals_the_largest_holders_first_until_under_the_soft_mark() {
        let led = Arc::new(Ledger::new(100));
        let hs: Vec<_> = (0..4).map(|_| fake(&led)).collect();
        for (h, n) in hs.iter().zip([10, 40, 5, 30]) {
            h.add(n);
        }
        assert_eq!(led.used(), 85);
        assert!(led.seal_round());
        // The largest (40) sealed: 45 left, under 50; the others keep theirs.
        assert_eq!(led.used(), 45);
        assert_eq!(
            hs.iter().map(|h| h.charged()).collect::<Vec<_>>(),
            [10, 0, 5, 30]
        );
        assert_eq!(led.usage().active, 3);
        // A busy holder is skipped; the next largest ones are sealed instead.
        hs[0].add(60);
        hs[0].busy.store(true, Ordering::Relaxed);
        hs[2].add(20);
        assert!(led.seal_round());
        assert_eq!(
            hs.iter().map(|h| h.charged()).collect::<Vec<_>>(),
            [70, 0, 0, 0]
        );
    }

    #[test]
    fn writer_slots_are_bounded_and_given_back() {
        let led = Ledger::new(100);
        let slots: Vec<_> = (0..writer_slots()).map(|_| led.writer_slot()).collect();
        assert!(slots.iter().all(Option::is_some));
        assert!(led.writer_slot().is_none(), "every slot is taken");
        drop(slots);
        assert!(led.writer_slot().is_some(), "dropped slots are free again");
        assert!(!led.over_limit(0) && !led.over_limit(1));
    }

    #[test]
    fn dropped_holders_are_pruned() {
        let led = Arc::new(Ledger::new(100));
        let a = fake(&led);
        drop(fake(&led));
        a.add(80);
        assert!(led.seal_round());
        assert_eq!(led.used(), 0);
        assert_eq!(led.holders.lock().unwrap().len(), 1);
    }
}
