//! A bounded cache of decoded objects, shared by every session of a store.
//!
//! Invariant: it only ever holds bytes that passed hash verification.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::id::ObjectId;

/// Byte-bounded FIFO cache with a second chance for entries hit since insertion.
pub struct ObjectCache {
    inner: Mutex<Inner>,
    capacity: usize,
}

struct Inner {
    map: HashMap<ObjectId, (Arc<Vec<u8>>, bool)>,
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
            capacity,
        }
    }

    /// Look up an object.
    pub fn get(&self, id: &ObjectId) -> Option<Arc<Vec<u8>>> {
        let mut g = self.inner.lock().unwrap();
        g.map.get_mut(id).map(|(v, hit)| {
            *hit = true;
            v.clone()
        })
    }

    /// Insert a verified object.
    pub fn insert(&self, id: ObjectId, data: Arc<Vec<u8>>) {
        if data.len() > self.capacity / 4 {
            return;
        }
        let mut g = self.inner.lock().unwrap();
        if g.map.contains_key(&id) {
            return;
        }
        g.bytes += data.len();
        g.map.insert(id, (data, false));
        g.order.push_back(id);
        while g.bytes > self.capacity {
            let Some(victim) = g.order.pop_front() else {
                break;
            };
            let second_chance = match g.map.get_mut(&victim) {
                Some((_, hit)) if *hit => {
                    *hit = false;
                    true
                }
                _ => false,
            };
            if second_chance {
                g.order.push_back(victim);
            } else if let Some((v, _)) = g.map.remove(&victim) {
                g.bytes -= v.len();
            }
        }
    }

    /// Drop an entry (after a verification failure elsewhere, or in tests).
    pub fn remove(&self, id: &ObjectId) {
        let mut g = self.inner.lock().unwrap();
        if let Some((v, _)) = g.map.remove(id) {
            g.bytes -= v.len();
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
}
