//! Random eviction: the victim is a resident key drawn uniformly. The baseline every
//! eviction study measures against (libCacheSim's `Random`), and the one whose miss ratio
//! depends on no order at all. Seeded (`random:seed=N`), so a run replays.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request, SeededRng, Unit};

use crate::frame::Eviction;
use crate::index::KeyIndex;
use crate::queue::expected_objects;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RandomConfig {
    /// The seed of the draws.
    pub seed: u64,
}

pub struct Random {
    /// Resident keys and sizes, densely: the draw is an index.
    keys: Vec<(Key, u32)>,
    /// Key to its index in `keys`.
    index: KeyIndex,
    rng: SeededRng,
    unit: Unit,
    used: u64,
}

impl crate::frame::Registered for Random {
    type Config = RandomConfig;
    const VARIANTS: &'static [&'static str] = &["seed=7"];
    const QUIET_HITS: bool = true;

    fn build(
        config: &RandomConfig,
        capacity: Capacity,
    ) -> Result<Random, crate::error::PolicyError> {
        let expected = expected_objects(capacity).min(1 << 24);
        Ok(Random {
            keys: Vec::with_capacity(expected),
            index: KeyIndex::with_capacity(expected),
            rng: SeededRng::new(config.seed),
            unit: capacity.unit,
            used: 0,
        })
    }
}

impl Random {
    fn charge(&self, size: u32) -> u64 {
        match self.unit {
            Unit::Bytes => size as u64,
            Unit::Objects => 1,
        }
    }

    /// Takes the key at `at` out, moving the last key into its place.
    fn take(&mut self, at: usize) -> (Key, u32) {
        let (key, size) = self.keys.swap_remove(at);
        self.index.remove(key);
        if let Some(&(moved, _)) = self.keys.get(at) {
            self.index.insert(moved, at as u32);
        }
        self.used -= self.charge(size);
        (key, size)
    }
}

impl Eviction for Random {
    fn peek(&self, key: Key) -> Option<u32> {
        self.index.get(key).map(|at| self.keys[at as usize].1)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.index.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        self.peek(req.key)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        if self.keys.is_empty() {
            return None;
        }
        let at = self.rng.below(self.keys.len() as u64) as usize;
        Some(self.take(at))
    }

    fn insert(&mut self, req: &Request) {
        self.index.insert(req.key, self.keys.len() as u32);
        self.keys.push((req.key, req.size));
        self.used += self.charge(req.size);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let at = self.index.get(key)?;
        Some(self.take(at as usize).1)
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn resident(&self) -> u64 {
        self.keys.len() as u64
    }

    fn label(&self) -> String {
        "random".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    /// Every resident key is as likely to go, and a seed replays its draws.
    #[test]
    fn victims_are_uniform_and_a_seed_replays_them() {
        let capacity = Capacity { amount: 10, unit: Unit::Objects };
        let mut counts = [0u32; 10];
        let mut first_run = Vec::new();
        for run in 0..2 {
            let mut random = Random::build(&RandomConfig { seed: 3 }, capacity).unwrap();
            for round in 0..2000u64 {
                for key in 0..10 {
                    if random.peek(key).is_none() {
                        random.insert(&Request::read(key, 1));
                    }
                }
                let (victim, _) = random.evict(&Request::read(99, 1)).unwrap();
                if run == 0 {
                    counts[victim as usize] += 1;
                    first_run.push(victim);
                } else {
                    assert_eq!(first_run[round as usize], victim, "round {round}");
                }
            }
        }
        for (key, n) in counts.iter().enumerate() {
            assert!((140..260).contains(n), "key {key} evicted {n} times of 2000");
        }
    }
}
