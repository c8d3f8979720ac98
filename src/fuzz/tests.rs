//! The fuzz targets as property tests (what CI runs): seeds, arbitrary and mutated
//! bytes, and the crash regressions.

use super::*;
use proptest::prelude::*;

#[test]
fn seeds_decode_and_round_trip() {
    for t in TARGETS {
        let seeds = (t.seeds)();
        assert!(!seeds.is_empty(), "{} has no seeds", t.name);
        for s in seeds {
            take_accepted();
            (t.run)(&s);
            assert!(
                take_accepted() > 0,
                "{}: seed {s:?} decodes nowhere",
                t.name
            );
        }
    }
}

/// Every input a fuzzer crashed on, kept as `fuzz/regressions/<target>/<what>`
/// once fixed: each must now run clean.
#[test]
fn fuzz_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut n = 0;
    for t in std::fs::read_dir(&dir).expect("fuzz/regressions") {
        let t = t.unwrap().path();
        let name = t.file_name().unwrap().to_str().unwrap().to_string();
        assert!(target(&name).is_some(), "{name}: not a fuzz target");
        for f in std::fs::read_dir(&t).unwrap() {
            let f = f.unwrap().path();
            run(&name, &std::fs::read(&f).unwrap());
            n += 1;
        }
    }
    assert!(n > 0);
}

fn mutate(mut s: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(at, op, b) in edits {
        if s.is_empty() {
            s.push(b);
            continue;
        }
        let at = at % s.len();
        match op % 4 {
            0 => s[at] = b,
            1 => s[at] ^= 1 << (b % 8),
            2 => s.truncate(at),
            _ => s.insert(at, b),
        }
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Arbitrary bytes into every decoder: no panic, typed errors.
    #[test]
    fn arbitrary_bytes(t in 0..TARGETS.len(), bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        (TARGETS[t].run)(&bytes);
    }

    /// Seeds with a few bytes flipped, replaced, inserted or cut: these get past
    /// the magic numbers and reach the field checks.
    #[test]
    fn mutated_seeds(
        t in 0..TARGETS.len(),
        pick in any::<usize>(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6),
    ) {
        let seeds = (TARGETS[t].seeds)();
        let seed = seeds[pick % seeds.len()].clone();
        (TARGETS[t].run)(&mutate(seed, &edits));
    }
}
