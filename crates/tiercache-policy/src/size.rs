//! SIZE (Williams, Abrams, Standridge, Abdulla and Fox, "Removal Policies in Network Caches
//! for World-Wide Web Documents", SIGCOMM'96): evict the largest resident document, so that
//! one removal frees the most room and many small documents stay. It ignores recency and
//! frequency altogether, the baseline size-aware policies (GDSF, LHD) are measured against.
//!
//! The paper ranks by size alone. Among keys of one size the order here is a binary max-heap's,
//! as libCacheSim's `Size` keeps its keys (a key enters at the bottom and rises past smaller
//! parents only; one leaving is replaced by the last, which sinks towards the larger child, the
//! left one on a tie, while a child is larger). With the capacity in objects every size counts
//! as 1, as GDSF's does and libCacheSim's: the heap's order alone then decides, so that the
//! first key in is the first to go and after it the latest in. Both agree with libCacheSim
//! exactly (`tests/peer_libcachesim.rs`).
//!
//! Invariants: `rank(heap[i]) >= rank(heap[child])` for both children `2i + 1` and `2i + 2`;
//! `index` maps each resident key to its place in `heap`; `used` is the keys' charge.

use tiercache_core::{Capacity, Key, Request, Unit};

use crate::frame::Eviction;
use crate::index::KeyIndex;
use crate::queue::expected_objects;

#[derive(Clone, Copy, Debug)]
struct Slot {
    key: Key,
    size: u32,
}

pub struct Size {
    heap: Vec<Slot>,
    index: KeyIndex,
    unit: Unit,
    used: u64,
}

impl crate::frame::Registered for Size {
    type Config = ();
    const QUIET_HITS: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<Size, crate::error::PolicyError> {
        let expected = expected_objects(capacity).min(1 << 24);
        Ok(Size {
            heap: Vec::with_capacity(expected),
            index: KeyIndex::with_capacity(expected),
            unit: capacity.unit,
            used: 0,
        })
    }
}

impl Size {
    /// The size the heap orders by: the key's own in bytes, 1 in objects.
    fn rank(&self, slot: &Slot) -> u32 {
        match self.unit {
            Unit::Bytes => slot.size,
            Unit::Objects => 1,
        }
    }

    fn charge(&self, size: u32) -> u64 {
        match self.unit {
            Unit::Bytes => size as u64,
            Unit::Objects => 1,
        }
    }

    fn place(&mut self, at: usize, slot: Slot) {
        self.heap[at] = slot;
        self.index.insert(slot.key, at as u32);
    }

    /// Moves the slot at `at` up while its parent ranks strictly lower.
    fn rise(&mut self, mut at: usize) {
        let moving = self.heap[at];
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.rank(&self.heap[parent]) >= self.rank(&moving) {
                break;
            }
            self.place(at, self.heap[parent]);
            at = parent;
        }
        self.place(at, moving);
    }

    /// Moves the slot at `at` down while its larger child (the left on a tie) ranks strictly
    /// higher.
    fn sink(&mut self, mut at: usize) {
        let moving = self.heap[at];
        loop {
            let left = 2 * at + 1;
            if left >= self.heap.len() {
                break;
            }
            let right = left + 1;
            let right_larger = right < self.heap.len()
                && self.rank(&self.heap[left]) < self.rank(&self.heap[right]);
            let child = if right_larger { right } else { left };
            if self.rank(&moving) >= self.rank(&self.heap[child]) {
                break;
            }
            self.place(at, self.heap[child]);
            at = child;
        }
        self.place(at, moving);
    }

    /// Takes the slot at `at` out: the last slot fills its place and moves up or down.
    fn take(&mut self, at: usize) -> Slot {
        let gone = self.heap[at];
        let last = self.heap.pop().expect("a slot to take");
        self.index.remove(gone.key);
        if at < self.heap.len() {
            self.place(at, last);
            if self.rank(&gone) < self.rank(&last) {
                self.rise(at);
            } else {
                self.sink(at);
            }
        }
        self.used -= self.charge(gone.size);
        gone
    }
}

impl Eviction for Size {
    fn peek(&self, key: Key) -> Option<u32> {
        self.index.get(key).map(|at| self.heap[at as usize].size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.index.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        self.peek(req.key)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        if self.heap.is_empty() {
            return None;
        }
        let gone = self.take(0);
        Some((gone.key, gone.size))
    }

    fn insert(&mut self, req: &Request) {
        let slot = Slot { key: req.key, size: req.size };
        self.heap.push(slot);
        self.used += self.charge(req.size);
        self.rise(self.heap.len() - 1);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let at = self.index.get(key)?;
        Some(self.take(at as usize).size)
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn resident(&self) -> u64 {
        self.heap.len() as u64
    }

    fn label(&self) -> String {
        "size".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    fn size(unit: Unit) -> Size {
        Size::build(&(), Capacity { amount: 1 << 30, unit }).unwrap()
    }

    fn evictions(policy: &mut Size) -> Vec<Key> {
        std::iter::from_fn(|| policy.evict(&Request::read(0, 1)).map(|(key, _)| key)).collect()
    }

    /// In bytes the largest goes first, whatever the order keys came in.
    #[test]
    fn the_largest_goes_first() {
        let mut policy = size(Unit::Bytes);
        for (key, bytes) in [(1, 4096), (2, 512), (3, 65536), (4, 8192), (5, 1024)] {
            policy.insert(&Request::read(key, bytes));
        }
        assert_eq!(policy.remove(4), Some(8192));
        assert_eq!(policy.used(), 4096 + 512 + 65536 + 1024);
        assert_eq!(evictions(&mut policy), [3, 1, 5, 2]);
        assert_eq!(policy.used(), 0);
    }

    /// Among equal ranks the heap decides: the first key in is the root and goes first, then
    /// each eviction puts the last slot at the root, which stays there (nothing ranks higher).
    #[test]
    fn ties_go_in_the_heaps_order() {
        let mut policy = size(Unit::Objects);
        for key in 1..=5 {
            policy.insert(&Request::read(key, 4096 * key as u32));
        }
        assert_eq!(evictions(&mut policy), [1, 5, 4, 3, 2]);
        // Removing from the middle moves the last slot into the gap.
        for key in 1..=5 {
            policy.insert(&Request::read(key, 4096));
        }
        assert_eq!(policy.remove(2), Some(4096));
        assert_eq!(evictions(&mut policy), [1, 4, 3, 5]);
    }

    /// A removed key's replacement rises when it ranks above the gap's parent.
    #[test]
    fn a_replacement_rises_past_smaller_parents() {
        let mut policy = size(Unit::Bytes);
        // heap: 100 / (50, 90) / (10, 20 | 80)
        for (key, bytes) in [(1, 100), (2, 50), (3, 90), (4, 10), (5, 20), (6, 80)] {
            policy.insert(&Request::read(key, bytes));
        }
        // Removing 4 (under 50) puts 80 there, which rises above 50.
        policy.remove(4);
        assert_eq!(policy.heap[1].key, 6);
        assert_eq!(evictions(&mut policy), [1, 3, 6, 2, 5]);
    }
}
