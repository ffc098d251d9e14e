//! SIEVE (Zhang et al., "SIEVE is Simpler than LRU: an Efficient Turn-Key Eviction Algorithm for
//! Web Caches", NSDI'24): one FIFO queue, a visited bit per key and a hand. New keys go to the
//! head; a hit only sets the key's bit. To evict, the hand walks from where it stopped towards
//! the head, clearing set bits, and evicts the first key whose bit is clear; it wraps from the
//! head to the tail. Unlike CLOCK, a survivor stays where it is instead of moving to the head,
//! so new keys near the head are the first to go when they are not used again (the "lazy
//! promotion, quick demotion" of the paper, section 3).
//!
//! The hand's place after an eviction is the evicted key's newer neighbour; a removed key under
//! the hand passes it on the same way (as libCacheSim's `Sieve`, which the paper's authors
//! maintain, and with which this agrees exactly: `tests/peer_libcachesim.rs`).

use tiercache_core::{Capacity, Key, Request};

use crate::frame::Eviction;
use crate::queue::{expected_objects, Queue};

pub struct Sieve {
    queue: Queue,
    /// The next key the hand looks at; `None` means the tail.
    hand: Option<u32>,
}

impl crate::frame::Registered for Sieve {
    type Config = ();
    const QUIET_HITS: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<Sieve, crate::error::PolicyError> {
        Ok(Sieve::new(capacity))
    }
}

const VISITED: u32 = 1;

impl Sieve {
    pub fn new(capacity: Capacity) -> Sieve {
        Sieve { queue: Queue::new(capacity.unit, expected_objects(capacity)), hand: None }
    }

    /// Unlinks and frees `node`; the hand, if on it, moves to its newer neighbour.
    fn drop_node(&mut self, node: u32) -> (Key, u32) {
        if self.hand == Some(node) {
            self.hand = self.queue.arena.newer(node);
        }
        let (key, size) = (self.queue.arena.get(node).key, self.queue.arena.get(node).size);
        self.queue.arena.unlink(&mut self.queue.list, node);
        self.queue.arena.release(node);
        self.queue.map.remove(key);
        (key, size)
    }
}

impl Eviction for Sieve {
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
        let node = self.queue.arena.get_mut(node);
        node.aux = VISITED;
        Some(node.size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let tail = self.queue.arena.back(&self.queue.list)?;
        let mut at = self.hand.unwrap_or(tail);
        while self.queue.arena.get(at).aux == VISITED {
            self.queue.arena.get_mut(at).aux = 0;
            at = self.queue.arena.newer(at).unwrap_or(tail);
        }
        self.hand = Some(at);
        Some(self.drop_node(at))
    }

    fn insert(&mut self, req: &Request) {
        self.queue.push(req.key, req.size, 0);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let node = self.queue.find(key)?;
        Some(self.drop_node(node).1)
    }

    fn used(&self) -> u64 {
        self.queue.used()
    }

    fn resident(&self) -> u64 {
        self.queue.resident()
    }

    fn label(&self) -> String {
        "sieve".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_core::Unit;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    fn keys(sieve: &Sieve) -> Vec<Key> {
        sieve.queue.arena.iter(&sieve.queue.list).map(|n| n.key).collect()
    }

    /// The paper's Figure 3 in small: survivors stay in place, the hand remembers where it
    /// stopped, and a new key in front of the hand is evicted first when it is not used.
    #[test]
    fn the_hand_clears_bits_in_place_and_resumes_where_it_stopped() {
        let mut sieve = Sieve::new(Capacity { amount: 4, unit: Unit::Objects });
        for key in 1..=4 {
            sieve.insert(&read(key));
        }
        sieve.access(&read(1));
        sieve.access(&read(3));
        // Tail 1 is visited (cleared, kept), 2 is not: evicted, the hand stops at 3.
        assert_eq!(sieve.evict(&read(5)), Some((2, 1)));
        assert_eq!(keys(&sieve), vec![4, 3, 1]);
        sieve.insert(&read(5));
        // From 3 (visited: cleared) to 4, unvisited: evicted; the hand stops at 5.
        assert_eq!(sieve.evict(&read(6)), Some((4, 1)));
        assert_eq!(keys(&sieve), vec![5, 3, 1]);
        // 5 is new and unused: the first to go, though older keys are unvisited too.
        assert_eq!(sieve.evict(&read(7)), Some((5, 1)));
        // The hand ran off the head and wraps to the tail: 1, unvisited since it was cleared.
        assert_eq!(sieve.evict(&read(8)), Some((1, 1)));
        assert_eq!(keys(&sieve), vec![3]);
    }

    #[test]
    fn removing_the_key_under_the_hand_passes_the_hand_on() {
        let mut sieve = Sieve::new(Capacity { amount: 3, unit: Unit::Objects });
        for key in 1..=3 {
            sieve.insert(&read(key));
        }
        sieve.access(&read(2));
        assert_eq!(sieve.evict(&read(4)), Some((1, 1)));
        assert_eq!(sieve.remove(2), Some(1), "2 was under the hand");
        sieve.access(&read(3));
        sieve.insert(&read(4));
        // The hand moved to 3 (visited: cleared), then 4, unvisited.
        assert_eq!(sieve.evict(&read(5)), Some((4, 1)));
    }
}
