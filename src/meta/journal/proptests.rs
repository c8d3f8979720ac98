//! Property tests: random batches against a `BTreeMap` model, appended out of order
//! with rotations and resumes; hostile and mutated bytes never make `load` panic.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

use super::format::{self, Header, Kind};
use super::*;

/// Some batches appended in `order`; `rotate_after`: rotate after that many appends,
/// at the highest generation with every generation up to it appended.
#[derive(Debug, Clone)]
struct Window {
    batches: Vec<Vec<Change>>,
    order: Vec<usize>,
    rotate_after: Option<usize>,
}

#[derive(Debug, Clone)]
enum Step {
    Window(Window),
    /// Drop the journal, load (checked against the model), resume.
    Resume,
    RotateIfDue,
}

fn change(max_value: usize) -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (0..8u8, vec(any::<u8>(), 0..max_value)).prop_map(|(k, v)| Change::Put(vec![b'k', k], v)),
        1 => (0..8u8).prop_map(|k| Change::Delete(vec![b'k', k])),
    ]
}

fn window() -> impl Strategy<Value = Window> {
    vec(vec(change(2000), 0..5), 1..4)
        .prop_flat_map(|batches| {
            let n = batches.len();
            let order = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
            (Just(batches), order, proptest::option::of(0..=n))
        })
        .prop_map(|(batches, order, rotate_after)| Window {
            batches,
            order,
            rotate_after,
        })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => window().prop_map(Step::Window),
        1 => Just(Step::Resume),
        1 => Just(Step::RotateIfDue),
    ]
}

fn after(state: &State, changes: &[Change]) -> State {
    let mut s = state.clone();
    load::apply(&mut s, changes.to_vec());
    s
}

/// Run `steps`; `states[g]` is the model after generation `g`.
fn run(dir: &Path, steps: &[Step], target: u64) -> std::result::Result<(), TestCaseError> {
    let mut states = vec![State::new()];
    let mut journal = Journal::start(dir, 0, &states[0]).unwrap();
    journal.set_target(target);
    for step in steps {
        let newest = states.len() as u64 - 1;
        match step {
            Step::Window(w) => {
                for b in &w.batches {
                    states.push(after(states.last().unwrap(), b));
                }
                let mut done = BTreeSet::new();
                for (i, &k) in w.order.iter().chain([&usize::MAX]).enumerate() {
                    if w.rotate_after == Some(i) {
                        let g = (newest + 1..).find(|g| !done.contains(g)).unwrap() - 1;
                        journal.rotate(g, &states[g as usize]).unwrap();
                    }
                    if let Some(b) = w.batches.get(k) {
                        let g = newest + 1 + k as u64;
                        journal.append(g, b).unwrap();
                        done.insert(g);
                    }
                }
            }
            Step::Resume => {
                drop(journal);
                let l = load(dir).unwrap().unwrap();
                prop_assert_eq!(&l.state, &states[newest as usize]);
                prop_assert_eq!((l.generation, l.newest), (newest, newest));
                prop_assert!(l.damaged.is_empty(), "{:?}", l.damaged);
                journal = Journal::resume(dir, &l).unwrap();
                journal.set_target(target);
            }
            Step::RotateIfDue if journal.due() => {
                journal.rotate(newest, &states[newest as usize]).unwrap()
            }
            Step::RotateIfDue => {}
        }
    }
    drop(journal);
    let newest = states.len() as u64 - 1;
    let l = load(dir).unwrap().unwrap();
    prop_assert_eq!(&l.state, states.last().unwrap());
    prop_assert_eq!((l.generation, l.newest), (newest, newest));
    prop_assert!(l.damaged.is_empty(), "{:?}", l.damaged);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn model_out_of_order_rotate_resume(steps in vec(step(), 0..30), target in 2000u64..40_000) {
        let dir = tempfile::tempdir().unwrap();
        run(dir.path(), &steps, target)?;
    }
}

/// A piece of a hostile file: noise, magics, huge lengths, records that verify but
/// carry garbage, records that verify and decode.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let magics = [format::BATCH_MAGIC, format::ENTRY_MAGIC, format::END_MAGIC];
    prop_oneof![
        vec(any::<u8>(), 0..64),
        (0..3usize).prop_map(move |m| magics[m].to_vec()),
        any::<u32>().prop_map(|n| n.to_le_bytes().to_vec()),
        (0..3usize, 0..6u64, vec(any::<u8>(), 0..64))
            .prop_map(move |(m, g, p)| format::encode_record(magics[m], g, &p)),
        (0..6u64, vec(change(40), 0..3)).prop_map(|(g, c)| format::encode_record(
            format::BATCH_MAGIC,
            g,
            &format::encode_changes(&c)
        )),
    ]
}

/// A hostile file: kind, number, whether it starts with a valid header, its pieces.
fn hostile_file() -> impl Strategy<Value = (bool, u64, bool, Vec<Vec<u8>>)> {
    (any::<bool>(), 1..4u64, any::<bool>(), vec(piece(), 0..8))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn hostile_bytes_never_panic(files in vec(hostile_file(), 1..4)) {
        let dir = tempfile::tempdir().unwrap();
        for (snapshot, number, with_header, pieces) in files {
            let kind = if snapshot { Kind::Snapshot } else { Kind::Segment };
            let mut bytes = Vec::new();
            if with_header {
                bytes.extend_from_slice(&Header { kind, number, generation: number % 3 }.encode());
            }
            bytes.extend(pieces.concat());
            std::fs::write(dir.path().join(format::file_name(kind, number)), bytes).unwrap();
        }
        if let Ok(Some(l)) = load(dir.path()) {
            prop_assert!(l.generation <= l.newest);
        }
    }
}

/// A valid journal: snapshot 1 (3 pairs), batches 1..=6, snapshot 2 at 6, batches
/// 7..=10, a resumed segment with 11..=12. Its files, by name.
fn template() -> &'static Vec<(String, Vec<u8>)> {
    static FILES: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let batch = |g: u64| {
            vec![
                Change::Put(vec![b'k', g as u8 % 5], vec![g as u8; 30]),
                Change::Delete(vec![b'k', 9]),
            ]
        };
        let mut state: State = (0..3u8).map(|k| (vec![b'k', k], vec![k; 20])).collect();
        let j = Journal::start(dir.path(), 0, &state).unwrap();
        for g in 1..=10 {
            j.append(g, &batch(g)).unwrap();
            load::apply(&mut state, batch(g));
            if g == 6 {
                j.rotate(6, &state).unwrap();
            }
        }
        drop(j);
        let j = Journal::resume(dir.path(), &load(dir.path()).unwrap().unwrap()).unwrap();
        j.append(11, &batch(11)).unwrap();
        j.append(12, &batch(12)).unwrap();
        let mut files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| {
                (
                    e.file_name().into_string().unwrap(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mutated_journal_never_panics(
        flips in vec((any::<Index>(), any::<Index>(), 1..=255u8), 0..6),
        cut in proptest::option::of((any::<Index>(), any::<Index>())),
        insert in proptest::option::of((any::<Index>(), any::<Index>(), piece())),
    ) {
        let mut files = template().clone();
        for (f, at, x) in flips {
            let bytes = &mut files[f.index(5)].1;
            let at = at.index(bytes.len());
            bytes[at] ^= x;
        }
        if let Some((f, at, p)) = insert {
            let bytes = &mut files[f.index(5)].1;
            let at = at.index(bytes.len());
            bytes.splice(at..at, p);
        }
        if let Some((f, len)) = cut {
            let bytes = &mut files[f.index(5)].1;
            bytes.truncate(len.index(bytes.len()));
        }
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in &files {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        if let Ok(Some(l)) = load(dir.path()) {
            prop_assert!(l.generation <= l.newest && l.newest <= 12, "{l:?}");
        }
    }
}

#[test]
fn template_is_whole() {
    let files = template();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "seg-00000001.tfj",
            "seg-00000002.tfj",
            "seg-00000003.tfj",
            "snap-00000001.tfs",
            "snap-00000002.tfs"
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let l = load(dir.path()).unwrap().unwrap();
    assert_eq!((l.generation, l.newest, l.last_segment), (12, 12, 3));
    assert!(l.damaged.is_empty(), "{:?}", l.damaged);
    assert_eq!(
        l.source,
        "snap-00000002.tfs (generation 6) + seg-00000002..seg-00000003"
    );
}
