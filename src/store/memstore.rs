//! [`MemStore`]: the in-memory twin of [`super::PackStore`] for tests of the layers
//! above.
//!
//! Owns: objects in a hash map and metadata in a [`MemMeta`]. It keeps the
//! [`ObjectStore`] contract (dedup, kind-checked reads, the object size limit,
//! atomic commits) but nothing is durable and there are no packs.
//!
//! The crash backend of the model tests: a store made by [`MemStore::logging`]
//! keeps every metadata batch it applied, in order, and [`MemStore::prefix`]
//! makes the store a crash after batch k leaves (the first k batches applied,
//! every object kept: a commit makes its puts durable before its batch, so the
//! objects a durable batch names are there).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use super::metastore::{MemMeta, MetaStore};
use super::objects::{ObjectStore, check_object_len};
use super::pack::Kind;
use crate::error::{Error, Result};
use crate::id::ObjectId;
use crate::meta::MetaOp;

type MemObject = (Kind, Arc<Vec<u8>>);

/// In-memory twin of [`super::PackStore`].
#[derive(Default)]
pub struct MemStore {
    objects: RwLock<HashMap<ObjectId, MemObject>>,
    meta: MemMeta,
    /// Every batch applied, when logging (see the module docs).
    log: Option<Mutex<Vec<Vec<MetaOp>>>>,
}

impl MemStore {
    /// An empty store that logs its batches (the crash backend).
    pub fn logging() -> MemStore {
        MemStore {
            log: Some(Mutex::new(Vec::new())),
            ..MemStore::default()
        }
    }

    /// How many batches were applied (0 when not logging).
    pub fn batches(&self) -> usize {
        self.log.as_ref().map_or(0, |l| l.lock().unwrap().len())
    }

    /// The keys batch `k` (from 0) writes, for messages.
    pub fn batch_keys(&self, k: usize) -> Vec<String> {
        let Some(log) = &self.log else {
            return Vec::new();
        };
        log.lock().unwrap()[k]
            .iter()
            .map(|op| match op {
                MetaOp::Put(k, _) => format!("put {}", String::from_utf8_lossy(k)),
                MetaOp::Delete(k) => format!("delete {}", String::from_utf8_lossy(k)),
                MetaOp::Expect(k, _) => format!("expect {}", String::from_utf8_lossy(k)),
            })
            .collect()
    }

    /// The store as a crash right after batch `k` leaves it: the first `k`
    /// batches applied to an empty metadata store, with every object.
    pub fn prefix(&self, k: usize) -> Result<MemStore> {
        let log = self
            .log
            .as_ref()
            .ok_or_else(|| Error::Invalid("this store keeps no batch log".into()))?;
        let batches = log.lock().unwrap()[..k].to_vec();
        let out = MemStore {
            objects: RwLock::new(self.objects.read().unwrap().clone()),
            meta: MemMeta::default(),
            log: Some(Mutex::new(Vec::new())),
        };
        for b in batches {
            out.commit(b)?;
        }
        Ok(out)
    }
}

impl ObjectStore for MemStore {
    fn put(&self, kind: Kind, raw: &[u8]) -> Result<ObjectId> {
        check_object_len(kind, raw.len())?;
        let id = kind.hash(raw);
        self.objects
            .write()
            .unwrap()
            .entry(id)
            .or_insert_with(|| (kind, Arc::new(raw.to_vec())));
        Ok(id)
    }
    fn get(&self, kind: Kind, id: &ObjectId) -> Result<Arc<Vec<u8>>> {
        match self.objects.read().unwrap().get(id) {
            Some((k, v)) if *k == kind => Ok(v.clone()),
            _ => Err(Error::Missing(id.short())),
        }
    }
    fn contains(&self, id: &ObjectId) -> Result<bool> {
        Ok(self.objects.read().unwrap().contains_key(id))
    }
    fn commit(&self, ops: Vec<MetaOp>) -> Result<()> {
        match &self.log {
            None => self.meta.apply(ops),
            Some(log) => {
                let mut log = log.lock().unwrap();
                self.meta.apply(ops.clone())?;
                log.push(ops);
                Ok(())
            }
        }
    }
    fn meta(&self) -> &dyn MetaStore {
        &self.meta
    }
    fn space(&self) -> (u64, u64, u64) {
        (1 << 40, 1 << 40, 1 << 40)
    }
}
