//! A bounded cache of decoded objects, shared by every session of a store.
//!
//! Invariants: it only ever holds bytes that passed hash verification; a decoded
//! form (see [`Decoded`]) is kept only beside the bytes it was decoded from, and
//! leaves with them, so it never outlives a removal after a verification failure.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::id::ObjectId;

/// Byte-bounded FIFO cache with a second chance for entries hit since insertion.
pub struct ObjectCache {
    inner: Mutex<Inner>,
    capacity: AtomicUsize,
}

/// An object decoded into its in-memory form (a directory node's entries): a
/// pure function of its verified bytes, so kept for as long as they are.
pub type Decoded = Arc<dyn Any + Send + Sync>;

struct Slot {
    data: Arc<Vec<u8>>,
    /// Hit since inserted (or since its last second chance).
    hit: bool,
    /// The decoded form and the bytes it is counted as.
    decoded: Option<(Decoded, usize)>,
}

impl Slot {
    fn weight(&self) -> usize {
        self.data.len() + self.decoded.as_ref().map_or(0, |(_, w)| *w)
    }
}

struct Inner {
    map: HashMap<ObjectId, Slot>,
    order: VecDeque<ObjectId>,
    bytes: usize,
}

impl ObjectCache {
    /// A cache holding at most `capacity` bytes of object data.
    pub fn new(capacity: usize) -> Self {
        ObjectCache {
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                order: VecDeque::new(),
                bytes: 0,
            }),
            capacity: AtomicUsize::new(capacity),
        }
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Change the capacity (the store's `read_cache_bytes`), evicting down to it.
    pub fn set_capacity(&self, bytes: usize) {
        self.capacity.store(bytes, Ordering::Relaxed);
        let mut g = self.inner.lock().unwrap();
        self.evict(&mut g);
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.inner.lock().unwrap().bytes
    }

    /// Look up an object.
    pub fn get(&self, id: &ObjectId) -> Option<Arc<Vec<u8>>> {
        let mut g = self.inner.lock().unwrap();
        g.map.get_mut(id).map(|s| {
            s.hit = true;
            s.data.clone()
        })
    }

    /// The decoded form kept beside an object's bytes.
    pub fn get_decoded(&self, id: &ObjectId) -> Option<Decoded> {
        let mut g = self.inner.lock().unwrap();
        let s = g.map.get_mut(id)?;
        s.hit = true;
        s.decoded.as_ref().map(|(d, _)| d.clone())
    }

    /// Keep `decoded` (counted as `weight` bytes) beside the bytes of `id`, when
    /// they are held.
    pub fn set_decoded(&self, id: &ObjectId, decoded: Decoded, weight: usize) {
        let mut g = self.inner.lock().unwrap();
        let Some(s) = g.map.get_mut(id) else {
            return;
        };
        if s.decoded.is_some() {
            return;
        }
        s.decoded = Some((decoded, weight));
        g.bytes += weight;
        self.evict(&mut g);
    }

    /// Insert a verified object.
    pub fn insert(&self, id: ObjectId, data: Arc<Vec<u8>>) {
        if data.len() > self.capacity() / 4 {
            return;
        }
        let mut g = self.inner.lock().unwrap();
        if g.map.contains_key(&id) {
            return;
        }
        g.bytes += data.len();
        g.map.insert(
            id,
            Slot {
                data,
                hit: false,
                decoded: None,
            },
        );
        g.order.push_back(id);
        self.evict(&mut g);
    }

    /// Evict (FIFO, a second chance for entries hit) down to the capacity.
    fn evict(&self, g: &mut Inner) {
        while g.bytes > self.capacity() {
            let Some(victim) = g.order.pop_front() else {
                break;
            };
            let second_chance = match g.map.get_mut(&victim) {
                Some(s) if s.hit => {
                    s.hit = false;
                    true
                }
                _ => false,
            };
            if second_chance {
                g.order.push_back(victim);
            } else if let Some(s) = g.map.remove(&victim) {
                g.bytes -= s.weight();
            }
        }
    }

    /// Drop an entry (after a verification failure elsewhere, or in tests).
    pub fn remove(&self, id: &ObjectId) {
        let mut g = self.inner.lock().unwrap();
        if let Some(s) = g.map.remove(id) {
            g.bytes -= s.weight();
            g.order.retain(|x| x != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_capacity() {
        let c = ObjectCache::new(1000);
        for i in 0..100u8 {
            c.insert(ObjectId([i; 32]), Arc::new(vec![0; 100]));
        }
        let g = c.inner.lock().unwrap();
        assert!(g.bytes <= 1000);
        assert_eq!(g.map.len(), g.order.len());
    }

    #[test]
    fn decoded_forms_count_and_leave_with_their_bytes() {
        let c = ObjectCache::new(1000);
        let id = ObjectId([1; 32]);
        // Nothing is kept beside bytes the cache does not hold.
        c.set_decoded(&id, Arc::new(7u32), 50);
        assert!(c.get_decoded(&id).is_none());
        c.insert(id, Arc::new(vec![0; 100]));
        c.set_decoded(&id, Arc::new(7u32), 50);
        let d = c.get_decoded(&id).unwrap();
        assert_eq!(d.downcast_ref::<u32>(), Some(&7));
        assert_eq!(c.inner.lock().unwrap().bytes, 150);
        c.remove(&id);
        assert!(c.get_decoded(&id).is_none());
        assert_eq!(c.inner.lock().unwrap().bytes, 0);
        // Decoded weight counts toward the capacity.
        for i in 0..20u8 {
            let id = ObjectId([i; 32]);
            c.insert(id, Arc::new(vec![0; 40]));
            c.set_decoded(&id, Arc::new(i), 60);
        }
        let g = c.inner.lock().unwrap();
        assert!(g.bytes <= 1000);
        assert_eq!(g.map.len(), g.order.len());
    }
}
