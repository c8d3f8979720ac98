//! A bisect whose search the daemon keeps: `bisect_begin` with `search` finds
//! the candidates (the first-parent chain of `bad` from `good` on), makes the
//! first round's forks and stores the state ([`super::state`]) in the same
//! commit; each `bisect_step` takes the results of the pending candidates,
//! removes their forks (unless `keep`), advances the pure search
//! ([`super::search`]) and makes the next round's forks, or ends it. The client
//! only runs the command in the forks it is given and reports what it did.
//!
//! Ends: a first bad candidate, or a command passing at the bad end, is kept in
//! the state as the result document, which the final `bisect_end` records; a
//! command failing at the good end (a wrong range) or one that cannot start ends
//! the bisect here: every fork removed (even with `keep`), the state deleted,
//! nothing recorded.
//!
//! Invariants: a result is taken once: validated against the pending candidates
//! (an unknown candidate, a duplicate, one not pending, a pending one left out
//! are `Invalid`, naming it) and the state written with the round answered
//! before the op lock is released; the next write expects that very state
//! (`MetaOp::Expect`), so a concurrent `bisect_end` (abort) is never undone.

use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::begin::{BisectBegin, BisectBegun, BisectFork, make};
use super::search::{Found, Next as Asked, Search};
use super::state::{self, State};
use super::{check_id, end};
use crate::command::bisect::{
    Bisected, MAX_ARGV, MAX_TEXT, Next, Outcome, Reported, SearchSpec, Step, Stepped,
};
use crate::control::MountFor;
use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::ops::{Host, Target, refctx};
use crate::store::ObjectStore;

/// How long a fork that cannot be removed (busy: a process the command left
/// behind) is retried before it is reported as not removed.
const UNMOUNT_PATIENCE: Duration = Duration::from_secs(5);

/// Report the results of the pending candidates; get the next ones or the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BisectStep {
    /// The bisect id (from `bisect_begin` with `search`).
    pub id: String,
    /// One result per pending candidate.
    pub results: Vec<Reported>,
}

/// Check a search's spec: jobs, the command's bounds.
fn check_spec(req: &BisectBegin, spec: &SearchSpec) -> Result<()> {
    if req.id.is_some() || !req.checkpoints.is_empty() || req.numbers.is_some() {
        return Err(Error::Invalid(
            "bisect_begin with search takes no id, checkpoints nor numbers: \
             the daemon chooses them"
                .into(),
        ));
    }
    if spec.jobs == 0 {
        return Err(Error::Invalid("jobs must be at least 1".into()));
    }
    if spec.command.is_empty() || spec.command.len() > MAX_ARGV {
        return Err(Error::Invalid(format!(
            "the command needs 1 to {MAX_ARGV} arguments"
        )));
    }
    if spec.command.iter().any(|a| a.len() > MAX_TEXT) {
        return Err(Error::Invalid(format!(
            "a command argument longer than {MAX_TEXT} bytes"
        )));
    }
    Ok(())
}

/// `bisect_begin` with `search`.
pub(super) fn begin<H: Host>(
    h: &H,
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    who: MountFor,
    req: &BisectBegin,
    spec: &SearchSpec,
    by_agent: bool,
) -> Result<BisectBegun> {
    check_spec(req, spec)?;
    let store = h.store();
    let bad_name = spec.bad.as_deref().unwrap_or("HEAD");
    if spec.bad.is_none() && t.session.record().head.is_none() {
        return Err(Error::Invalid(
            "HEAD names no checkpoint: the session has none yet (`treefork checkpoint`)".into(),
        ));
    }
    let bad = refctx::resolve(t, bad_name)?;
    let good = match &spec.good {
        Some(g) => Some((g.as_str(), refctx::resolve(t, g)?)),
        None => None,
    };
    let good_ref = good.as_ref().map(|(n, c)| (*n, c));
    let (len, good_end) = state::range(&*store, &bad, good_ref, bad_name)?;
    let st = State {
        v: state::VERSION,
        command: spec.command.clone(),
        keep: spec.keep,
        cwd: req.cwd.clone(),
        forks_dir: req.forks_dir.clone(),
        started_ms: crate::clock::unix_ms(),
        good: state::point(&good_end),
        bad: state::point(&bad),
        search: Search::new(len, spec.jobs),
        forks: Vec::new(),
        steps: Vec::new(),
        result: None,
    };
    let id = crate::ops::experiment::new_id();
    let forks = next_round(h, t, op_lock, who, &id, &st, None, by_agent)?;
    let search = stepped(&id, &st, Vec::new(), Next::Test { round: 1, forks });
    let forks = match &search.next {
        Next::Test { forks, .. } => forks.clone(),
        _ => Vec::new(),
    };
    Ok(BisectBegun {
        id,
        forks,
        search: Some(Box::new(search)),
    })
}

/// Make the forks of `st`'s pending candidates and store `st` naming them, in
/// one commit (expecting the stored state to be `before`, when given). On
/// failure every fork of the bisect is removed and its state deleted.
#[allow(clippy::too_many_arguments)]
fn next_round<H: Host>(
    h: &H,
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    who: MountFor,
    id: &str,
    st: &State,
    before: Option<Vec<u8>>,
    by_agent: bool,
) -> Result<Vec<BisectFork>> {
    let store = h.store();
    let points = &st.search.pending;
    let cps = state::candidates(&*store, &st.bad.id, st.search.len, points)?;
    let req = BisectBegin {
        id: Some(id.to_string()),
        checkpoints: cps.iter().map(|(_, c)| c.id.to_hex()).collect(),
        numbers: Some(cps.iter().map(|(i, _)| *i as u32).collect()),
        cwd: st.cwd.clone(),
        forks_dir: st.forks_dir.clone(),
        search: None,
    };
    let session = t.session.name();
    let made = make(h, t, op_lock, who, id, &req, by_agent, |pending| {
        let mut next = st.clone();
        next.forks = pending.to_vec();
        let key = meta::bisect_key(session, id);
        Ok(vec![MetaOp::Expect(key, before), next.put(session, id)?])
    });
    if made.is_err() {
        // What a failed round made is removed by `make`; the bisect cannot go
        // on: its other forks and its state go too (at begin the client has no
        // id to abort with).
        // (One batch: the forks and the state.)
        if let Err(e) = end::remove_all(h, t, id, vec![state::delete(session, id)]) {
            log::error!("bisect {id}: cannot remove its forks and search state: {e}");
        }
    }
    made
}

/// The answer naming `st`'s range.
fn stepped(id: &str, st: &State, steps: Vec<Step>, next: Next) -> Stepped {
    Stepped {
        id: id.to_string(),
        candidates: st.search.len,
        good: st.good.clone(),
        bad: st.bad.clone(),
        steps,
        next,
    }
}

/// The outcomes of `results`, in the order of `search`'s pending candidates:
/// every pending candidate answered once, nothing else.
pub(super) fn answers<'a>(search: &Search, results: &'a [Reported]) -> Result<Vec<&'a Outcome>> {
    let bad = |what: String| Error::Invalid(format!("bisect_step: {what}"));
    let mut seen = std::collections::BTreeMap::new();
    for r in results {
        let n = r.candidate as usize;
        if n >= search.len {
            return Err(bad(format!(
                "candidate {n} is unknown (this bisect has {} candidates, 0 to {})",
                search.len,
                search.len.saturating_sub(1)
            )));
        }
        if seen.contains_key(&n) {
            return Err(bad(format!("candidate {n} has two results")));
        }
        if !search.pending.contains(&n) {
            return Err(bad(format!(
                "candidate {n} is not pending (pending: {:?})",
                search.pending
            )));
        }
        r.outcome.check()?;
        seen.insert(n, &r.outcome);
    }
    search
        .pending
        .iter()
        .map(|p| match seen.get(p) {
            Some(o) => Ok(*o),
            None => Err(bad(format!("no result for pending candidate {p}"))),
        })
        .collect()
}

/// `bisect_step`.
pub fn step<H: Host>(
    h: &H,
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    who: MountFor,
    req: &BisectStep,
    by_agent: bool,
) -> Result<Stepped> {
    check_id(&req.id)?;
    let store = h.store();
    let name = t.session.name();
    let id = req.id.as_str();
    let mut st = running(&*store, name, id)?;
    let outcomes = answers(&st.search, &req.results)?;
    let made = match steps(&*store, &st, &outcomes)? {
        Ok(made) => made,
        Err(message) => {
            // The forks and the state go in one batch, under the lock (a
            // second report finds no search).
            end::remove_all(h, t, id, vec![state::delete(name, id)])?;
            drop(op_lock);
            return Ok(stepped(id, &st, Vec::new(), Next::CannotStart { message }));
        }
    };
    let fails: Vec<bool> = made.iter().map(|s| s.failed).collect();
    let asked = st.search.answer(&fails);
    let tested = std::mem::take(&mut st.forks);
    st.steps.extend(made);
    // The round answered, before the lock is released: a second report of it
    // finds nothing pending.
    let answered = st.encode(id)?;
    store.commit(vec![MetaOp::Put(
        meta::bisect_key(name, id),
        answered.clone(),
    )])?;
    drop(op_lock);
    if !st.keep {
        let names: Vec<String> = tested.iter().map(|f| f.session.clone()).collect();
        for (fork, error) in remove_patiently(h, t, id, names)? {
            if let Some(s) = st.steps.iter_mut().rev().find(|s| s.fork == fork) {
                s.not_removed = Some(error);
            }
        }
    }
    let round = st.steps[st.steps.len() - fails.len()..].to_vec();
    let next = advance(h, t, who, id, &mut st, asked, answered, by_agent)?;
    Ok(stepped(id, &st, round, next))
}

/// The state of bisect `id` of `session`, its search still going.
fn running(store: &dyn ObjectStore, session: &str, id: &str) -> Result<State> {
    let st = state::load(store, session, id)?.ok_or_else(|| {
        Error::NotFound(format!(
            "bisect {id} of session {session} keeps no search (begun without search, or over)"
        ))
    })?;
    if st.result.is_some() {
        return Err(Error::Invalid(format!(
            "bisect {id} is over: send bisect_end to record it"
        )));
    }
    Ok(st)
}

/// The steps of the pending round ended with `outcomes` (in pending order), or
/// what could not start where.
fn steps(
    store: &dyn ObjectStore,
    st: &State,
    outcomes: &[&Outcome],
) -> Result<std::result::Result<Vec<Step>, String>> {
    let round = st.search.rounds;
    let cps = state::candidates(store, &st.bad.id, st.search.len, &st.search.pending)?;
    let mut made = Vec::new();
    for ((i, c), o) in cps.iter().zip(outcomes) {
        let fork = st.forks.iter().find(|f| f.n as usize == *i);
        let session = fork.map_or(String::new(), |f| f.session.clone());
        let mut s = o.step(&state::point(c), *i, round, session);
        s.kept_at = fork.filter(|_| st.keep).map(|f| f.mountpoint.clone());
        if let Some(e) = &o.error {
            return Ok(Err(format!(
                "{} could not start in the fork of {} ({}): {e}",
                st.command.first().map_or("", String::as_str),
                s.short,
                s.message
            )));
        }
        made.push(s);
    }
    Ok(Ok(made))
}

/// After a round was answered (the state stored as `answered`): end the
/// bisect, keep its result, or make the next round's forks.
#[allow(clippy::too_many_arguments)]
fn advance<H: Host>(
    h: &H,
    t: &Target,
    who: MountFor,
    id: &str,
    st: &mut State,
    asked: Asked,
    answered: Vec<u8>,
    by_agent: bool,
) -> Result<Next> {
    let store = h.store();
    let name = t.session.name();
    let key = meta::bisect_key(name, id);
    match asked {
        Asked::Done(Found::FailsAtGood) => {
            let forget = vec![MetaOp::Expect(key, Some(answered)), state::delete(name, id)];
            end::remove_all(h, t, id, forget)?;
            Ok(Next::GoodEndFails {
                good: st.good.clone(),
            })
        }
        Asked::Done(found) => {
            let doc = result(&*store, st, found)?;
            st.result = Some(doc.clone());
            let _lock = t.session.op_lock.lock().unwrap_or_else(|p| p.into_inner());
            store.commit(vec![MetaOp::Expect(key, Some(answered)), st.put(name, id)?])?;
            Ok(Next::Found {
                result: Box::new(doc),
            })
        }
        Asked::Test(_) => {
            let lock = t.session.op_lock.lock().unwrap_or_else(|p| p.into_inner());
            let forks = next_round(h, t, lock, who, id, st, Some(answered), by_agent)?;
            Ok(Next::Test {
                round: st.search.rounds,
                forks,
            })
        }
    }
}

/// The result document of `st`'s search, ended as `found`.
fn result(store: &dyn ObjectStore, st: &State, found: Found) -> Result<Bisected> {
    let (first_bad, last_good) = match found {
        Found::FirstBad {
            first_bad,
            last_good,
        } => {
            let cps = state::candidates(store, &st.bad.id, st.search.len, &[last_good, first_bad])?;
            let p = |i: usize| {
                cps.iter()
                    .find(|(j, _)| *j == i)
                    .map(|(_, c)| state::point(c))
            };
            (p(first_bad), p(last_good))
        }
        Found::PassesAtBad | Found::FailsAtGood => (None, None),
    };
    Ok(Bisected {
        command: st.command.clone(),
        first_bad,
        last_good,
        good: st.good.clone(),
        bad: st.bad.clone(),
        candidates: st.search.len,
        jobs: st.search.jobs,
        rounds: st.search.rounds,
        wall_ms: crate::clock::unix_ms().saturating_sub(st.started_ms),
        steps: st.steps.clone(),
    })
}

/// Remove these forks of bisect `id`, retrying those that could not be (a
/// process the command left behind may still hold a fork busy) for up to
/// [`UNMOUNT_PATIENCE`]; the errors of those left.
fn remove_patiently<H: Host>(
    h: &H,
    t: &Target,
    id: &str,
    names: Vec<String>,
) -> Result<Vec<(String, String)>> {
    let t0 = Instant::now();
    let mut left = names;
    loop {
        let live = super::forks(&*h.store(), t.session.name(), id)?;
        let (_, errors) = end::remove_forks(h, t, id, &live, left, Vec::new())?;
        let errors: Vec<(String, String)> = errors.into_iter().map(|c| (c.fork, c.error)).collect();
        if errors.is_empty() || t0.elapsed() >= UNMOUNT_PATIENCE {
            return Ok(errors);
        }
        std::thread::sleep(Duration::from_millis(100));
        left = errors.into_iter().map(|(n, _)| n).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported(candidate: u32, exit: i32) -> Reported {
        Reported {
            candidate,
            outcome: Outcome {
                exit: Some(exit),
                ..Outcome::default()
            },
        }
    }

    fn refusal(search: &Search, results: &[Reported]) -> String {
        match answers(search, results) {
            Err(Error::Invalid(m)) => m,
            r => panic!("{results:?}: {r:?}"),
        }
    }

    #[test]
    fn bisect_step_takes_each_pending_candidate_once_and_nothing_else() {
        // Ten candidates, three jobs: the first round is 0, 4, 9.
        let s = Search::new(10, 3);
        assert_eq!(s.pending, vec![0, 4, 9]);
        let ok = [reported(9, 1), reported(0, 0), reported(4, 0)];
        let got = answers(&s, &ok).unwrap();
        let exits: Vec<Option<i32>> = got.iter().map(|o| o.exit).collect();
        assert_eq!(exits, vec![Some(0), Some(0), Some(1)], "in pending order");
        let m = refusal(&s, &[reported(0, 0), reported(4, 0), reported(12, 1)]);
        assert!(m.contains("candidate 12 is unknown"), "{m}");
        let m = refusal(&s, &[reported(0, 0), reported(0, 0), reported(9, 1)]);
        assert!(m.contains("candidate 0 has two results"), "{m}");
        let m = refusal(&s, &[reported(0, 0), reported(5, 0), reported(9, 1)]);
        assert!(m.contains("candidate 5 is not pending"), "{m}");
        let m = refusal(&s, &[reported(0, 0), reported(9, 1)]);
        assert!(m.contains("no result for pending candidate 4"), "{m}");
        let long = Reported {
            candidate: 4,
            outcome: Outcome {
                error: Some("x".repeat(MAX_TEXT + 1)),
                ..Outcome::default()
            },
        };
        assert!(matches!(
            answers(&s, &[reported(0, 0), long, reported(9, 1)]),
            Err(Error::Invalid(_))
        ));
        // Once answered, the round's candidates are no longer pending.
        let mut s = s;
        s.answer(&[false, false, true]);
        let m = refusal(&s, &[reported(4, 0)]);
        assert!(m.contains("candidate 4 is not pending"), "{m}");
    }
}
