//! LRU: a hit moves the key to the head; the tail is evicted. The ARC paper's baseline (Megiddo
//! and Modha, FAST'03, Table VII) and the per-tier list of the Kassa et al. hybrid cache.

use tiercache_core::{Capacity, Key, Request};

use crate::frame::Eviction;
use crate::queue::{expected_objects, Queue};

pub struct Lru {
    queue: Queue,
}

impl crate::frame::Registered for Lru {
    type Config = ();
    const QUIET_HITS: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<Lru, crate::error::PolicyError> {
        Ok(Lru::new(capacity))
    }
}

impl Lru {
    pub fn new(capacity: Capacity) -> Lru {
        Lru { queue: Queue::new(capacity.unit, expected_objects(capacity)) }
    }
}

impl Eviction for Lru {
    fn peek(&self, key: Key) -> Option<u32> {
        self.queue.find(key).map(|node| self.queue.arena.get(node).size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.queue.map.prefetch(key);
    }

    #[inline]
    fn access(&mut self, req: &Request) -> Option<u32> {
        let node = self.queue.find(req.key)?;
        self.queue.arena.move_to_front(&mut self.queue.list, node);
        Some(self.queue.arena.get(node).size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        self.queue.pop_oldest()
    }

    fn insert(&mut self, req: &Request) {
        self.queue.push(req.key, req.size, 0);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        self.queue.remove(key)
    }

    fn used(&self) -> u64 {
        self.queue.used()
    }

    fn resident(&self) -> u64 {
        self.queue.resident()
    }

    fn label(&self) -> String {
        "lru".into()
    }
}
