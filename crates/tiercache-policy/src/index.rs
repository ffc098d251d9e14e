//! The key index of the list-based policies: an open-addressing hash table from key to arena
//! node, with linear probing and backward-shift deletion (no tombstones). One probe usually
//! touches one cache line, which holds the key itself, so a lookup costs one memory access
//! where a general map costs two; and a slot's address is known from the key alone, so the
//! simulator can prefetch it a few requests ahead.
//!
//! Invariants: the table is a power of two at most half full; every key between a slot's home
//! and the slot itself is occupied (the linear-probing invariant deletion preserves).

const EMPTY: u32 = u32::MAX;
const MIN_SLOTS: usize = 16;
const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Slot {
    key: u64,
    value: u32,
}

const VACANT: Slot = Slot { key: 0, value: EMPTY };

pub struct KeyIndex {
    slots: Vec<Slot>,
    shift: u32,
    len: usize,
}

#[inline]
fn mix(key: u64) -> u64 {
    let full = (key as u128).wrapping_mul(MULTIPLIER as u128);
    ((full >> 64) as u64) ^ (full as u64)
}

impl KeyIndex {
    /// A table sized for `expected` keys without growing.
    pub fn with_capacity(expected: usize) -> KeyIndex {
        let slots = (expected * 2).next_power_of_two().max(MIN_SLOTS);
        KeyIndex { slots: vec![VACANT; slots], shift: 64 - slots.trailing_zeros(), len: 0 }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (mix(key).wrapping_mul(MULTIPLIER) >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Asks the CPU to bring `key`'s home slot into cache. No effect on contents.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let slot: *const Slot = &self.slots[self.home(key)];
            // SAFETY: a prefetch is a hint; it never faults and reads nothing into the program.
            unsafe {
                std::arch::x86_64::_mm_prefetch(slot as *const i8, std::arch::x86_64::_MM_HINT_T0)
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = key;
    }

    /// The slot holding `key`, or the empty slot ending its probe run.
    #[inline]
    fn probe(&self, key: u64) -> (usize, bool) {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let slot = self.slots[i];
            if slot.value == EMPTY {
                return (i, false);
            }
            if slot.key == key {
                return (i, true);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        match self.probe(key) {
            (i, true) => Some(self.slots[i].value),
            _ => None,
        }
    }

    /// Inserts or replaces; returns the previous value.
    #[inline]
    pub fn insert(&mut self, key: u64, value: u32) -> Option<u32> {
        debug_assert_ne!(value, EMPTY, "u32::MAX is the empty marker");
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        match self.probe(key) {
            (i, true) => Some(std::mem::replace(&mut self.slots[i].value, value)),
            (i, false) => {
                self.slots[i] = Slot { key, value };
                self.len += 1;
                None
            }
        }
    }

    /// Counts `key` once more (its value as a count: 1 when absent; at most `u32::MAX - 1`).
    #[inline]
    pub fn count(&mut self, key: u64) {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        match self.probe(key) {
            (i, true) => {
                let value = &mut self.slots[i].value;
                *value = (*value + 1).min(EMPTY - 1);
            }
            (i, false) => {
                self.slots[i] = Slot { key, value: 1 };
                self.len += 1;
            }
        }
    }

    /// Every key and its value, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.slots.iter().filter(|s| s.value != EMPTY).map(|s| (s.key, s.value))
    }

    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<u32> {
        match self.probe(key) {
            (i, true) => {
                let value = self.slots[i].value;
                self.len -= 1;
                self.close_gap(i);
                Some(value)
            }
            _ => None,
        }
    }

    /// Backward-shift deletion: moves later entries of the probe run into the hole when the
    /// hole lies between their home and their slot.
    fn close_gap(&mut self, mut hole: usize) {
        let mask = self.mask();
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let slot = self.slots[i];
            if slot.value == EMPTY {
                break;
            }
            let home = self.home(slot.key);
            // Distance from home to i, and from home to the hole, along the probe direction.
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                self.slots[hole] = slot;
                hole = i;
            }
        }
        self.slots[hole] = VACANT;
    }

    fn grow(&mut self) {
        let doubled = vec![VACANT; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.shift -= 1;
        self.len = 0;
        for slot in old.into_iter().filter(|s| s.value != EMPTY) {
            self.insert(slot.key, slot.value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use tiercache_core::SeededRng;

    /// Counting keeps each key's count as its value, through the table's growth.
    #[test]
    fn counts_agree_with_a_hash_map() {
        let mut rng = SeededRng::new(5);
        let (mut index, mut reference) = (KeyIndex::with_capacity(4), HashMap::new());
        for _ in 0..20_000 {
            let key = rng.below(3_000);
            index.count(key);
            *reference.entry(key).or_insert(0u32) += 1;
        }
        let counted: HashMap<u64, u32> = index.iter().collect();
        assert_eq!(counted, reference);
        assert_eq!(index.len(), reference.len());
    }

    #[test]
    fn agrees_with_a_hash_map_under_random_operations() {
        let mut rng = SeededRng::new(17);
        let mut index = KeyIndex::with_capacity(4);
        let mut model: HashMap<u64, u32> = HashMap::new();
        for step in 0..200_000u32 {
            // Few distinct keys, many of them multiples of 4096, so probe runs collide.
            let key = rng.below(3000) * if step % 2 == 0 { 4096 } else { 1 };
            match rng.below(3) {
                0 | 1 => assert_eq!(index.insert(key, step), model.insert(key, step)),
                _ => assert_eq!(index.remove(key), model.remove(&key)),
            }
            if step % 1000 == 0 {
                for k in model.keys().take(50) {
                    assert_eq!(index.get(*k), model.get(k).copied());
                }
            }
        }
        assert_eq!(index.len(), model.len());
        for (k, v) in &model {
            assert_eq!(index.get(*k), Some(*v));
        }
        index.prefetch(12345);
    }
}
