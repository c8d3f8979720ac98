//! The verdicts of the check at open, and journaling under concurrent batches.

use super::*;
use crate::meta::{MetaOp, journal};

fn put(k: &str, v: &str) -> MetaOp {
    MetaOp::Put(k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

/// A database in `d/meta` with its journal in `d/journal`, checked and attached.
fn open(d: &Path) -> (MetaDb, Verdict) {
    let db = MetaDb::open(&d.join("meta")).unwrap();
    let v = db.attach_journal(&d.join("journal")).unwrap();
    (db, v)
}

#[test]
fn a_new_store_starts_a_journal_and_a_reopen_resumes_it() {
    let d = tempfile::tempdir().unwrap();
    let (db, v) = open(d.path());
    assert!(matches!(v, Verdict::Started { .. }), "{v:?}");
    db.apply(vec![put("s/a", "1"), put("r/main", "x")]).unwrap();
    db.apply(vec![MetaOp::Delete(b"s/a".to_vec())]).unwrap();
    // The object index is not journaled and takes no generation.
    db.apply(vec![MetaOp::Put(b"o/1".to_vec(), b"i".to_vec())])
        .unwrap();
    assert_eq!(db.stored_gen().unwrap(), 2);
    drop(db);
    let (db, v) = open(d.path());
    assert_eq!(v, Verdict::Resumed { generation: 2 });
    let l = journal::load(&d.path().join("journal")).unwrap().unwrap();
    assert_eq!(l.state, db.journaled_pairs().unwrap());
    assert_eq!(l.generation, 2);
}

#[test]
fn a_database_older_than_its_journal_is_damaged() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = open(d.path());
    db.apply(vec![put("s/a", "1")]).unwrap();
    drop(db);
    let old = d.path().join("meta.old");
    copy_dir(&d.path().join("meta"), &old);
    let (db, _) = open(d.path());
    db.apply(vec![put("s/b", "2")]).unwrap();
    drop(db);
    std::fs::remove_dir_all(d.path().join("meta")).unwrap();
    std::fs::rename(&old, d.path().join("meta")).unwrap();
    let (_db, v) = open(d.path());
    let Verdict::Damaged(why) = v else {
        panic!("{v:?}")
    };
    assert!(
        why.contains("generation 1") && why.contains("generation 2"),
        "{why}"
    );
}

#[test]
fn a_record_changed_behind_the_journals_back_is_damage() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = open(d.path());
    db.apply(vec![put("s/a", "1")]).unwrap();
    drop(db);
    // A write that bypassed the journal (as a rolled-back page would look).
    let raw = sled::open(d.path().join("meta")).unwrap();
    raw.insert(b"s/a", b"other".to_vec()).unwrap();
    raw.flush().unwrap();
    drop(raw);
    let (_db, v) = open(d.path());
    let Verdict::Damaged(why) = v else {
        panic!("{v:?}")
    };
    assert!(
        why.contains("1 record(s) differ") && why.contains("s/a"),
        "{why}"
    );
}

#[test]
fn a_missing_or_lagging_journal_is_anchored_again() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = open(d.path());
    db.apply(vec![put("s/a", "1")]).unwrap();
    drop(db);
    std::fs::remove_dir_all(d.path().join("journal")).unwrap();
    let (db, v) = open(d.path());
    assert!(
        matches!(&v, Verdict::Started { reason } if reason.contains("missing")),
        "{v:?}"
    );
    // A batch durable in sled but never appended (a crash between the two syncs).
    db.journal.detach("test");
    db.apply(vec![put("s/b", "2")]).unwrap();
    drop(db);
    let (db, v) = open(d.path());
    assert!(
        matches!(&v, Verdict::Started { reason } if reason.contains("behind")),
        "{v:?}"
    );
    let l = journal::load(&d.path().join("journal")).unwrap().unwrap();
    assert_eq!(l.state, db.journaled_pairs().unwrap());
    assert_eq!(l.generation, 2);
}

/// Concurrent writers with rotations in between: the journal replays to exactly
/// the database, at its generation.
#[test]
fn concurrent_batches_and_rotations_replay_to_the_database() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = open(d.path());
    db.journal.current().unwrap().set_target(4096);
    let db = Arc::new(db);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..60 {
                    let k = format!("s/{t}-{}", i % 7);
                    db.apply(vec![put(&k, &format!("{i:0200}")), put("r/last", &k)])
                        .unwrap();
                    if i % 9 == 0 {
                        db.apply(vec![MetaOp::Delete(k.into_bytes())]).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let want = db.journaled_pairs().unwrap();
    let generation = db.stored_gen().unwrap();
    assert_eq!(generation, 4 * (60 + 7));
    drop(db);
    let l = journal::load(&d.path().join("journal")).unwrap().unwrap();
    assert_eq!(l.generation, generation, "{:?}", l.damaged);
    assert_eq!(l.state, want);
    assert!(l.source.contains("snap"), "{}", l.source);
    let (_db, v) = open(d.path());
    assert_eq!(v, Verdict::Resumed { generation });
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), t).unwrap();
        }
    }
}
