//! LRU with probabilistic promotion: a hit moves the key to the head only with probability
//! `prob` (default 1/2, libCacheSim's `LRUProb`), so a hit costs a list update half as often,
//! the trade CacheLib's promotion delay and BP-Wrapper's batching make, and keys hit once in a
//! while drift towards the tail. With `prob = 1` it is LRU. Seeded (`lru-prob:seed=N`).

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request, SeededRng};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::queue::{expected_objects, Queue};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LruProbConfig {
    /// The chance that a hit moves its key to the head, in (0, 1].
    pub prob: f64,
    /// The seed of the draws.
    pub seed: u64,
}

impl Default for LruProbConfig {
    fn default() -> LruProbConfig {
        LruProbConfig { prob: 0.5, seed: 0 }
    }
}

pub struct LruProb {
    queue: Queue,
    prob: f64,
    rng: SeededRng,
}

impl crate::frame::Registered for LruProb {
    type Config = LruProbConfig;
    const VARIANTS: &'static [&'static str] = &["prob=0.1,seed=7"];
    const QUIET_HITS: bool = true;
    // Every hit draws: told only some, the engine would draw differently from the simulator.
    const COUNTS_HITS: bool = true;

    fn validate(config: &LruProbConfig) -> Result<(), PolicyError> {
        if !(config.prob > 0.0 && config.prob <= 1.0) {
            return Err(PolicyError::bad("lru-prob", "prob", "must be in (0, 1]"));
        }
        Ok(())
    }

    fn build(config: &LruProbConfig, capacity: Capacity) -> Result<LruProb, PolicyError> {
        Ok(LruProb {
            queue: Queue::new(capacity.unit, expected_objects(capacity)),
            prob: config.prob,
            rng: SeededRng::new(config.seed),
        })
    }
}

impl Eviction for LruProb {
    fn peek(&self, key: Key) -> Option<u32> {
        self.queue.find(key).map(|node| self.queue.arena.get(node).size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.queue.map.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let node = self.queue.find(req.key)?;
        if self.rng.chance(self.prob) {
            self.queue.arena.move_to_front(&mut self.queue.list, node);
        }
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
        "lru-prob".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;
    use tiercache_core::Unit;

    /// About `prob` of the hits on the tail key save it; with `prob = 1` every hit does (LRU).
    #[test]
    fn a_hit_promotes_with_its_probability() {
        for (prob, low, high) in [(0.5, 400, 600), (1.0, 1000, 1000)] {
            let mut saved = 0;
            for seed in 0..1000 {
                let config = LruProbConfig { prob, seed };
                let capacity = Capacity { amount: 2, unit: Unit::Objects };
                let mut lru = LruProb::build(&config, capacity).unwrap();
                lru.insert(&Request::read(1, 1));
                lru.insert(&Request::read(2, 1));
                lru.access(&Request::read(1, 1));
                if lru.evict(&Request::read(3, 1)).unwrap().0 == 2 {
                    saved += 1;
                }
            }
            assert!((low..=high).contains(&saved), "prob {prob}: {saved} of 1000 saved");
        }
    }
}
