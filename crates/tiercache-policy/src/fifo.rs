//! FIFO: evict in insertion order; a hit changes nothing. The baseline every queue-based policy
//! (CLOCK, S3-FIFO) refines.

use tiercache_core::{Capacity, Key, Request};

use crate::frame::Eviction;
use crate::queue::{expected_objects, Queue};

pub struct Fifo {
    queue: Queue,
}

impl crate::frame::Registered for Fifo {
    type Config = ();
    const QUIET_HITS: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<Fifo, crate::error::PolicyError> {
        Ok(Fifo::new(capacity))
    }
}

impl Fifo {
    pub fn new(capacity: Capacity) -> Fifo {
        Fifo { queue: Queue::new(capacity.unit, expected_objects(capacity)) }
    }
}

impl Eviction for Fifo {
    fn peek(&self, key: Key) -> Option<u32> {
        self.queue.find(key).map(|node| self.queue.arena.get(node).size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.queue.map.prefetch(key);
    }

    #[inline]
    fn access(&mut self, req: &Request) -> Option<u32> {
        self.queue.find(req.key).map(|node| self.queue.arena.get(node).size)
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
        "fifo".into()
    }
}
