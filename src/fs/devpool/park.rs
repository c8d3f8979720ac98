//! Writes that would wait for memory, bounded to a share of the pool's workers
//! (issue 45): a WRITE whose session must seal before it takes more data (the
//! daemon-wide budget is spent, or the session is past its own marks) holds its
//! worker for the whole seal. With many sessions writing at once every worker was
//! inside one, and a session that only reads waited seconds for a LOOKUP.
//!
//! Owns: the waiters' count and the queue of parked writes. A worker about to
//! serve such a write either becomes one of at most `cap` waiters and serves it,
//! or parks a copy of the request here and goes back to the epoll set; the mount
//! is then not re-armed until its parked write is answered (so at most one parked
//! write per mount: at most `MAX_WRITE` plus a page each, charged to the
//! daemon-wide budget of unsealed data while parked). A waiter, done with its
//! write, serves the parked ones in order before it stops being a waiter.
//!
//! Invariant: the queue is non-empty only while a waiter exists (a waiter leaves
//! only under the lock, with the queue empty), so no parked write is stranded.

use std::collections::VecDeque;
use std::sync::Mutex;

/// A write parked until a waiter serves it: its connection, the connection's id
/// in the pool and a copy of the message (`n` bytes, with room after them for the
/// answer the dispatcher lays out in place).
pub(super) struct Parked<C> {
    pub conn: C,
    pub id: u64,
    pub msg: Vec<u8>,
    pub n: usize,
}

/// The pool's (`C`: its connection handle).
pub(super) struct Park<C> {
    cap: usize,
    inner: Mutex<Inner<C>>,
}

struct Inner<C> {
    waiters: usize,
    queue: VecDeque<Parked<C>>,
}

/// Room after a parked message for the answer written over its payload.
const ANSWER_ROOM: usize = 4096;

impl<C> Park<C> {
    /// At most `cap` (at least 1) workers wait at once.
    pub fn new(cap: usize) -> Park<C> {
        Park {
            cap: cap.max(1),
            inner: Mutex::new(Inner {
                waiters: 0,
                queue: VecDeque::new(),
            }),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner<C>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Become a waiter (true: serve `msg` now, then [`Park::next`] until `None`),
    /// or park a copy of `msg` for `conn` (false: the caller has marked the
    /// connection parked, under its lock, before calling).
    pub fn enter_or_park(&self, conn: &C, id: u64, msg: &[u8]) -> bool
    where
        C: Clone,
    {
        let mut g = self.inner();
        if g.waiters < self.cap {
            g.waiters += 1;
            return true;
        }
        let mut copy = Vec::with_capacity(msg.len() + ANSWER_ROOM);
        copy.extend_from_slice(msg);
        copy.resize(msg.len() + ANSWER_ROOM, 0);
        crate::budget::unsealed::ledger().parked(copy.len() as u64);
        g.queue.push_back(Parked {
            conn: conn.clone(),
            id,
            msg: copy,
            n: msg.len(),
        });
        false
    }

    /// A waiter's next parked write, or `None`: then it is no longer a waiter.
    pub fn next(&self) -> Option<Parked<C>> {
        let mut g = self.inner();
        let p = g.queue.pop_front();
        match &p {
            Some(p) => crate::budget::unsealed::ledger().unparked(p.msg.len() as u64),
            None => g.waiters -= 1,
        }
        p
    }

    /// (waiters, parked writes) now.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, usize) {
        let g = self.inner();
        (g.waiters, g.queue.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_the_cap_writes_park_and_waiters_serve_them_in_order() {
        let p: Park<u32> = Park::new(2);
        assert!(p.enter_or_park(&1, 10, b"a"));
        assert!(p.enter_or_park(&2, 20, b"b"));
        assert!(!p.enter_or_park(&3, 30, b"ccc"), "the third parks");
        assert!(!p.enter_or_park(&4, 40, b"d"));
        assert_eq!(p.counts(), (2, 2));
        let first = p.next().expect("a waiter serves the first parked write");
        assert_eq!((first.conn, first.id, first.n), (3, 30, 3));
        assert_eq!(&first.msg[..3], b"ccc");
        assert!(first.msg.len() >= 3 + ANSWER_ROOM, "room for the answer");
        assert_eq!(p.next().map(|x| x.conn), Some(4));
        assert_eq!(p.counts(), (2, 0), "still two waiters until they ask again");
        assert!(p.next().is_none());
        assert_eq!(p.counts(), (1, 0));
        assert!(p.enter_or_park(&5, 50, b"e"), "a slot is free again");
        assert!(p.next().is_none() && p.next().is_none());
        assert_eq!(p.counts(), (0, 0));
    }

    #[test]
    fn nothing_parked_is_stranded_when_waiters_race_parkers() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let p: Arc<Park<u32>> = Arc::new(Park::new(1));
        let served = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (p, served) = (p.clone(), served.clone());
                std::thread::spawn(move || {
                    for i in 0..500 {
                        if p.enter_or_park(&t, i, b"w") {
                            served.fetch_add(1, Ordering::Relaxed);
                            while p.next().is_some() {
                                served.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(p.counts(), (0, 0));
        assert_eq!(served.load(Ordering::Relaxed), 8 * 500);
    }
}
