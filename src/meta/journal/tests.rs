//! Journal tests: format round trips, a model test against a `BTreeMap`, damage
//! (flipped bytes, torn tails, damaged snapshots), hostile bytes, file retirement.

use std::path::Path;

use super::format::{self, Header, Kind};
use super::*;

fn key(i: u64) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

/// Batch `g` of the fixed-batch tests: puts its own key, deletes the key of `g - 3`.
fn batch(g: u64) -> Vec<Change> {
    let mut c = vec![Change::Put(key(g), vec![g as u8; 50 + g as usize % 7])];
    if g > 3 {
        c.push(Change::Delete(key(g - 3)));
    }
    c
}

fn apply_model(model: &mut State, changes: &[Change]) {
    load::apply(model, changes.to_vec());
}

fn model_of(gens: impl IntoIterator<Item = u64>) -> State {
    let mut m = State::new();
    for g in gens {
        apply_model(&mut m, &batch(g));
    }
    m
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn flip(path: &Path, offset: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[offset] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// Offset of batch `g`'s record in a segment holding batches `first..` in order.
fn record_offset(first: u64, g: u64) -> usize {
    let mut off = format::HEADER_LEN;
    for i in first..g {
        off += format::RECORD_HEAD_LEN + format::encode_changes(&batch(i)).len();
    }
    off
}

/// A journal started empty at generation 0 with batches `1..=n` appended in order.
fn journal_with(dir: &Path, n: u64) -> Journal {
    let j = Journal::start(dir, 0, &State::new()).unwrap();
    for g in 1..=n {
        j.append(g, &batch(g)).unwrap();
    }
    j
}

fn big_state(pairs: u64, value_len: usize) -> State {
    (0..pairs)
        .map(|i| (key(1_000_000 + i), vec![i as u8; value_len]))
        .collect()
}

#[test]
fn header_and_changes_round_trip() {
    let h = Header {
        kind: Kind::Segment,
        number: 7,
        generation: 1 << 40,
    };
    assert_eq!(Header::decode(&h.encode(), Kind::Segment), Ok(h));
    assert!(Header::decode(&h.encode(), Kind::Snapshot).is_err());
    let mut bad = h.encode();
    bad[20] ^= 1;
    assert!(Header::decode(&bad, Kind::Segment).is_err());
    let changes = vec![
        Change::Put(b"a".to_vec(), vec![]),
        Change::Delete(vec![]),
        Change::Put(vec![], b"v".to_vec()),
    ];
    assert_eq!(
        format::decode_changes(&format::encode_changes(&changes)),
        Ok(changes)
    );
}

#[test]
fn names_parse_and_reject() {
    assert_eq!(format::file_name(Kind::Segment, 3), "seg-00000003.tfj");
    assert_eq!(
        format::parse_name("snap-00000012.tfs"),
        Some((Kind::Snapshot, 12))
    );
    assert_eq!(
        format::parse_name("seg-123456789.tfj"),
        Some((Kind::Segment, 123456789))
    );
    for bad in [
        "seg-.tfj",
        "seg-0001.tfs",
        "snap-00000001.tfs.tmp",
        "seg-+1.tfj",
        "seg-99999999999999999999.tfj",
    ] {
        assert_eq!(format::parse_name(bad), None, "{bad}");
    }
}

#[test]
fn huge_counts_and_lengths_are_damage_not_allocation() {
    // A count of 4 billion changes in 4 bytes: refused without reserving anything.
    assert!(format::decode_changes(&u32::MAX.to_le_bytes()).is_err());
    let mut p = 1u32.to_le_bytes().to_vec();
    p.push(1);
    p.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(format::decode_changes(&p).is_err());

    let dir = tempfile::tempdir().unwrap();
    drop(journal_with(dir.path(), 2));
    let seg = dir.path().join("seg-00000001.tfj");
    let off = record_offset(1, 2);
    let mut b = std::fs::read(&seg).unwrap();
    b[off + 4..off + 8].copy_from_slice(&(200u32 << 20).to_le_bytes());
    std::fs::write(&seg, &b).unwrap();
    let l = load(dir.path()).unwrap().unwrap();
    assert_eq!((l.generation, l.newest), (1, 1));
    assert!(
        l.damaged[0].contains("runs past the end"),
        "{:?}",
        l.damaged
    );

    let snap = dir.path().join("snap-00000001.tfs");
    let mut b = std::fs::read(&snap).unwrap();
    b[format::HEADER_LEN + 4..format::HEADER_LEN + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&snap, &b).unwrap();
    let err = load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("snap-00000001.tfs") && err.contains("limit"),
        "{err}"
    );
}

#[test]
fn no_journal_is_none_and_no_whole_snapshot_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    assert!(load(&dir.path().join("missing")).unwrap().is_none());
    assert!(load(dir.path()).unwrap().is_none());
    std::fs::write(dir.path().join("unrelated"), b"x").unwrap();
    std::fs::write(dir.path().join("snap-00000001.tfs.tmp"), b"x").unwrap();
    assert!(load(dir.path()).unwrap().is_none());

    drop(journal_with(dir.path(), 3));
    std::fs::remove_file(dir.path().join("snap-00000001.tfs")).unwrap();
    let err = load(dir.path()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }));
    assert!(
        err.to_string()
            .contains("no snapshot file, only segments seg-00000001"),
        "{err}"
    );
}

#[test]
fn flipped_middle_record_loses_exactly_that_batch() {
    let dir = tempfile::tempdir().unwrap();
    drop(journal_with(dir.path(), 10));
    let off = record_offset(1, 5);
    flip(
        &dir.path().join("seg-00000001.tfj"),
        off + format::RECORD_HEAD_LEN + 6,
    );
    let l = load(dir.path()).unwrap().unwrap();
    assert_eq!(l.state, model_of((1..=10).filter(|g| *g != 5)));
    assert_eq!((l.generation, l.newest), (4, 10));
    assert_eq!(l.damaged.len(), 2, "{:?}", l.damaged);
    assert!(l.damaged[0].starts_with(&format!(
        "seg-00000001.tfj offset {off}: record checksum mismatch"
    )));
    assert_eq!(l.damaged[1], "generation 5 missing");
    assert_eq!(l.source, "snap-00000001.tfs (generation 0) + seg-00000001");
}

#[test]
fn torn_tail_keeps_the_whole_records() {
    for cut in [1, format::RECORD_HEAD_LEN - 1, format::RECORD_HEAD_LEN + 3] {
        let dir = tempfile::tempdir().unwrap();
        drop(journal_with(dir.path(), 10));
        let off = record_offset(1, 10);
        truncate(&dir.path().join("seg-00000001.tfj"), (off + cut) as u64);
        let l = load(dir.path()).unwrap().unwrap();
        assert_eq!(l.state, model_of(1..=9));
        assert_eq!((l.generation, l.newest, l.last_segment), (9, 9, 1));
        assert_eq!(l.damaged.len(), 1);
        assert!(
            l.damaged[0].starts_with(&format!(
                "seg-00000001.tfj offset {off}: torn tail of {cut} bytes"
            )),
            "{:?}",
            l.damaged
        );
    }
}

#[test]
fn damaged_newest_snapshot_falls_back_to_the_older_one() {
    // Three entry records of ~1 MiB: damage at the start, inside and at the end.
    let base = big_state(3000, 1000);
    let damage: [&dyn Fn(&Path); 5] = [
        &|p: &Path| flip(p, 9),
        &|p: &Path| flip(p, format::HEADER_LEN + 2),
        &|p: &Path| flip(p, 1_500_000),
        &|p: &Path| truncate(p, std::fs::metadata(p).unwrap().len() - 1),
        &|p: &Path| truncate(p, 2_000_000),
    ];
    for (i, damage) in damage.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::start(dir.path(), 0, &base).unwrap();
        let mut model = base.clone();
        for g in 1..=8 {
            j.append(g, &batch(g)).unwrap();
            apply_model(&mut model, &batch(g));
            if g == 5 {
                j.rotate(5, &model).unwrap();
            }
        }
        drop(j);
        damage(&dir.path().join("snap-00000002.tfs"));
        let l = load(dir.path()).unwrap().unwrap();
        assert_eq!(l.state, model, "damage {i}");
        assert_eq!((l.generation, l.newest), (8, 8));
        assert_eq!(
            l.source,
            "snap-00000001.tfs (generation 0) + seg-00000001..seg-00000002"
        );
        assert_eq!(l.damaged.len(), 1, "{:?}", l.damaged);
        assert!(
            l.damaged[0].starts_with("snap-00000002.tfs damaged: "),
            "{:?}",
            l.damaged
        );
        assert!(l.damaged[0].ends_with("fell back to snap-00000001.tfs"));

        damage(&dir.path().join("snap-00000001.tfs"));
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("no whole snapshot") && err.contains("snap-00000001.tfs damaged"),
            "{err}"
        );
    }
}

#[test]
fn rotate_carries_records_above_its_generation() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::start(dir.path(), 0, &State::new()).unwrap();
    j.append(1, &batch(1)).unwrap();
    j.append(3, &batch(3)).unwrap();
    j.rotate(1, &model_of([1])).unwrap();
    j.append(2, &batch(2)).unwrap();
    j.append(4, &batch(4)).unwrap();
    drop(j);
    // Only the new snapshot and segment: batch 3 must have been copied into segment 2.
    for old in ["snap-00000001.tfs", "seg-00000001.tfj"] {
        std::fs::remove_file(dir.path().join(old)).unwrap();
    }
    let l = load(dir.path()).unwrap().unwrap();
    assert_eq!(l.state, model_of(1..=4));
    assert_eq!((l.generation, l.newest), (4, 4));
    assert!(l.damaged.is_empty(), "{:?}", l.damaged);
}

#[test]
fn start_retires_old_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let j = journal_with(d, 3);
    j.rotate(3, &model_of(1..=3)).unwrap();
    assert_eq!(
        names(d),
        [
            "seg-00000001.tfj",
            "seg-00000002.tfj",
            "snap-00000001.tfs",
            "snap-00000002.tfs"
        ]
    );
    drop(j);
    let j = Journal::resume(d, &load(d).unwrap().unwrap()).unwrap();
    j.append(4, &batch(4)).unwrap();
    j.rotate(4, &model_of(1..=4)).unwrap();
    // Keeps snapshot 2 (the previous) and segments 2, 3; snapshot and segment 1 go.
    assert_eq!(
        names(d),
        [
            "seg-00000002.tfj",
            "seg-00000003.tfj",
            "seg-00000004.tfj",
            "snap-00000002.tfs",
            "snap-00000004.tfs"
        ]
    );
    drop(j);

    std::fs::write(d.join("snap-00000009.tfs.tmp"), b"junk").unwrap();
    std::fs::write(d.join("other.tmp"), b"junk").unwrap();
    drop(Journal::start(d, 4, &model_of(1..=4)).unwrap());
    assert_eq!(
        names(d),
        [
            "seg-00000004.tfj",
            "seg-00000005.tfj",
            "snap-00000004.tfs",
            "snap-00000005.tfs"
        ]
    );

    // A damaged newest snapshot is not the fallback: start keeps the older whole one.
    flip(&d.join("snap-00000005.tfs"), 50);
    drop(Journal::start(d, 4, &model_of(1..=4)).unwrap());
    assert_eq!(
        names(d),
        [
            "seg-00000004.tfj",
            "seg-00000005.tfj",
            "seg-00000006.tfj",
            "snap-00000004.tfs",
            "snap-00000005.tfs",
            "snap-00000006.tfs"
        ]
    );
    let l = load(d).unwrap().unwrap();
    assert_eq!(
        (l.state, l.generation, l.last_segment),
        (model_of(1..=4), 4, 6)
    );
}

#[test]
fn tmp_files_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    drop(journal_with(dir.path(), 3));
    std::fs::write(dir.path().join("snap-00000007.tfs.tmp"), b"garbage").unwrap();
    std::fs::write(dir.path().join("seg-00000008.tfj.tmp"), vec![0xAB; 100]).unwrap();
    let l = load(dir.path()).unwrap().unwrap();
    assert_eq!(
        (l.state, l.generation, l.last_segment),
        (model_of(1..=3), 3, 1)
    );
    assert!(l.damaged.is_empty(), "{:?}", l.damaged);
}

#[test]
fn due_by_size_and_by_segment_count() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal_with(dir.path(), 1);
    assert!(!j.due());
    j.set_target(400);
    for g in 2..=4 {
        j.append(g, &batch(g)).unwrap();
    }
    assert!(j.due());
    j.rotate(4, &model_of(1..=4)).unwrap();
    assert!(!j.due());
    drop(j);
    let mut l = load(dir.path()).unwrap().unwrap();
    for i in 0..63 {
        let j = Journal::resume(dir.path(), &l).unwrap();
        assert_eq!(j.due(), i == 62, "resume {i}");
        l.last_segment += 1;
    }
}

#[test]
fn concurrent_appends_all_replay() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Journal>();
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::start(dir.path(), 0, &State::new()).unwrap();
    std::thread::scope(|s| {
        for t in 1..=4u64 {
            let j = &j;
            s.spawn(move || (0..25).for_each(|i| j.append(t + 4 * i, &batch(t + 4 * i)).unwrap()));
        }
    });
    drop(j);
    let l = load(dir.path()).unwrap().unwrap();
    assert_eq!(
        (l.state, l.generation, l.newest),
        (model_of(1..=100), 100, 100)
    );
}

/// Rough cost of `start` and `load` for 100k pairs of 100-byte values (debug build):
/// `cargo test --lib meta::journal::tests::start_cost -- --ignored --nocapture`.
#[test]
#[ignore]
fn start_cost_100k_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let state = big_state(100_000, 100);
    let t = std::time::Instant::now();
    drop(Journal::start(dir.path(), 1, &state).unwrap());
    let started = t.elapsed();
    let t = std::time::Instant::now();
    let l = load(dir.path()).unwrap().unwrap();
    let size = std::fs::metadata(dir.path().join("snap-00000001.tfs"))
        .unwrap()
        .len();
    eprintln!(
        "start {started:?}, load {:?}, snapshot {size} bytes",
        t.elapsed()
    );
    assert_eq!(l.state, state);
}
