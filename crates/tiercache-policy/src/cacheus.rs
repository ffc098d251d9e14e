//! CACHEUS (Rodriguez et al., "Learning Cache Replacement with CACHEUS", FAST'21): LeCaR's
//! regret learning over two experts made resistant to what defeats LRU and LFU, and a
//! learning rate that tunes itself.
//!
//! - **SR-LRU**, scan-resistant LRU: the cache is split into SR, where new keys enter, and R,
//!   where keys hit in SR move; R's overflow is demoted to SR's head and SR's overflow leaves
//!   for a history H (as large as the cache). A key missed while named in H enters R. SR's
//!   target starts at half the cache and adapts: a hit on a key demoted from R says R is too
//!   small (SR shrinks by `max(1, new / demoted)`), a miss on a key that left SR new says SR
//!   is (it grows by `max(1, demoted / new)`), `new` counting the names in H that left SR
//!   without a hit and `demoted` the demoted keys in SR.
//! - **CR-LFU**, churn-resistant LFU: the least frequently used goes, the most recently
//!   referenced among equals (so that under churn a set of keys stays rather than cycling);
//!   a key that returns while named in H resumes its count.
//! - The experts' victims: an expert is drawn by weight (in hundredths) and its victim goes; its
//!   name enters that expert's history (half the cache, LRU); a miss on a name in a history
//!   shrinks that expert's weight by `exp(-λ)`. Every N requests (N the capacity) λ moves by
//!   `λ · Δλ` in the direction that raised the hit ratio over the last N, and after ten periods
//!   without gain restarts at random in [0.001, 1].
//!
//! libCacheSim's `Cacheus` (libcachesim 0.3.5) departs from the paper in two places, each an
//! option: its hit ratio for λ divides integers (0 unless every request of the period hit), so
//! λ only shrinks (`integer_hit_ratio=true`); and SR's target only grows, by whole steps of
//! `demoted / new`, since a hit in SR moves the key to a fresh copy in R that has lost its
//! demoted mark, and neither count is taken back when a name returns or drops out of H
//! (`grow_only=true`). With both it runs as libCacheSim's does, within half a point over seeds
//! (`tests/peer_libcachesim.rs`); the paper's rules miss up to 7 points more than libCacheSim's
//! on CloudPhysics at 8,000 objects and agree within half a point elsewhere (docs/RESULTS.md).
//! In bytes SR's steps are bytes, and the two agree. Seeded (`cacheus:seed=N`).
//!
//! Invariants: every resident key is in R or SR and in the frequency list of its count; a name
//! in H is in neither; the histories hold names only; `used` is R's and SR's charge.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, KeyMap, Op, Request, SeededRng, Unit};

use crate::error::PolicyError;
use crate::frame::{Eviction, Sink};
use crate::list::{Arena, List};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheusConfig {
    /// The seed of the draws.
    pub seed: u64,
    /// libCacheSim's hit ratio for λ: an integer division.
    pub integer_hit_ratio: bool,
    /// libCacheSim's SR target: it only grows, by whole steps of `demoted / new`, and the
    /// counts are never taken back on a hit or a return.
    pub grow_only: bool,
}

/// SR-LRU's lists, and the flags its nodes carry in `aux` beside the list.
const R: usize = 0;
const SR: usize = 1;
const H: usize = 2;
const LIST: u32 = 0b11;
const NEW: u32 = 1 << 2;
const DEMOTED: u32 = 1 << 3;

/// The experts, and their histories.
const BY_LRU: usize = 0;
const BY_LFU: usize = 1;

/// Periods without gain before λ restarts.
const UNLEARN_AFTER: u32 = 10;

/// A resident key's or a name's places: its SR-LRU node (R, SR or H), its CR-LFU count, and
/// its CR-LFU node while resident.
#[derive(Clone, Copy)]
struct Slot {
    lru: u32,
    frequency: u64,
    lfu: Option<u32>,
}

/// One expert's history: names of its victims, LRU, charged as the keys were.
#[derive(Default)]
struct Ghosts {
    arena: Arena,
    lists: [List; 2],
    index: KeyMap<u32>,
}

pub struct Cacheus {
    lru: Arena,
    lists: [List; 3],
    slots: KeyMap<Slot>,
    lfu: Arena,
    /// CR-LFU's keys by count, each list newest first.
    by_frequency: BTreeMap<u64, List>,
    ghosts: Ghosts,
    unit: Unit,
    capacity: f64,
    sr_target: f64,
    new_names: u64,
    demoted: u64,
    weights: [f64; 2],
    rate: f64,
    previous_rate: f64,
    previous_hit_ratio: f64,
    hits: u64,
    requests: u64,
    unlearned: u32,
    rate_due: bool,
    rng: SeededRng,
    config: CacheusConfig,
}

impl crate::frame::Registered for Cacheus {
    type Config = CacheusConfig;
    const VARIANTS: &'static [&'static str] = &["seed=7", "integer_hit_ratio=true,grow_only=true"];
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn build(config: &CacheusConfig, capacity: Capacity) -> Result<Cacheus, PolicyError> {
        let mut rng = SeededRng::new(config.seed);
        let rate = random_rate(&mut rng);
        let half = (capacity.amount / 2) as f64;
        Ok(Cacheus {
            lru: Arena::default(),
            lists: Default::default(),
            slots: KeyMap::default(),
            lfu: Arena::default(),
            by_frequency: BTreeMap::new(),
            ghosts: Ghosts::default(),
            unit: capacity.unit,
            capacity: capacity.amount as f64,
            sr_target: half,
            new_names: 0,
            demoted: 0,
            weights: [0.5, 0.5],
            rate,
            previous_rate: 0.0,
            previous_hit_ratio: 0.0,
            hits: 0,
            requests: 0,
            unlearned: 0,
            rate_due: false,
            rng,
            config: config.clone(),
        })
    }
}

fn random_rate(rng: &mut SeededRng) -> f64 {
    0.001 + rng.below(1000) as f64 / 1000.0
}

impl Cacheus {
    fn charge(&self, size: u32) -> f64 {
        match self.unit {
            Unit::Bytes => size as f64,
            Unit::Objects => 1.0,
        }
    }

    fn held(&self, list: usize) -> f64 {
        self.lists[list].charge(self.unit) as f64
    }

    fn r_target(&self) -> f64 {
        self.capacity - self.sr_target
    }

    fn list_of(&self, node: u32) -> usize {
        (self.lru.get(node).aux & LIST) as usize
    }

    /// Moves an SR-LRU node to the head of `to`, keeping its flags.
    fn relink(&mut self, node: u32, to: usize) {
        let from = self.list_of(node);
        self.lru.unlink(&mut self.lists[from], node);
        self.lru.push_front(&mut self.lists[to], node);
        let aux = &mut self.lru.get_mut(node).aux;
        *aux = (*aux & !LIST) | to as u32;
    }

    fn set_flag(&mut self, node: u32, flag: u32, on: bool) {
        let aux = &mut self.lru.get_mut(node).aux;
        *aux = if on { *aux | flag } else { *aux & !flag };
    }

    fn has(&self, node: u32, flag: u32) -> bool {
        self.lru.get(node).aux & flag != 0
    }

    /// Demotes R's oldest keys to SR's head while R holds more than `room` below its target.
    fn demote_while(&mut self, room: f64) {
        while self.held(R) + room > self.r_target() {
            let Some(node) = self.lru.back(&self.lists[R]) else { break };
            if !self.has(node, DEMOTED) {
                self.demoted += 1;
                self.set_flag(node, DEMOTED, true);
            }
            self.relink(node, SR);
        }
    }

    /// A resident key leaves for H: its CR-LFU node goes, its count stays with its name.
    fn retire(&mut self, key: Key) -> u32 {
        let slot = self.slots.get_mut(&key).expect("a resident key");
        let lfu = slot.lfu.take().expect("resident in CR-LFU");
        let (node, frequency) = (slot.lru, slot.frequency);
        let list = self.by_frequency.get_mut(&frequency).expect("the key's count has a list");
        self.lfu.unlink(list, lfu);
        if list.is_empty() {
            self.by_frequency.remove(&frequency);
        }
        self.lfu.release(lfu);
        if self.has(node, NEW) {
            self.new_names += 1;
        }
        if self.has(node, DEMOTED) {
            self.demoted -= 1;
            self.set_flag(node, DEMOTED, false);
        }
        self.relink(node, H);
        let size = self.lru.get(node).size;
        while self.held(H) >= self.capacity {
            let Some(oldest) = self.lru.back(&self.lists[H]) else { break };
            self.forget(oldest);
        }
        size
    }

    /// A name drops out of H.
    fn forget(&mut self, node: u32) {
        if self.has(node, NEW) && !self.config.grow_only {
            self.new_names = self.new_names.saturating_sub(1);
        }
        let key = self.lru.get(node).key;
        self.lru.unlink(&mut self.lists[H], node);
        self.lru.release(node);
        self.slots.remove(&key);
    }

    /// SR-LRU's victim: SR's oldest, or R's when SR is empty.
    fn lru_victim(&self) -> Option<Key> {
        let node = self.lru.back(&self.lists[SR]).or_else(|| self.lru.back(&self.lists[R]))?;
        Some(self.lru.get(node).key)
    }

    /// CR-LFU's victim: the newest of the least count.
    fn lfu_victim(&self) -> Option<Key> {
        let (_, list) = self.by_frequency.iter().next()?;
        let head = self.lfu.iter(list).next()?;
        Some(head.key)
    }

    /// One eviction by the experts: the drawn expert's victim goes, and enters its history
    /// unless both experts named it.
    fn evict_by_experts(&mut self) -> Option<(Key, u32)> {
        let by_lru = self.lru_victim()?;
        let by_lfu = self.lfu_victim()?;
        let draw = self.rng.below(100) as f64 / 100.0;
        let (victim, expert) =
            if draw < self.weights[BY_LRU] { (by_lru, BY_LRU) } else { (by_lfu, BY_LFU) };
        let size = self.retire(victim);
        if by_lru != by_lfu {
            self.remember(victim, size, expert);
        }
        Some((victim, size))
    }

    fn remember(&mut self, key: Key, size: u32, expert: usize) {
        let (half, charge, unit) = (self.capacity / 2.0, self.charge(size), self.unit);
        let ghosts = &mut self.ghosts;
        if let Some(node) = ghosts.index.remove(&key) {
            ghosts.arena.take(&mut ghosts.lists, node);
        }
        let list = &mut ghosts.lists[expert];
        while list.charge(unit) as f64 + charge > half {
            let Some(oldest) = ghosts.arena.back(list) else { break };
            let gone = ghosts.arena.get(oldest).key;
            ghosts.arena.unlink(list, oldest);
            ghosts.arena.release(oldest);
            ghosts.index.remove(&gone);
        }
        if charge <= half {
            let node = ghosts.arena.alloc(key, size, expert as u32);
            ghosts.arena.push_front(&mut ghosts.lists[expert], node);
            ghosts.index.insert(key, node);
        }
    }

    /// A miss on a name in an expert's history shrinks that expert's weight; the name goes.
    fn regret(&mut self, key: Key) {
        if let Some(node) = self.ghosts.index.remove(&key) {
            let expert = self.ghosts.arena.get(node).aux as usize;
            self.ghosts.arena.take(&mut self.ghosts.lists, node);
            self.weights[expert] *= (-self.rate).exp();
        }
        let lru = self.weights[BY_LRU] / (self.weights[BY_LRU] + self.weights[BY_LFU]);
        self.weights = [lru, 1.0 - lru];
    }

    /// Every N requests: λ follows the hit ratio's change, or restarts after ten periods
    /// without gain.
    fn update_rate(&mut self) {
        let period = self.capacity;
        let hit_ratio = if self.config.integer_hit_ratio {
            (self.hits / period as u64) as f64
        } else {
            self.hits as f64 / period
        };
        let delta_ratio = hit_ratio - self.previous_hit_ratio;
        let delta_rate = self.rate - self.previous_rate;
        self.previous_rate = self.rate;
        self.previous_hit_ratio = hit_ratio;
        if delta_rate != 0.0 {
            let sign = if delta_ratio / delta_rate > 0.0 { 1.0 } else { -1.0 };
            let next = self.rate + sign * (self.rate * delta_rate).abs();
            self.rate = if next > 0.001 { next } else { 0.0001 };
            self.unlearned = 0;
        } else if hit_ratio == 0.0 || delta_ratio <= 0.0 {
            self.unlearned += 1;
        } else if self.unlearned >= UNLEARN_AFTER {
            self.unlearned = 0;
            self.rate = random_rate(&mut self.rng);
        }
        self.hits = 0;
    }

    fn count_request(&mut self) {
        if self.rate_due {
            self.rate_due = false;
            self.update_rate();
        }
        self.requests += 1;
        if self.capacity >= 1.0 && self.requests.is_multiple_of(self.capacity as u64) {
            self.rate_due = true;
        }
    }

    /// Links a resident key's CR-LFU node at the head of its count's list.
    fn count_in(&mut self, key: Key, size: u32, frequency: u64) -> u32 {
        let node = self.lfu.alloc(key, size, 0);
        self.lfu.push_front(self.by_frequency.entry(frequency).or_default(), node);
        node
    }
}

impl Eviction for Cacheus {
    fn peek(&self, key: Key) -> Option<u32> {
        let slot = self.slots.get(&key)?;
        slot.lfu.map(|_| self.lru.get(slot.lru).size)
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let resident = self.peek(req.key).is_some();
        if !resident {
            if req.op != Op::Lookup {
                self.count_request();
            }
            return None;
        }
        self.hits += 1;
        self.count_request();
        let slot = *self.slots.get(&req.key).expect("resident");
        // SR-LRU: a hit in R goes to R's head; one in SR moves to R, R's overflow to SR.
        if self.list_of(slot.lru) == R {
            self.lru.move_to_front(&mut self.lists[R], slot.lru);
        } else {
            let was_demoted = self.has(slot.lru, DEMOTED);
            self.set_flag(slot.lru, NEW | DEMOTED, false);
            self.relink(slot.lru, R);
            self.demote_while(0.0);
            if was_demoted && !self.config.grow_only {
                // A key demoted from R came back: R is too small.
                let delta = (self.new_names as f64 / self.demoted as f64).max(1.0);
                self.sr_target = (self.sr_target - delta).max(1.0);
                self.demoted -= 1;
            }
        }
        // CR-LFU: one more reference.
        let lfu = slot.lfu.expect("resident");
        let list = self.by_frequency.get_mut(&slot.frequency).expect("a count's list");
        self.lfu.unlink(list, lfu);
        if list.is_empty() {
            self.by_frequency.remove(&slot.frequency);
        }
        let frequency = slot.frequency + 1;
        self.lfu.push_front(self.by_frequency.entry(frequency).or_default(), lfu);
        self.slots.get_mut(&req.key).expect("resident").frequency = frequency;
        Some(self.lru.get(slot.lru).size)
    }

    /// The miss's regret, the experts' evictions for room, then SR-LRU's own: a new key
    /// enters SR, whose oldest leave for H while SR would pass its target; a key named in H
    /// enters R, demoting R's oldest.
    fn prepare_insert(&mut self, req: &Request, sink: &mut Sink) {
        self.regret(req.key);
        let charge = self.charge(req.size);
        while self.held(R) + self.held(SR) + charge > self.capacity {
            let Some((key, size)) = self.evict_by_experts() else { break };
            sink.evicted(key, size);
        }
        let named = self.slots.get(&req.key).map(|s| s.lru);
        match named {
            Some(node) => {
                self.demote_while(charge);
                if self.has(node, NEW) {
                    // A key that left SR new came back: SR is too small.
                    let (delta, most) = if self.config.grow_only {
                        let steps = self.demoted / self.new_names.max(1);
                        (steps.max(1) as f64, self.held(R) + self.held(SR) - 1.0)
                    } else {
                        let ratio = self.demoted as f64 / self.new_names.max(1) as f64;
                        (ratio.max(1.0), self.held(R) + self.held(SR) + charge - 1.0)
                    };
                    self.sr_target = (self.sr_target + delta).min(most);
                }
                self.drain_sr(0.0, sink);
            }
            None => self.drain_sr(charge, sink),
        }
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        self.evict_by_experts()
    }

    fn insert(&mut self, req: &Request) {
        let size = req.size;
        match self.slots.get(&req.key).copied() {
            Some(slot) => {
                // Back from H: into R, its count resumed.
                if self.has(slot.lru, NEW) {
                    if !self.config.grow_only {
                        self.new_names -= 1;
                    }
                    self.set_flag(slot.lru, NEW, false);
                }
                self.lru.resize(&mut self.lists[H], slot.lru, size);
                self.relink(slot.lru, R);
                let frequency = slot.frequency + 1;
                let lfu = self.count_in(req.key, size, frequency);
                self.slots.insert(req.key, Slot { lru: slot.lru, frequency, lfu: Some(lfu) });
            }
            None => {
                let node = self.lru.alloc(req.key, size, SR as u32 | NEW);
                self.lru.push_front(&mut self.lists[SR], node);
                let lfu = self.count_in(req.key, size, 1);
                self.slots.insert(req.key, Slot { lru: node, frequency: 1, lfu: Some(lfu) });
            }
        }
    }

    /// A removed key leaves its name in H, as an evicted one does (libCacheSim's too).
    fn remove(&mut self, key: Key) -> Option<u32> {
        let size = self.peek(key)?;
        self.retire(key);
        Some(size)
    }

    fn used(&self) -> u64 {
        self.lists[R].charge(self.unit) + self.lists[SR].charge(self.unit)
    }

    fn resident(&self) -> u64 {
        self.lists[R].len + self.lists[SR].len
    }

    fn label(&self) -> String {
        "cacheus".into()
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("lru_weight", self.weights[BY_LRU]),
            ("learning_rate", self.rate),
            ("sr_target", self.sr_target),
        ]
    }
}

impl Cacheus {
    /// SR's oldest leave for H (evictions) while SR, with `room` more, passes its target.
    fn drain_sr(&mut self, room: f64, sink: &mut Sink) {
        while self.held(SR) + room > self.sr_target {
            let Some(node) = self.lru.back(&self.lists[SR]) else { break };
            let key = self.lru.get(node).key;
            let size = self.retire(key);
            sink.evicted(key, size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;
    use tiercache_core::{Action, Decision, TierId};

    fn cacheus(amount: u64, config: &CacheusConfig) -> Cacheus {
        Cacheus::build(config, Capacity { amount, unit: Unit::Objects }).unwrap()
    }

    /// A miss as the frame runs one: the policy's own evictions, room, then the insertion.
    fn miss(policy: &mut Cacheus, key: Key, evicted: &mut Vec<Key>) {
        let req = Request::read(key, 4096);
        let mut decision = Decision::default();
        policy.prepare_insert(&req, &mut Sink::new(&mut decision, TierId(0)));
        for action in &decision.actions {
            if let Action::Evict { key, .. } = action {
                evicted.push(*key);
            }
        }
        while policy.used() + 1 > 100 {
            evicted.push(policy.evict(&req).unwrap().0);
        }
        policy.insert(&req);
    }

    /// Keys hit twice live in R; a scan of new keys ten times the cache passes through SR and
    /// leaves them there, and the capacity holds throughout.
    #[test]
    fn a_scan_passes_through_sr_and_leaves_r_alone() {
        for config in
            [CacheusConfig::default(), CacheusConfig { grow_only: true, ..Default::default() }]
        {
            let mut policy = cacheus(100, &config);
            let mut evicted = Vec::new();
            for key in 0..30 {
                miss(&mut policy, key, &mut evicted);
                policy.access(&Request::read(key, 4096)).unwrap();
            }
            for key in 1000..2000 {
                miss(&mut policy, key, &mut evicted);
                assert!(policy.used() <= 100);
            }
            let hot_left = (0..30).filter(|k| policy.peek(*k).is_some()).count();
            assert!(hot_left >= 27, "{hot_left} of 30 keys hit twice left ({config:?})");
            assert_eq!(policy.used(), policy.resident());
        }
    }

    /// CR-LFU's victim is the newest key of the least count; SR-LRU's is SR's oldest.
    #[test]
    fn the_experts_name_their_victims() {
        let mut policy = cacheus(100, &CacheusConfig::default());
        let mut evicted = Vec::new();
        for key in 0..5 {
            miss(&mut policy, key, &mut evicted);
        }
        policy.access(&Request::read(4, 4096)).unwrap();
        assert_eq!(policy.lfu_victim(), Some(3));
        assert_eq!(policy.lru_victim(), Some(0));
    }

    /// The same seed replays the same evictions; a name in an expert's history costs that
    /// expert weight when it misses.
    #[test]
    fn a_seed_replays_and_regret_moves_the_weights() {
        let run = |seed| {
            let mut policy = cacheus(100, &CacheusConfig { seed, ..Default::default() });
            let mut evicted = Vec::new();
            let mut draw = SeededRng::new(11);
            for _ in 0..5000 {
                let key = draw.below(150);
                if policy.access(&Request::read(key, 4096)).is_none() {
                    miss(&mut policy, key, &mut evicted);
                }
            }
            (evicted, policy.weights)
        };
        let (first, weights) = run(3);
        assert_eq!(run(3).0, first);
        assert!((weights[BY_LRU] + weights[BY_LFU] - 1.0).abs() < 1e-9);
        assert_ne!(weights[BY_LRU], 0.5, "no regret moved the weights");
    }
}
