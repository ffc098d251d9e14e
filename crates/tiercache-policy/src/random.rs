//! Random eviction: the victim is a resident key drawn uniformly. The baseline every
//! eviction study measures against (libCacheSim's `Random`), and the one whose miss ratio
//! depends on no order at all. Seeded (`random:seed=N`), so a run replays.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request, SeededRng};

use crate::frame::Eviction;
use crate::queue::expected_objects;
use crate::sampled::Dense;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RandomConfig {
    /// The seed of the draws.
    pub seed: u64,
}

pub struct Random {
    keys: Dense<()>,
    rng: SeededRng,
}

impl crate::frame::Registered for Random {
    type Config = RandomConfig;
    const VARIANTS: &'static [&'static str] = &["seed=7"];
    const QUIET_HITS: bool = true;

    fn build(
        config: &RandomConfig,
        capacity: Capacity,
    ) -> Result<Random, crate::error::PolicyError> {
        let keys = Dense::new(capacity.unit, expected_objects(capacity));
        Ok(Random { keys, rng: SeededRng::new(config.seed) })
    }
}

impl Eviction for Random {
    fn peek(&self, key: Key) -> Option<u32> {
        self.keys.get(key).map(|e| e.size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.keys.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        self.peek(req.key)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let place = self.keys.draw(&mut self.rng)?;
        let entry = self.keys.take(place);
        Some((entry.key, entry.size))
    }

    fn insert(&mut self, req: &Request) {
        self.keys.insert(req.key, req.size, ());
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        self.keys.remove(key).map(|e| e.size)
    }

    fn used(&self) -> u64 {
        self.keys.used()
    }

    fn resident(&self) -> u64 {
        self.keys.len()
    }

    fn label(&self) -> String {
        "random".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;
    use tiercache_core::Unit;

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
