//! The metadata-store trait: what the object store, gc, fsck and reachability need
//! of the metadata database.
//!
//! Owns: [`MetaStore`], its implementation for the sled database
//! ([`crate::meta::MetaDb`], which keeps the key layout and durability), and
//! [`MemMeta`], the in-memory twin. One test suite runs on both.
//!
//! Invariants (of every implementation): [`MetaStore::apply`] is atomic (all of a
//! batch or none) and durable before it returns; [`MetaStore::scan`] returns the
//! pairs whose key starts with the prefix, in key order.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::error::Result;
use crate::meta::{KeyRange, MetaDb, MetaOp};

/// A key-value store of metadata with atomic, durable batches.
pub trait MetaStore: Send + Sync {
    /// Read one key.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// All pairs whose key starts with `prefix`, in key order.
    fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// At most `limit` pairs whose key is in `range`, in key order (a bounded read:
    /// finding one record never loads a whole prefix).
    fn range(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// At most `limit` pairs whose key is in `range`, last key first (the newest
    /// records of a log keyed by sequence number).
    fn range_rev(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Apply `ops` atomically and make them durable.
    fn apply(&self, ops: Vec<MetaOp>) -> Result<()>;
}

impl MetaStore for MetaDb {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        MetaDb::get(self, key)
    }
    fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        MetaDb::scan(self, prefix)
    }
    fn range(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        MetaDb::range(self, range, limit)
    }
    fn range_rev(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        MetaDb::range_rev(self, range, limit)
    }
    fn apply(&self, ops: Vec<MetaOp>) -> Result<()> {
        MetaDb::apply(self, ops)
    }
}

/// In-memory twin of the sled database (for tests; nothing survives a drop).
#[derive(Default)]
pub struct MemMeta {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MetaStore for MemMeta {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.map.lock().unwrap().get(key).cloned())
    }
    fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self
            .map
            .lock()
            .unwrap()
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
    fn range(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self
            .map
            .lock()
            .unwrap()
            .range(range.start.clone()..)
            .take_while(|(k, _)| range.contains(k))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
    fn range_rev(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let m = self.map.lock().unwrap();
        let it: Box<dyn DoubleEndedIterator<Item = (&Vec<u8>, &Vec<u8>)>> = match &range.end {
            Some(e) => Box::new(m.range(range.start.clone()..e.clone())),
            None => Box::new(m.range(range.start.clone()..)),
        };
        Ok(it
            .rev()
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
    fn apply(&self, ops: Vec<MetaOp>) -> Result<()> {
        let mut m = self.map.lock().unwrap();
        for op in &ops {
            if let MetaOp::Expect(k, want) = op
                && m.get(k) != want.as_ref()
            {
                return Err(crate::meta::expect_failed(k));
            }
        }
        for op in ops {
            match op {
                MetaOp::Put(k, v) => {
                    m.insert(k, v);
                }
                MetaOp::Delete(k) => {
                    m.remove(&k);
                }
                MetaOp::Expect(..) => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract every metadata store keeps.
    fn suite(m: &dyn MetaStore) {
        assert_eq!(m.get(b"s/a").unwrap(), None);
        m.apply(vec![
            MetaOp::Put(b"s/b".to_vec(), b"2".to_vec()),
            MetaOp::Put(b"s/a".to_vec(), b"1".to_vec()),
            MetaOp::Put(b"r/x".to_vec(), b"x".to_vec()),
            MetaOp::Put(b"s".to_vec(), b"no slash".to_vec()),
        ])
        .unwrap();
        assert_eq!(m.get(b"s/a").unwrap().unwrap(), b"1");
        let s = m.scan(b"s/").unwrap();
        assert_eq!(
            s,
            vec![
                (b"s/a".to_vec(), b"1".to_vec()),
                (b"s/b".to_vec(), b"2".to_vec())
            ]
        );
        // Later ops of a batch win; deletes apply.
        m.apply(vec![
            MetaOp::Put(b"s/a".to_vec(), b"3".to_vec()),
            MetaOp::Delete(b"s/b".to_vec()),
            MetaOp::Put(b"s/a".to_vec(), b"4".to_vec()),
        ])
        .unwrap();
        assert_eq!(
            m.scan(b"s/").unwrap(),
            vec![(b"s/a".to_vec(), b"4".to_vec())]
        );
        assert_eq!(m.scan(b"q/").unwrap(), vec![]);
        m.apply(vec![]).unwrap();
        // (The sled database also holds the generation of its journaled batches.)
        let all: Vec<_> = m.scan(b"").unwrap();
        assert_eq!(
            all.iter()
                .filter(|(k, _)| k != crate::meta::GEN_KEY)
                .count(),
            3
        );
        // Reverse ranges: newest (last) key first, bounded.
        let all = KeyRange::prefix(b"");
        let rev = m.range_rev(&all, 2).unwrap();
        assert_eq!(rev[0].0, b"s/a".to_vec());
        assert_eq!(rev[1].0, b"s".to_vec());
        assert_eq!(m.range_rev(&KeyRange::prefix(b"r/"), 9).unwrap().len(), 1);
        // A failed precondition writes nothing of its batch.
        let e = m.apply(vec![
            MetaOp::Put(b"s/c".to_vec(), b"5".to_vec()),
            MetaOp::Expect(b"s/a".to_vec(), Some(b"3".to_vec())),
        ]);
        assert!(matches!(e, Err(crate::error::Error::Conflict(_))), "{e:?}");
        assert_eq!(m.get(b"s/c").unwrap(), None);
        let e = m.apply(vec![MetaOp::Expect(b"s/a".to_vec(), None)]);
        assert!(matches!(e, Err(crate::error::Error::Conflict(_))), "{e:?}");
        // Met preconditions (a value, an absence) let the batch through.
        m.apply(vec![
            MetaOp::Expect(b"s/a".to_vec(), Some(b"4".to_vec())),
            MetaOp::Expect(b"s/z".to_vec(), None),
            MetaOp::Put(b"s/z".to_vec(), b"z".to_vec()),
        ])
        .unwrap();
        assert_eq!(m.get(b"s/z").unwrap().unwrap(), b"z");
        m.apply(vec![MetaOp::Delete(b"s/z".to_vec())]).unwrap();
    }

    #[test]
    fn mem_meta_suite() {
        suite(&MemMeta::default());
    }

    #[test]
    fn sled_meta_suite_and_reopen() {
        let d = tempfile::tempdir().unwrap();
        {
            let db = MetaDb::open(d.path()).unwrap();
            suite(&db);
        }
        let db = MetaDb::open(d.path()).unwrap();
        assert_eq!(MetaStore::get(&db, b"s/a").unwrap().unwrap(), b"4");
    }
}
