//! LeCaR (Vietri et al., "Driving Cache Replacement with ML-based LeCaR", HotStorage'18): two
//! experts, LRU and LFU, over the same cached keys, and a weight for each. To evict, an expert
//! is drawn by weight and its victim goes (when both name the same key it simply goes); the key's
//! name enters the history of the expert that chose it. A miss on a name in an expert's history
//! is that expert's regret: its weight shrinks by `exp(-λ · d^t)`, `t` the requests since the
//! eviction, and the weights are normalised. So the cache leans, online, towards the expert
//! whose evictions come back least.
//!
//! The paper's constants: learning rate λ = 0.45, discount d = 0.005^(1/N) for a cache of N
//! (objects, or bytes when it counts bytes), both weights 1/2 at first. LFU's victim is the key
//! of fewest references since it entered, the first to reach that count among equals. Each
//! history holds names for half the capacity, and the draw is in hundredths, as libCacheSim's
//! `LeCaR` has them; with which this agrees within half a point averaged over seeds
//! (`tests/peer_libcachesim.rs`). Seeded (`lecar:seed=N`).

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Op, Request, SeededRng, Unit};

use crate::error::PolicyError;
use crate::frame::{Eviction, Sink};
use crate::index::KeyIndex;
use crate::list::{Arena, List};
use crate::queue::{expected_objects, Queue};
use crate::rank::Ranked;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeCaRConfig {
    /// λ, the learning rate.
    pub learning_rate: f64,
    /// LRU's weight at the start (LFU's is the rest).
    pub lru_weight: f64,
    /// The seed of the draws.
    pub seed: u64,
}

impl Default for LeCaRConfig {
    fn default() -> LeCaRConfig {
        LeCaRConfig { learning_rate: 0.45, lru_weight: 0.5, seed: 0 }
    }
}

const BY_LRU: u32 = 0;
const BY_LFU: u32 = 1;

/// The evicted keys' names, one history per expert, each FIFO, with when each was evicted.
struct Histories {
    arena: Arena,
    lists: [List; 2],
    index: KeyIndex,
    evicted_at: Vec<u64>,
}

impl Histories {
    fn forget(&mut self, node: u32) {
        let n = self.arena.take(&mut self.lists, node);
        self.index.remove(n.key);
    }
}

pub struct LeCaR {
    lru: Queue,
    lfu: Ranked,
    history: Histories,
    unit: Unit,
    /// Each history's size, in the capacity's unit.
    history_target: u64,
    weights: [f64; 2],
    learning_rate: f64,
    discount: f64,
    rng: SeededRng,
    /// Requests so far (lookups that miss left out: they change nothing).
    now: u64,
}

impl crate::frame::Registered for LeCaR {
    type Config = LeCaRConfig;
    const VARIANTS: &'static [&'static str] = &["lru_weight=0.9,seed=7"];
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn validate(config: &LeCaRConfig) -> Result<(), PolicyError> {
        if !(config.learning_rate > 0.0 && config.learning_rate <= 10.0) {
            return Err(PolicyError::bad("lecar", "learning_rate", "must be in (0, 10]"));
        }
        if !(0.0..=1.0).contains(&config.lru_weight) {
            return Err(PolicyError::bad("lecar", "lru_weight", "must be in [0, 1]"));
        }
        Ok(())
    }

    fn build(config: &LeCaRConfig, capacity: Capacity) -> Result<LeCaR, PolicyError> {
        let expected = expected_objects(capacity);
        Ok(LeCaR {
            lru: Queue::new(capacity.unit, expected),
            lfu: Ranked::new(capacity.unit, expected),
            history: Histories {
                arena: Arena::with_capacity(expected.min(1 << 24)),
                lists: [List::default(); 2],
                index: KeyIndex::with_capacity(expected.min(1 << 24)),
                evicted_at: Vec::new(),
            },
            unit: capacity.unit,
            history_target: capacity.amount / 2,
            weights: [config.lru_weight, 1.0 - config.lru_weight],
            learning_rate: config.learning_rate,
            discount: 0.005f64.powf(1.0 / capacity.amount as f64),
            rng: SeededRng::new(config.seed),
            now: 0,
        })
    }
}

impl LeCaR {
    /// The expert that evicted a key seen again regrets it: its weight shrinks.
    fn regret(&mut self, expert: usize, since: u64) {
        let r = self.discount.powf(since as f64);
        let other = 1 - expert;
        self.weights[expert] = self.weights[expert] * (-self.learning_rate * r).exp() + 1e-10;
        let sum = self.weights[expert] + self.weights[other] + 2e-10;
        self.weights[expert] /= sum;
        self.weights[other] = (self.weights[other] + 1e-10) / sum;
    }

    /// Puts an evicted key's name in `expert`'s history, dropping its oldest names past the
    /// history's size.
    fn remember(&mut self, key: Key, size: u32, expert: u32) {
        let h = &mut self.history;
        let node = h.arena.alloc(key, size, expert);
        h.arena.push_front(&mut h.lists[expert as usize], node);
        h.index.insert(key, node);
        if node as usize >= h.evicted_at.len() {
            h.evicted_at.resize(node as usize + 1, 0);
        }
        h.evicted_at[node as usize] = self.now;
        while h.lists[expert as usize].charge(self.unit) > self.history_target {
            let oldest = h.arena.back(&h.lists[expert as usize]).expect("an overfull history");
            h.forget(oldest);
        }
    }
}

impl Eviction for LeCaR {
    fn peek(&self, key: Key) -> Option<u32> {
        self.lfu.get(key).map(|e| e.size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.lfu.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let Some(entry) = self.lfu.get(req.key).copied() else {
            if req.op != Op::Lookup {
                self.now += 1;
            }
            return None;
        };
        self.now += 1;
        let node = self.lru.find(req.key).expect("a key in LFU's set is in LRU's");
        self.lru.arena.move_to_front(&mut self.lru.list, node);
        self.lfu.rerank(req.key, entry.count + 1, entry.count + 1);
        Some(entry.size)
    }

    fn prepare_insert(&mut self, req: &Request, _sink: &mut Sink) {
        if let Some(node) = self.history.index.get(req.key) {
            let expert = self.history.arena.get(node).aux as usize;
            let since = self.now - self.history.evicted_at[node as usize];
            self.history.forget(node);
            self.regret(expert, since);
        }
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let lru_victim = self.lru.arena.back(&self.lru.list).map(|n| self.lru.arena.get(n).key)?;
        let lfu_victim = self.lfu.lowest().map(|e| e.key)?;
        let (victim, expert) = if lru_victim == lfu_victim {
            (lru_victim, None)
        } else if (self.rng.below(100) as f64 / 100.0) < self.weights[BY_LRU as usize] {
            (lru_victim, Some(BY_LRU))
        } else {
            (lfu_victim, Some(BY_LFU))
        };
        self.lru.remove(victim);
        let entry = self.lfu.remove(victim).expect("the victim is resident");
        if let Some(expert) = expert {
            self.remember(victim, entry.size, expert);
        }
        Some((victim, entry.size))
    }

    fn insert(&mut self, req: &Request) {
        self.lru.push(req.key, req.size, 0);
        self.lfu.insert(req.key, req.size, 1, 1);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        if let Some(node) = self.history.index.get(key) {
            self.history.forget(node);
        }
        self.lru.remove(key);
        self.lfu.remove(key).map(|e| e.size)
    }

    fn used(&self) -> u64 {
        self.lfu.used()
    }

    fn resident(&self) -> u64 {
        self.lfu.len()
    }

    fn label(&self) -> String {
        "lecar".into()
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        vec![("lru_weight", self.weights[BY_LRU as usize])]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    fn request(cache: &mut LeCaR, key: Key, capacity: u64) {
        if cache.access(&read(key)).is_some() {
            return;
        }
        let mut decision = tiercache_core::Decision::default();
        cache.prepare_insert(&read(key), &mut Sink::new(&mut decision, tiercache_core::TierId(0)));
        while cache.used() + 1 > capacity {
            cache.evict(&read(key));
        }
        cache.insert(&read(key));
    }

    /// Twenty hot keys (each twice), then a scan of forty new keys, each round, in a cache of
    /// fifty: LRU's
    /// victims are hot keys (the least recent once the scan has run) and come back the next
    /// round; LFU's are scanned keys, never seen again. LRU's regrets pile up, its weight falls
    /// towards zero, and the hot keys stay.
    #[test]
    fn regrets_move_the_weight_away_from_the_expert_whose_victims_return() {
        let capacity = 50;
        let config = LeCaRConfig::default();
        let mut cache =
            LeCaR::build(&config, Capacity { amount: capacity, unit: Unit::Objects }).unwrap();
        for round in 0..200u64 {
            for hot in 0..20 {
                request(&mut cache, hot, capacity);
                request(&mut cache, hot, capacity);
            }
            for key in 0..40 {
                request(&mut cache, 1000 + round * 40 + key, capacity);
            }
        }
        let lru_weight = cache.weights[BY_LRU as usize];
        assert!(lru_weight < 0.1, "LRU's weight is still {lru_weight}");
        assert!((cache.weights.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        let kept = (0..20).filter(|&hot| cache.peek(hot).is_some()).count();
        assert!(kept >= 18, "{kept} of 20 hot keys stayed");
    }
}
