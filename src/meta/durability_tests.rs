//! Tests of the durability of metadata batches (sled's files covered by our syncs).

use super::*;

/// Our syncs cover sled's files by their names (sled 0.34.7's layout): if a sled
/// upgrade moved them, this fails instead of the syncs silently missing them.
#[test]
fn syncs_cover_sleds_files() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("meta");
    let db = MetaDb::open(&dir).unwrap();
    for f in ["db", "conf", "blobs"] {
        assert!(dir.join(f).exists(), "sled has no {f}");
    }
    assert!(db.files.lock().unwrap().blobs.is_empty());
    // A value above sled's blob threshold (segment 512 KiB / 4) goes to a blob
    // file, which sled writes without any sync: the commit must have seen it.
    db.apply(vec![MetaOp::Put(b"s/big".to_vec(), vec![7u8; 300 << 10])])
        .unwrap();
    let blobs = db.files.lock().unwrap().blobs.clone();
    assert!(!blobs.is_empty(), "the blob sled wrote was not synced");
    for b in blobs.keys() {
        assert!(dir.join("blobs").join(b).is_file());
    }
    assert_eq!(db.get(b"s/big").unwrap().unwrap().len(), 300 << 10);
    // The directory's entries were recorded at the last directory fsync.
    assert_eq!(db.files.lock().unwrap().entries, list(&dir).unwrap());
    drop(db);
    let db = MetaDb::open(&dir).unwrap();
    assert_eq!(db.get(b"s/big").unwrap().unwrap().len(), 300 << 10);
}

/// `applied_here` counts this thread's applied batches: not an empty one, not
/// one refused by its precondition, not another thread's.
#[test]
fn applied_here_counts_this_threads_commits() {
    let d = tempfile::tempdir().unwrap();
    let db = Arc::new(MetaDb::open(&d.path().join("meta")).unwrap());
    let n0 = applied_here();
    db.apply(vec![MetaOp::Put(b"s/a".to_vec(), b"1".to_vec())])
        .unwrap();
    assert_eq!(applied_here(), n0 + 1);
    db.apply(Vec::new()).unwrap();
    let refused = db.apply(vec![
        MetaOp::Expect(b"s/a".to_vec(), None),
        MetaOp::Put(b"s/b".to_vec(), b"2".to_vec()),
    ]);
    assert!(matches!(refused, Err(Error::Conflict(_))), "{refused:?}");
    assert_eq!(db.get(b"s/b").unwrap(), None);
    let other = Arc::clone(&db);
    std::thread::spawn(move || {
        other
            .apply(vec![MetaOp::Put(b"s/c".to_vec(), b"3".to_vec())])
            .unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(applied_here(), n0 + 1);
}
