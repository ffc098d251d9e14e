//! Hyperbolic caching (Blankstein, Sen and Freedman, "Hyperbolic Caching: Flexible Caching for
//! Web Applications", USENIX ATC'17): a key's priority is its references since it entered the
//! cache over the time it has been there, `n / t`, so a key's claim decays hyperbolically
//! unless it keeps being used, and a new key is not judged on a lifetime it has not had. No
//! order is kept; to evict, `samples` resident keys are drawn at random (with replacement, as
//! Redis samples) and the lowest priority among them goes (section 3: 64 samples).
//!
//! Time counts requests (all but lookups that miss, which change nothing). The paper's cost- and size-aware variants are left out; so does
//! libCacheSim's `Hyperbolic`, with which this agrees within half a point averaged over seeds
//! (`tests/peer_libcachesim.rs`). Seeded (`hyperbolic:seed=N`).

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Op, Request, SeededRng};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::queue::expected_objects;
use crate::sampled::Dense;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HyperbolicConfig {
    /// Keys drawn per eviction.
    pub samples: u32,
    /// The seed of the draws.
    pub seed: u64,
}

impl Default for HyperbolicConfig {
    fn default() -> HyperbolicConfig {
        HyperbolicConfig { samples: 64, seed: 0 }
    }
}

/// A key's references since it entered, and when it entered.
#[derive(Clone, Copy)]
struct Meta {
    references: u64,
    entered: u64,
}

pub struct Hyperbolic {
    keys: Dense<Meta>,
    samples: u32,
    rng: SeededRng,
    /// Requests so far.
    now: u64,
}

impl crate::frame::Registered for Hyperbolic {
    type Config = HyperbolicConfig;
    const VARIANTS: &'static [&'static str] = &["samples=4,seed=7"];
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn validate(config: &HyperbolicConfig) -> Result<(), PolicyError> {
        if !(1..=1024).contains(&config.samples) {
            return Err(PolicyError::bad("hyperbolic", "samples", "must be 1 to 1024"));
        }
        Ok(())
    }

    fn build(config: &HyperbolicConfig, capacity: Capacity) -> Result<Hyperbolic, PolicyError> {
        Ok(Hyperbolic {
            keys: Dense::new(capacity.unit, expected_objects(capacity)),
            samples: config.samples,
            rng: SeededRng::new(config.seed),
            now: 0,
        })
    }
}

impl Hyperbolic {
    fn priority(&self, meta: &Meta) -> f64 {
        meta.references as f64 / (self.now - meta.entered).max(1) as f64
    }
}

impl Eviction for Hyperbolic {
    fn peek(&self, key: Key) -> Option<u32> {
        self.keys.get(key).map(|e| e.size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.keys.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        // A lookup that misses changes nothing, not even the time.
        if req.op != Op::Lookup || self.keys.get(req.key).is_some() {
            self.now += 1;
        }
        let entry = self.keys.get_mut(req.key)?;
        entry.meta.references += 1;
        Some(entry.size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let mut best: Option<(usize, f64)> = None;
        for _ in 0..self.samples {
            let place = self.keys.draw(&mut self.rng)?;
            let priority = self.priority(&self.keys.at(place).meta);
            if best.is_none_or(|(_, lowest)| priority < lowest) {
                best = Some((place, priority));
            }
        }
        let entry = self.keys.take(best?.0);
        Some((entry.key, entry.size))
    }

    fn insert(&mut self, req: &Request) {
        self.keys.insert(req.key, req.size, Meta { references: 1, entered: self.now });
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
        "hyperbolic".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;
    use tiercache_core::Unit;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    /// With every key in the sample (many draws over few keys), the lowest n / t goes: an old
    /// key used once before a young key used as often, and a key used often last.
    #[test]
    fn the_lowest_references_per_time_in_cache_goes() {
        let config = HyperbolicConfig { samples: 256, seed: 1 };
        let mut cache =
            Hyperbolic::build(&config, Capacity { amount: 3, unit: Unit::Objects }).unwrap();
        for key in [1, 2, 3] {
            cache.access(&read(key));
            cache.insert(&read(key));
        }
        for _ in 0..4 {
            cache.access(&read(3));
        }
        for _ in 0..10 {
            cache.access(&read(99)); // time passes
        }
        // 1: 1 reference over 17 requests; 2: 1 over 16; 3: 5 over 15.
        cache.access(&read(4));
        assert_eq!(cache.evict(&read(4)), Some((1, 1)));
        assert_eq!(cache.evict(&read(4)), Some((2, 1)));
    }
}
