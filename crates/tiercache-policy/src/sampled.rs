//! Resident keys held densely, so that a uniform draw is an index: the state of the policies
//! that evict from random samples (Random, Hyperbolic). Each key carries its size and a
//! policy's own metadata `M`.
//!
//! Invariants: `index` maps every resident key to its place in `entries`; `used` is the
//! entries' charge in the capacity's unit.

use tiercache_core::{Key, SeededRng, Unit};

use crate::index::KeyIndex;

#[derive(Clone, Copy, Debug)]
pub struct Entry<M> {
    pub key: Key,
    pub size: u32,
    pub meta: M,
}

pub struct Dense<M> {
    entries: Vec<Entry<M>>,
    index: KeyIndex,
    unit: Unit,
    used: u64,
}

impl<M: Copy> Dense<M> {
    pub fn new(unit: Unit, expected: usize) -> Dense<M> {
        let expected = expected.min(1 << 24);
        Dense {
            entries: Vec::with_capacity(expected),
            index: KeyIndex::with_capacity(expected),
            unit,
            used: 0,
        }
    }

    pub fn get(&self, key: Key) -> Option<&Entry<M>> {
        self.index.get(key).map(|at| &self.entries[at as usize])
    }

    pub fn get_mut(&mut self, key: Key) -> Option<&mut Entry<M>> {
        self.index.get(key).map(|at| &mut self.entries[at as usize])
    }

    #[inline]
    pub fn prefetch(&self, key: Key) {
        self.index.prefetch(key);
    }

    pub fn insert(&mut self, key: Key, size: u32, meta: M) {
        self.index.insert(key, self.entries.len() as u32);
        self.entries.push(Entry { key, size, meta });
        self.used += self.unit.charge(size);
    }

    /// A resident entry's place, drawn uniformly; `None` when empty.
    pub fn draw(&self, rng: &mut SeededRng) -> Option<usize> {
        (!self.entries.is_empty()).then(|| rng.below(self.entries.len() as u64) as usize)
    }

    pub fn at(&self, place: usize) -> &Entry<M> {
        &self.entries[place]
    }

    /// Takes the entry at `place` out, moving the last one into its place.
    pub fn take(&mut self, place: usize) -> Entry<M> {
        let entry = self.entries.swap_remove(place);
        self.index.remove(entry.key);
        if let Some(moved) = self.entries.get(place) {
            self.index.insert(moved.key, place as u32);
        }
        self.used -= self.unit.charge(entry.size);
        entry
    }

    pub fn remove(&mut self, key: Key) -> Option<Entry<M>> {
        let place = self.index.get(key)?;
        Some(self.take(place as usize))
    }

    pub fn used(&self) -> u64 {
        self.used
    }

    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
