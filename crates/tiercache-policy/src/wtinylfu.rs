//! W-TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache Admission
//! Policy", ACM Transactions on Storage 13(4), 2017, section 5): a small LRU window (1% of the
//! cache) takes every new key; the rest is a segmented LRU, the main cache, 80% of it protected.
//! When a new key pushes the window's least recent key out, that candidate and the main cache's
//! victim (probation's least recent key, else protected's) are compared by TinyLFU, an
//! approximate count of each key's recent references, and the more frequent stays: a burst of
//! new keys passes through the window without flushing the keys the main cache holds for their
//! frequency. The window lets a new key gather references before it is judged.
//!
//! TinyLFU here is the paper's count-min sketch of 4-bit counters, four rows (one hash each),
//! as wide as the cache holds objects (at least 16), raised on every reference; after ten times
//! that many references every counter is halved (the paper's reset, section 3.3), so counts
//! follow the recent past. The doorkeeper (section 4.2), a space saving, is left out, as
//! Caffeine leaves it out; a candidate must be strictly more frequent than the victim to enter.
//!
//! libCacheSim's `WTinyLFU` (the same window and segments) counts in a counting Bloom filter,
//! raises counts on misses and main-cache hits only, and halves them after 32 times the main
//! cache's size of main-cache hits; `tests/peer_libcachesim.rs` states how far apart they are.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Op, RejectReason, Request, Unit};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::index::KeyIndex;
use crate::list::{Arena, List};
use crate::queue::expected_objects;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WTinyLfuConfig {
    /// The window's share of the capacity.
    pub window_ratio: f64,
    /// The protected segment's share of the main cache.
    pub protected_ratio: f64,
    /// References between resets, as a multiple of the sketch's width.
    pub sample_factor: u64,
}

impl Default for WTinyLfuConfig {
    fn default() -> WTinyLfuConfig {
        WTinyLfuConfig { window_ratio: 0.01, protected_ratio: 0.8, sample_factor: 10 }
    }
}

const WINDOW: u32 = 0;
const PROBATION: u32 = 1;
const PROTECTED: u32 = 2;

/// The count-min sketch of TinyLFU: four rows of 4-bit counters (a byte each here), halved
/// after `sample` increments.
struct Sketch {
    rows: [Vec<u8>; 4],
    mask: u64,
    increments: u64,
    sample: u64,
}

const SEEDS: [u64; 4] =
    [0x9E37_79B9_7F4A_7C15, 0xC2B2_AE3D_27D4_EB4F, 0x1656_67B1_9E37_79F9, 0xD6E8_FEB8_6659_FD93];

impl Sketch {
    fn new(objects: u64, sample_factor: u64) -> Sketch {
        let width = objects.max(16).next_power_of_two();
        let row = || vec![0u8; width as usize];
        Sketch {
            rows: [row(), row(), row(), row()],
            mask: width - 1,
            increments: 0,
            sample: width * sample_factor,
        }
    }

    fn slot(&self, key: Key, row: usize) -> usize {
        let mixed = (key ^ SEEDS[row]).wrapping_mul(SEEDS[(row + 1) % 4]);
        ((mixed ^ (mixed >> 29)) & self.mask) as usize
    }

    fn estimate(&self, key: Key) -> u8 {
        (0..4).map(|row| self.rows[row][self.slot(key, row)]).min().unwrap_or(0)
    }

    fn increment(&mut self, key: Key) {
        for row in 0..4 {
            let slot = self.slot(key, row);
            let counter = &mut self.rows[row][slot];
            *counter = (*counter + 1).min(15);
        }
        self.increments += 1;
        if self.increments >= self.sample {
            self.increments /= 2;
            for row in &mut self.rows {
                row.iter_mut().for_each(|c| *c /= 2);
            }
        }
    }
}

pub struct WTinyLfu {
    arena: Arena,
    /// Indexed by a node's `aux`: the window, probation, protected.
    lists: [List; 3],
    map: KeyIndex,
    unit: Unit,
    window_target: u64,
    protected_target: u64,
    sketch: Sketch,
}

impl crate::frame::Registered for WTinyLfu {
    type Config = WTinyLfuConfig;
    const VARIANTS: &'static [&'static str] = &["window_ratio=0.2,protected_ratio=0.5"];
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn validate(config: &WTinyLfuConfig) -> Result<(), PolicyError> {
        if !(config.window_ratio > 0.0 && config.window_ratio < 1.0) {
            return Err(PolicyError::bad("w-tinylfu", "window_ratio", "must be in (0, 1)"));
        }
        if !(0.0..1.0).contains(&config.protected_ratio) {
            return Err(PolicyError::bad("w-tinylfu", "protected_ratio", "must be in [0, 1)"));
        }
        if !(1..=1000).contains(&config.sample_factor) {
            return Err(PolicyError::bad("w-tinylfu", "sample_factor", "must be 1 to 1000"));
        }
        Ok(())
    }

    fn build(config: &WTinyLfuConfig, capacity: Capacity) -> Result<WTinyLfu, PolicyError> {
        let expected = expected_objects(capacity).min(1 << 24);
        let window_target = ((capacity.amount as f64 * config.window_ratio) as u64).max(1);
        let main = capacity.amount.saturating_sub(window_target);
        Ok(WTinyLfu {
            arena: Arena::with_capacity(expected),
            lists: [List::default(); 3],
            map: KeyIndex::with_capacity(expected),
            unit: capacity.unit,
            window_target,
            protected_target: (main as f64 * config.protected_ratio) as u64,
            sketch: Sketch::new(expected as u64, config.sample_factor),
        })
    }
}

impl WTinyLfu {
    fn used_by(&self, list: u32) -> u64 {
        self.lists[list as usize].charge(self.unit)
    }

    fn forget(&mut self, node: u32) -> (Key, u32) {
        let n = self.arena.take(&mut self.lists, node);
        self.map.remove(n.key);
        (n.key, n.size)
    }

    /// The main cache's victim: probation's least recent key, else protected's.
    fn main_victim(&self) -> Option<u32> {
        self.arena
            .back(&self.lists[PROBATION as usize])
            .or_else(|| self.arena.back(&self.lists[PROTECTED as usize]))
    }
}

impl Eviction for WTinyLfu {
    fn peek(&self, key: Key) -> Option<u32> {
        self.map.get(key).map(|node| self.arena.get(node).size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.map.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let Some(node) = self.map.get(req.key) else {
            // A miss counts as a reference, but a lookup that misses changes nothing.
            if req.op != Op::Lookup {
                self.sketch.increment(req.key);
            }
            return None;
        };
        self.sketch.increment(req.key);
        let n = *self.arena.get(node);
        match n.aux {
            WINDOW | PROTECTED => self.arena.move_to_front(&mut self.lists[n.aux as usize], node),
            _ => {
                self.arena.relink(&mut self.lists, node, PROTECTED);
                while self.used_by(PROTECTED) > self.protected_target {
                    let Some(tail) = self.arena.back(&self.lists[PROTECTED as usize]) else {
                        break;
                    };
                    self.arena.relink(&mut self.lists, tail, PROBATION);
                }
            }
        }
        Some(n.size)
    }

    fn admit(&mut self, req: &Request, _needs_room: bool) -> Result<(), RejectReason> {
        if self.unit.charge(req.size) > self.window_target {
            return Err(RejectReason::TooLarge);
        }
        Ok(())
    }

    /// The incoming key will push the window's least recent key (the candidate) out: the
    /// candidate and the main cache's victim duel by frequency, the loser leaves. If the window
    /// has room for the incoming key, the main cache gives up its victim.
    fn evict(&mut self, incoming: &Request) -> Option<(Key, u32)> {
        let overflows = self.used_by(WINDOW) + self.unit.charge(incoming.size) > self.window_target;
        let candidate = self.arena.back(&self.lists[WINDOW as usize]);
        let victim = self.main_victim();
        let loser = match (overflows, candidate, victim) {
            (true, Some(candidate), Some(victim)) => {
                let candidate_count = self.sketch.estimate(self.arena.get(candidate).key);
                let victim_count = self.sketch.estimate(self.arena.get(victim).key);
                if candidate_count > victim_count {
                    victim
                } else {
                    candidate
                }
            }
            (_, _, Some(victim)) => victim,
            (_, candidate, None) => candidate?,
        };
        Some(self.forget(loser))
    }

    /// A new key enters the window; what it pushes out moves into probation.
    fn insert(&mut self, req: &Request) {
        let node = self.arena.alloc(req.key, req.size, WINDOW);
        self.arena.push_front(&mut self.lists[WINDOW as usize], node);
        self.map.insert(req.key, node);
        while self.used_by(WINDOW) > self.window_target {
            let Some(tail) = self.arena.back(&self.lists[WINDOW as usize]) else { break };
            self.arena.relink(&mut self.lists, tail, PROBATION);
        }
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let node = self.map.get(key)?;
        Some(self.forget(node).1)
    }

    fn used(&self) -> u64 {
        self.lists.iter().map(|l| l.charge(self.unit)).sum()
    }

    fn resident(&self) -> u64 {
        self.lists.iter().map(|l| l.len).sum()
    }

    fn label(&self) -> String {
        "w-tinylfu".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    fn request(cache: &mut WTinyLfu, key: Key, capacity: u64) -> bool {
        if cache.access(&read(key)).is_some() {
            return true;
        }
        while cache.used() + 1 > capacity {
            cache.evict(&read(key));
        }
        cache.insert(&read(key));
        false
    }

    /// Keys referenced often keep their place in the main cache through a scan of new keys (five
    /// times the cache, within the sketch's sample), which pass through the window and lose
    /// their duels; the window takes each in turn. (A scan of far more distinct keys than the
    /// sketch is wide raises every counter through collisions: that is the sketch's error, not
    /// checked here.)
    #[test]
    fn a_scan_passes_through_the_window_without_flushing_frequent_keys() {
        let capacity = 100;
        let config = WTinyLfuConfig::default();
        let mut cache =
            WTinyLfu::build(&config, Capacity { amount: capacity, unit: Unit::Objects }).unwrap();
        for _ in 0..5 {
            for key in 0..90 {
                request(&mut cache, key, capacity);
            }
        }
        for key in 1000..1500 {
            request(&mut cache, key, capacity);
        }
        let kept = (0..90).filter(|&k| cache.peek(k).is_some()).count();
        assert!(kept >= 85, "only {kept} of 90 frequent keys survived the scan");
        assert!(cache.peek(1499).is_some(), "the newest key sits in the window");
        assert_eq!(cache.used(), capacity);
    }

    #[test]
    fn the_sketch_halves_its_counts_after_its_sample() {
        let mut sketch = Sketch::new(16, 1);
        for _ in 0..10 {
            sketch.increment(7);
        }
        assert_eq!(sketch.estimate(7), 10);
        for key in 100..106 {
            sketch.increment(key); // the 16th increment halves everything
        }
        assert_eq!(sketch.estimate(7), 5);
    }
}
