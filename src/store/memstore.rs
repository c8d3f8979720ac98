//! [`MemStore`]: the in-memory twin of [`super::PackStore`] for tests of the layers
//! above.
//!
//! Owns: objects in a hash map and metadata in a [`MemMeta`]. It keeps the
//! [`ObjectStore`] contract (dedup, kind-checked reads, the object size limit,
//! atomic commits) but nothing is durable and there are no packs.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

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
        self.meta.apply(ops)
    }
    fn meta(&self) -> &dyn MetaStore {
        &self.meta
    }
    fn space(&self) -> (u64, u64, u64) {
        (1 << 40, 1 << 40, 1 << 40)
    }
}
