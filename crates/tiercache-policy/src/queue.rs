//! One keyed list: the state FIFO, LRU and CLOCK share. A map from key to arena node, and the
//! list that orders the nodes (head newest). Each policy decides what a hit does to the order.

use tiercache_core::{Key, Unit};

use crate::index::KeyIndex;

use crate::list::{Arena, List};

pub struct Queue {
    pub arena: Arena,
    pub list: List,
    pub map: KeyIndex,
    pub unit: Unit,
}

impl Queue {
    pub fn new(unit: Unit, expected_objects: usize) -> Queue {
        let expected = expected_objects.min(1 << 24);
        let map = KeyIndex::with_capacity(expected);
        Queue { arena: Arena::with_capacity(expected), list: List::default(), map, unit }
    }

    #[inline]
    pub fn find(&self, key: Key) -> Option<u32> {
        self.map.get(key)
    }

    #[inline]
    pub fn push(&mut self, key: Key, size: u32, aux: u32) {
        let node = self.arena.alloc(key, size, aux);
        self.arena.push_front(&mut self.list, node);
        let previous = self.map.insert(key, node);
        debug_assert!(previous.is_none(), "key {key} inserted twice");
    }

    /// Unlinks and frees the oldest node; returns its key and size.
    #[inline]
    pub fn pop_oldest(&mut self) -> Option<(Key, u32)> {
        let node = self.arena.pop_back(&mut self.list)?;
        let (key, size) = (self.arena.get(node).key, self.arena.get(node).size);
        self.map.remove(key);
        self.arena.release(node);
        Some((key, size))
    }

    pub fn remove(&mut self, key: Key) -> Option<u32> {
        let node = self.map.remove(key)?;
        let size = self.arena.get(node).size;
        self.arena.unlink(&mut self.list, node);
        self.arena.release(node);
        Some(size)
    }

    #[inline]
    pub fn used(&self) -> u64 {
        self.list.charge(self.unit)
    }

    pub fn resident(&self) -> u64 {
        self.list.len
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// The expected number of resident objects of a capacity, to size maps up front.
pub fn expected_objects(capacity: tiercache_core::Capacity) -> usize {
    match capacity.unit {
        Unit::Objects => capacity.amount as usize,
        Unit::Bytes => (capacity.amount / 4096) as usize,
    }
}
