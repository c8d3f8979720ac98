//! The k-ary search of a bisect, pure, as the state the daemon keeps between
//! `bisect_step`s (in the manner of jj's `Bisector::next_step`: the search
//! decides, the client only evaluates): candidates are indices `0..len` (oldest
//! first), a *round* tests a batch of them at once ([`Search::pending`]) and the
//! client answers, per index, whether the command failed there
//! ([`Search::answer`]). No I/O here.
//!
//! Invariants: the first round tests both bounds (`0`, the good end, and
//! `len - 1`, the bad end) and, with three jobs or more, `jobs - 2` split points
//! between them; a later round tests at most `jobs` points. Between rounds the
//! search keeps `lo` (tested, passed) < `hi` (tested, failed) and narrows to the
//! part between the last pass before the first failure and that failure, so it
//! ends on an adjacent pass/fail pair even when the results are not monotone
//! (a flaky command), and after at most `ceil(log_{jobs+1}(len)) + 1` rounds.

use serde::{Deserialize, Serialize};

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "found", rename_all = "snake_case")]
pub enum Found {
    /// The command fails at `first_bad` and passed at `last_good`.
    FirstBad {
        /// The first failing candidate.
        first_bad: usize,
        /// The passing candidate right before it.
        last_good: usize,
    },
    /// The command fails at the good end itself: the range is wrong (nothing in
    /// it can be the first bad one).
    FailsAtGood,
    /// The command passes at the bad end: nothing to find.
    PassesAtBad,
}

/// What the search asks next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Test these candidates (ascending).
    Test(Vec<usize>),
    /// The search ended.
    Done(Found),
}

/// A search over `0..len`, `jobs` points a round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Search {
    /// Candidates.
    pub len: usize,
    /// Points a round (at least 1).
    pub jobs: usize,
    /// The last pass known (before `hi`).
    pub lo: usize,
    /// The first failure known.
    pub hi: usize,
    /// Rounds asked so far (the pending one included).
    pub rounds: usize,
    /// The candidates of the round asked and not answered yet, ascending.
    pub pending: Vec<usize>,
    /// How it ended, once it did.
    pub found: Option<Found>,
}

impl Search {
    /// A new search of `len` candidates, its first round pending (`len == 0`:
    /// nothing to find, no round).
    pub fn new(len: usize, jobs: usize) -> Search {
        let jobs = jobs.max(1);
        let mut s = Search {
            len,
            jobs,
            lo: 0,
            hi: len.saturating_sub(1),
            rounds: 0,
            pending: Vec::new(),
            found: None,
        };
        if len == 0 {
            s.found = Some(Found::PassesAtBad);
            return s;
        }
        let (lo, hi) = (s.lo, s.hi);
        s.pending.push(lo);
        if hi > lo {
            s.pending.extend(split(lo, hi, jobs.saturating_sub(2)));
            s.pending.push(hi);
        }
        s.rounds = 1;
        s
    }

    /// What the search asks now.
    pub fn next(&self) -> Next {
        match self.found {
            Some(f) => Next::Done(f),
            None => Next::Test(self.pending.clone()),
        }
    }

    /// The answers to the pending round: per pending candidate, in order, whether
    /// the command failed there (a missing answer counts as a failure). Returns
    /// what the search asks next.
    pub fn answer(&mut self, fails: &[bool]) -> Next {
        let points = std::mem::take(&mut self.pending);
        if self.found.is_some() || points.is_empty() {
            return self.next();
        }
        let failed = |k: usize| fails.get(k).copied().unwrap_or(true);
        if self.rounds == 1 {
            if !failed(points.len() - 1) {
                self.found = Some(Found::PassesAtBad);
                return self.next();
            }
            if failed(0) {
                self.found = Some(Found::FailsAtGood);
                return self.next();
            }
        }
        (self.lo, self.hi) = narrow(self.lo, self.hi, &points, fails);
        if self.hi - self.lo > 1 {
            self.pending = split(self.lo, self.hi, self.jobs);
            self.rounds += 1;
        } else {
            self.found = Some(Found::FirstBad {
                first_bad: self.hi,
                last_good: self.lo,
            });
        }
        self.next()
    }
}

/// Run a whole search with `test` answering each round (for each index given,
/// ascending, whether the command failed there); its error ends the search.
/// Returns how it ended and the number of rounds.
pub fn search<E>(
    len: usize,
    jobs: usize,
    mut test: impl FnMut(&[usize]) -> Result<Vec<bool>, E>,
) -> Result<(Found, usize), E> {
    let mut s = Search::new(len, jobs);
    let mut next = s.next();
    loop {
        match next {
            Next::Done(f) => return Ok((f, s.rounds)),
            Next::Test(points) => {
                let fails = test(&points)?;
                next = s.answer(&fails);
            }
        }
    }
}

/// Up to `n` points strictly between `lo` and `hi`, ascending, cutting the gap
/// into parts of at most `ceil((hi - lo) / (n + 1))` (every inner point when
/// there are no more than `n`).
fn split(lo: usize, hi: usize, n: usize) -> Vec<usize> {
    let gap = hi - lo;
    let n = n.min(gap.saturating_sub(1));
    (1..=n).map(|i| lo + i * gap / (n + 1)).collect()
}

/// The new `(lo, hi)` after testing `points` (ascending, inside `lo..hi`):
/// `hi` the first that failed (else the old `hi`), `lo` the last that passed
/// before it (else the old `lo`). A missing answer counts as a failure.
fn narrow(lo: usize, hi: usize, points: &[usize], fails: &[bool]) -> (usize, usize) {
    let failed = |k: usize| fails.get(k).copied().unwrap_or(true);
    let inner = |p: usize| p > lo && p < hi;
    let new_hi = (0..points.len())
        .find(|&k| inner(points[k]) && failed(k))
        .map_or(hi, |k| points[k]);
    let new_lo = (0..points.len())
        .filter(|&k| inner(points[k]) && points[k] < new_hi && !failed(k))
        .map(|k| points[k])
        .max()
        .unwrap_or(lo);
    (new_lo, new_hi)
}

/// The smallest `r` with `base^r >= len` (`len >= 1`, `base >= 2`).
#[cfg(test)]
fn ceil_log(base: usize, len: usize) -> usize {
    let (mut r, mut p) = (0, 1usize);
    while p < len {
        p = p.saturating_mul(base);
        r += 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use proptest::prelude::*;

    use super::*;

    /// Search a pass/fail sequence; also checks every round's size and order.
    fn run(fails: &[bool], jobs: usize) -> (Found, usize, Vec<Vec<usize>>) {
        let mut seen = Vec::new();
        let (found, rounds) = search(fails.len(), jobs, |pts| {
            assert!(pts.windows(2).all(|w| w[0] < w[1]), "{pts:?}");
            let cap = if seen.is_empty() { jobs.max(2) } else { jobs };
            assert!(pts.len() <= cap, "round {} of {pts:?}", seen.len());
            seen.push(pts.to_vec());
            Ok::<_, Infallible>(pts.iter().map(|&i| fails[i]).collect())
        })
        .unwrap();
        assert_eq!(rounds, seen.len());
        (found, rounds, seen)
    }

    /// The sequence that starts failing at `k` (`k == len`: never).
    fn monotone(len: usize, k: usize) -> Vec<bool> {
        (0..len).map(|i| i >= k).collect()
    }

    #[test]
    fn twenty_candidates_first_bad_at_thirteen() {
        let f = monotone(20, 13);
        for jobs in 1..=8 {
            let (found, rounds, _) = run(&f, jobs);
            let want = Found::FirstBad {
                first_bad: 13,
                last_good: 12,
            };
            assert_eq!(found, want, "jobs {jobs}");
            assert!(
                rounds <= ceil_log(jobs + 1, 20) + 1,
                "jobs {jobs}: {rounds}"
            );
        }
    }

    #[test]
    fn bounds_decide_alone() {
        assert_eq!(run(&[false, false, false], 1).0, Found::PassesAtBad);
        let (found, rounds, seen) = run(&[true, true, true], 4);
        let want = Found::FailsAtGood;
        assert_eq!((found, rounds), (want, 1));
        assert_eq!(seen[0], vec![0, 1, 2]);
        assert_eq!(run(&[true], 1).0, want);
        assert_eq!(run(&[false], 3).0, Found::PassesAtBad);
        let two = Found::FirstBad {
            first_bad: 1,
            last_good: 0,
        };
        assert_eq!(run(&[false, true], 1).0, two);
    }

    #[test]
    fn split_points_are_inside_and_spread() {
        assert_eq!(split(0, 10, 1), vec![5]);
        assert_eq!(split(0, 10, 4), vec![2, 4, 6, 8]);
        assert_eq!(split(3, 6, 8), vec![4, 5]);
        assert!(split(3, 4, 8).is_empty());
    }

    proptest! {
        #[test]
        fn finds_the_first_failure_of_any_monotone_sequence(
            len in 1usize..400,
            k_frac in 0.0f64..=1.0,
            jobs in 1usize..=8,
        ) {
            let k = ((len as f64) * k_frac).round() as usize;
            let (found, rounds, _) = run(&monotone(len, k), jobs);
            let want = if k == len {
                Found::PassesAtBad
            } else if k == 0 {
                Found::FailsAtGood
            } else {
                Found::FirstBad { first_bad: k, last_good: k - 1 }
            };
            prop_assert_eq!(found, want);
            prop_assert!(rounds <= ceil_log(jobs + 1, len) + 1,
                "len {} jobs {} rounds {}", len, jobs, rounds);
        }

        #[test]
        fn ends_on_an_adjacent_pass_fail_pair_whatever_the_results(
            fails in proptest::collection::vec(any::<bool>(), 1..200),
            jobs in 1usize..=8,
        ) {
            let len = fails.len();
            let (found, rounds, _) = run(&fails, jobs);
            prop_assert!(rounds <= ceil_log(jobs + 1, len) + 1);
            match found {
                Found::PassesAtBad => prop_assert!(!fails[len - 1]),
                Found::FailsAtGood => prop_assert!(fails[0]),
                Found::FirstBad { first_bad, last_good: g } => {
                    prop_assert_eq!(g + 1, first_bad);
                    prop_assert!(fails[first_bad] && !fails[g]);
                }
            }
        }

        #[test]
        fn a_search_kept_as_json_between_rounds_asks_the_same(
            fails in proptest::collection::vec(any::<bool>(), 1..120),
            jobs in 1usize..=6,
        ) {
            // The daemon stores the search between `bisect_step`s: a search
            // decoded from its JSON each round asks what one kept in memory does.
            let (want, want_rounds, _) = run(&fails, jobs);
            let mut s = Search::new(fails.len(), jobs);
            let mut asked = 0;
            let got = loop {
                let json = serde_json::to_vec(&s).unwrap();
                s = serde_json::from_slice(&json).unwrap();
                match s.next() {
                    Next::Done(f) => break f,
                    Next::Test(points) => {
                        asked += 1;
                        prop_assert!(!points.is_empty() && points.iter().all(|&p| p < fails.len()));
                        let answers: Vec<bool> = points.iter().map(|&p| fails[p]).collect();
                        s.answer(&answers);
                    }
                }
            };
            prop_assert_eq!(got, want);
            prop_assert_eq!(asked, want_rounds);
            prop_assert_eq!(s.rounds, want_rounds);
            prop_assert!(s.pending.is_empty());
        }
    }
}
