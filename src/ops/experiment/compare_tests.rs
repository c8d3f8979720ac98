use proptest::prelude::*;

use super::*;

fn run(n: u32, exit: Option<i32>, ms: u64) -> RunResult {
    RunResult {
        run: n,
        exit,
        duration_ms: ms,
        ..RunResult::default()
    }
}

#[test]
fn default_ranking_puts_successes_first_then_the_faster() {
    let rs = vec![
        run(1, Some(0), 300),
        run(2, Some(1), 10),
        run(3, Some(0), 100),
    ];
    assert_eq!(rank(&rs, RankBy::Default), vec![3, 1, 2]);
    assert_eq!(rank(&rs, RankBy::Duration), vec![2, 3, 1]);
    assert_eq!(rank(&rs, RankBy::Exit), vec![1, 3, 2]);
    assert_eq!(winner(&rs, &rank(&rs, RankBy::Default)), Some(3));
}

#[test]
fn score_ranks_higher_first_and_unscored_last() {
    let mut rs = vec![run(1, Some(0), 1), run(2, Some(0), 1), run(3, Some(0), 1)];
    rs[0].score = Some(-2.5);
    rs[1].score = None;
    rs[2].score = Some(10.0);
    assert_eq!(rank(&rs, RankBy::Score), vec![3, 1, 2]);
}

#[test]
fn output_ranks_the_shorter_stdout_first_and_not_started_runs_last() {
    let mut rs = vec![run(1, Some(0), 1), run(2, None, 0), run(3, Some(0), 1)];
    rs[0].stdout_len = 50;
    rs[1].error = Some("cannot run".into());
    rs[2].stdout_len = 5;
    assert_eq!(rank(&rs, RankBy::Output), vec![3, 1, 2]);
    // A first-ranked run that could not start is no winner.
    let only = vec![rs[1].clone()];
    assert_eq!(winner(&only, &rank(&only, RankBy::Duration)), None);
}

#[test]
fn stats_and_output_diffs() {
    let mut rs = vec![run(1, Some(0), 100), run(2, Some(2), 300)];
    rs[0].stdout = "a\nb\n".into();
    rs[1].stdout = "a\nc\n".into();
    let s = stats(&rs);
    assert_eq!((s.min_duration_ms, s.max_duration_ms), (100, 300));
    assert_eq!(s.mean_duration_ms, 200.0);
    assert_eq!(s.success_rate, 0.5);
    let d = output_diff(&rs[0], &rs[1]);
    assert_eq!(d.exit_code_diff, Some(-2));
    assert!(d.stdout_diff.contains("-b\n") && d.stdout_diff.contains("+c\n"));
    assert_eq!(d.stderr_diff, "");
    assert_eq!(stats(&[]).runs, 0);
}

#[test]
fn rank_by_names_parse() {
    assert_eq!(RankBy::parse(None).unwrap(), RankBy::Default);
    assert_eq!(RankBy::parse(Some("score")).unwrap(), RankBy::Score);
    assert!(RankBy::parse(Some("best")).is_err());
}

fn arb_run() -> impl Strategy<Value = RunResult> {
    (
        prop::option::of(-3i32..4),
        0u64..1000,
        any::<bool>(),
        any::<bool>(),
        prop::option::of(-1e6f64..1e6),
        0u64..100,
    )
        .prop_map(|(exit, ms, err, to, score, len)| RunResult {
            run: 0,
            exit,
            duration_ms: ms,
            error: err.then(|| "cannot run".to_string()),
            timed_out: to,
            score,
            stdout_len: len,
            ..RunResult::default()
        })
}

fn by() -> impl Strategy<Value = RankBy> {
    prop_oneof![
        Just(RankBy::Default),
        Just(RankBy::Exit),
        Just(RankBy::Duration),
        Just(RankBy::Output),
        Just(RankBy::Score),
    ]
}

proptest! {
    #[test]
    fn ranking_is_a_permutation_and_respects_its_criterion(
        mut rs in prop::collection::vec(arb_run(), 0..12),
        by in by(),
    ) {
        for (i, r) in rs.iter_mut().enumerate() {
            r.run = i as u32 + 1;
        }
        let order = rank(&rs, by);
        let mut sorted = order.clone();
        sorted.sort();
        prop_assert_eq!(sorted, (1..=rs.len() as u32).collect::<Vec<_>>());
        // Deterministic, whatever order the results came in.
        let mut rev = rs.clone();
        rev.reverse();
        prop_assert_eq!(rank(&rev, by), order.clone());
        let get = |n: u32| &rs[n as usize - 1];
        for w in order.windows(2) {
            let (a, b) = (get(w[0]), get(w[1]));
            match by {
                RankBy::Default => {
                    prop_assert!(succeeded(a) || !succeeded(b));
                    if succeeded(a) == succeeded(b) {
                        prop_assert!(a.duration_ms <= b.duration_ms);
                    }
                }
                RankBy::Duration => prop_assert!(a.duration_ms <= b.duration_ms),
                RankBy::Score => {
                    let scored = |r: &RunResult| completed(r) && r.score.is_some();
                    prop_assert!(scored(a) || !scored(b));
                    if scored(a) && scored(b) {
                        prop_assert!(a.score.unwrap() >= b.score.unwrap());
                    }
                }
                RankBy::Output => {
                    prop_assert!(completed(a) || !completed(b));
                    if completed(a) && completed(b) {
                        prop_assert!(a.stdout_len <= b.stdout_len);
                    }
                }
                RankBy::Exit => {
                    let coded = |r: &RunResult| completed(r) && r.exit.is_some();
                    prop_assert!(coded(a) || !coded(b));
                    if coded(a) && coded(b) {
                        prop_assert!(a.exit <= b.exit);
                    }
                }
            }
        }
        // Success rate is the fraction of successes.
        let s = stats(&rs);
        let ok = rs.iter().filter(|r| succeeded(r)).count();
        if !rs.is_empty() {
            prop_assert!((s.success_rate - ok as f64 / rs.len() as f64).abs() < 1e-12);
            prop_assert!(s.min_duration_ms as f64 <= s.mean_duration_ms);
            prop_assert!(s.mean_duration_ms <= s.max_duration_ms as f64);
        }
        // Every pair once, a < b.
        prop_assert_eq!(pairs(&rs).len(), rs.len() * rs.len().saturating_sub(1) / 2);
    }
}

#[test]
fn the_winner_is_the_best_ranked_run_that_exited_0() {
    // Every run failed: no winner, whatever the ranking.
    let failed = vec![run(1, Some(3), 5), run(2, Some(1), 1)];
    for by in [
        RankBy::Default,
        RankBy::Exit,
        RankBy::Duration,
        RankBy::Output,
    ] {
        let r = rank(&failed, by);
        assert_eq!(winner(&failed, &r), None, "{by:?}");
        assert_eq!(decided_by(&failed, &r, by, None), None);
    }
    // Ranked by duration a failed run is first, yet the winner exited 0.
    let rs = vec![run(1, Some(1), 5), run(2, Some(0), 50), run(3, Some(0), 70)];
    let r = rank(&rs, RankBy::Duration);
    assert_eq!(r, vec![1, 2, 3]);
    assert_eq!(winner(&rs, &r), Some(2));
    let why = decided_by(&rs, &r, RankBy::Duration, Some(2)).unwrap();
    assert!(
        why.contains("run 2 50 ms") && why.contains("run 3 70 ms"),
        "{why}"
    );
    // A tie goes to the lower run number, and says so.
    let tie = vec![run(1, Some(0), 9), run(2, Some(0), 9)];
    let r = rank(&tie, RankBy::Default);
    assert_eq!(winner(&tie, &r), Some(1));
    let why = decided_by(&tie, &r, RankBy::Default, Some(1)).unwrap();
    assert!(
        why.contains("tie with run 2") && why.contains("lower run number"),
        "{why}"
    );
    // The only success.
    let one = vec![run(1, Some(2), 1), run(2, Some(0), 9)];
    let r = rank(&one, RankBy::Default);
    assert_eq!(
        decided_by(&one, &r, RankBy::Default, winner(&one, &r)).unwrap(),
        "run 2 is the only run that exited 0"
    );
}

proptest! {
    /// The winner, when there is one, exited 0, and no run ranked above it did.
    #[test]
    fn a_winner_always_succeeded(exits in proptest::collection::vec(proptest::option::of(0i32..3), 1..6),
                                 by in 0u8..4) {
        let rs: Vec<RunResult> = exits.iter().enumerate()
            .map(|(i, e)| run(i as u32 + 1, *e, (i as u64 * 7) % 5)).collect();
        let by = [RankBy::Default, RankBy::Exit, RankBy::Duration, RankBy::Output][by as usize];
        let r = rank(&rs, by);
        let w = winner(&rs, &r);
        let any_ok = rs.iter().any(succeeded);
        prop_assert_eq!(w.is_some(), any_ok);
        if let Some(w) = w {
            prop_assert!(succeeded(&rs[w as usize - 1]));
            let above = r.iter().take_while(|&&n| n != w);
            for n in above {
                prop_assert!(!succeeded(&rs[*n as usize - 1]));
            }
        }
    }
}
