//! Keys ordered by a rank, lowest first, ties broken by which was ranked first: the state of
//! the policies that evict by a computed value rather than by a list's order (GDSF, LFU-DA).
//! A rank is a `u64`; a policy ranking by a non-negative `f64` passes its bits ([`f64_rank`]),
//! whose order as integers is the floats' order.
//!
//! Invariants: every resident key has one entry in the index and one in `order`, holding the
//! entry's current `(rank, seq)`; `seq` rises with every insert and re-rank, so among equal
//! ranks the least recently ranked key is the first out (libCacheSim orders its ranked
//! policies' ties the same way, by the request that last set the rank).

use std::collections::BTreeSet;

use tiercache_core::{Key, Unit};

use crate::index::KeyIndex;

#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub key: Key,
    pub size: u32,
    /// References while resident (the policy's frequency).
    pub count: u64,
    pub rank: u64,
    seq: u64,
}

pub struct Ranked {
    entries: Vec<Entry>,
    free: Vec<u32>,
    index: KeyIndex,
    order: BTreeSet<(u64, u64, u32)>,
    seq: u64,
    unit: Unit,
    used: u64,
}

/// The rank of a non-negative float: its bits, ordered as the floats are.
#[inline]
pub fn f64_rank(value: f64) -> u64 {
    debug_assert!(value >= 0.0, "a negative rank {value}");
    value.to_bits()
}

/// The float a rank made by [`f64_rank`] stands for.
#[inline]
pub fn rank_f64(rank: u64) -> f64 {
    f64::from_bits(rank)
}

impl Ranked {
    pub fn new(unit: Unit, expected: usize) -> Ranked {
        let expected = expected.min(1 << 24);
        Ranked {
            entries: Vec::with_capacity(expected),
            free: Vec::new(),
            index: KeyIndex::with_capacity(expected),
            order: BTreeSet::new(),
            seq: 0,
            unit,
            used: 0,
        }
    }

    pub fn get(&self, key: Key) -> Option<&Entry> {
        self.index.get(key).map(|slot| &self.entries[slot as usize])
    }

    #[inline]
    pub fn prefetch(&self, key: Key) {
        self.index.prefetch(key);
    }

    pub fn insert(&mut self, key: Key, size: u32, count: u64, rank: u64) {
        self.seq += 1;
        let entry = Entry { key, size, count, rank, seq: self.seq };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.entries[slot as usize] = entry;
                slot
            }
            None => {
                self.entries.push(entry);
                (self.entries.len() - 1) as u32
            }
        };
        self.order.insert((rank, self.seq, slot));
        let previous = self.index.insert(key, slot);
        debug_assert!(previous.is_none(), "key {key} ranked twice");
        self.used += self.unit.charge(size);
    }

    /// Gives a resident key a new rank and count (it becomes the last ranked among equals);
    /// returns its entry as it was, or `None` if the key is not resident.
    pub fn rerank(&mut self, key: Key, count: u64, rank: u64) -> Option<Entry> {
        let slot = self.index.get(key)?;
        let old = self.entries[slot as usize];
        self.order.remove(&(old.rank, old.seq, slot));
        self.seq += 1;
        self.order.insert((rank, self.seq, slot));
        self.entries[slot as usize] = Entry { count, rank, seq: self.seq, ..old };
        Some(old)
    }

    /// Removes and returns the lowest-ranked key.
    pub fn pop_lowest(&mut self) -> Option<Entry> {
        let (_, _, slot) = self.order.pop_first()?;
        Some(self.release(slot))
    }

    /// The lowest-ranked key's entry, the next [`pop_lowest`](Self::pop_lowest) would take.
    pub fn lowest(&self) -> Option<&Entry> {
        self.order.first().map(|&(_, _, slot)| &self.entries[slot as usize])
    }

    pub fn remove(&mut self, key: Key) -> Option<Entry> {
        let slot = self.index.get(key)?;
        let entry = self.entries[slot as usize];
        self.order.remove(&(entry.rank, entry.seq, slot));
        Some(self.release(slot))
    }

    fn release(&mut self, slot: u32) -> Entry {
        let entry = self.entries[slot as usize];
        self.index.remove(entry.key);
        self.free.push(slot);
        self.used -= self.unit.charge(entry.size);
        entry
    }

    /// Space in use, in the unit.
    pub fn used(&self) -> u64 {
        self.used
    }

    pub fn len(&self) -> u64 {
        self.order.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_rank_first_and_ties_by_who_was_ranked_first() {
        let mut ranked = Ranked::new(Unit::Bytes, 8);
        ranked.insert(1, 10, 1, 5);
        ranked.insert(2, 20, 1, 3);
        ranked.insert(3, 30, 1, 5);
        ranked.rerank(1, 2, 5).unwrap(); // 1 is now ranked after 3 among the fives
        assert_eq!(ranked.used(), 60);
        let order: Vec<Key> = std::iter::from_fn(|| ranked.pop_lowest().map(|e| e.key)).collect();
        assert_eq!(order, vec![2, 3, 1]);
        assert_eq!(ranked.used(), 0);
        assert!(ranked.is_empty());
    }

    #[test]
    fn float_ranks_order_as_floats() {
        let values = [0.0, 1e-9, 0.5, 1.0, 3.0e6, 1e300];
        for pair in values.windows(2) {
            assert!(f64_rank(pair[0]) < f64_rank(pair[1]));
            assert_eq!(rank_f64(f64_rank(pair[1])), pair[1]);
        }
    }
}
