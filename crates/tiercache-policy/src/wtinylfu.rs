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
//! libCacheSim's `WTinyLFU` (the same window and segments) departs from the paper in how it
//! counts and in how keys move; `libcachesim_rules=true` runs its rules (as libcachesim 0.3.5's
//! source has them): counts kept as its counting Bloom filter keeps them (sized for 0.1% errors,
//! every probe raised; in bytes, exact), raised on each insertion, each main-cache hit and each
//! candidate the window gives up, and halved after 32 times the main cache's capacity of
//! main-cache hits; the window unbounded until the cache is full, then drained into the main
//! cache while that has room, each candidate entering the first segment with room (probation,
//! a fifth, then protected), and once it has none one duel decides. A hit in probation moves the
//! key to protected, whose least recent keys cool back to probation. Where libCacheSim evicts
//! outside an eviction (probation over its share after a cooling, or more than one key to fit
//! a large candidate), the keys leave the segments at once and the next evictions take them
//! first. With these rules ours is identical to libCacheSim in objects on CloudPhysics and
//! within 0.23 points in bytes, the rest not traced (the paper's rules: up to 1.9 and 3.4
//! points apart). `tests/peer_libcachesim.rs` holds both.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, KeyMap, Op, RejectReason, Request, Unit};

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
    /// libCacheSim's counting and movement (see the module comment).
    pub libcachesim_rules: bool,
}

impl Default for WTinyLfuConfig {
    fn default() -> WTinyLfuConfig {
        WTinyLfuConfig {
            window_ratio: 0.01,
            protected_ratio: 0.8,
            sample_factor: 10,
            libcachesim_rules: false,
        }
    }
}

const WINDOW: u32 = 0;
const PROBATION: u32 = 1;
const PROTECTED: u32 = 2;
/// With libCacheSim's rules: keys it evicts at once where the frame evicts only on a miss (see
/// [`WTinyLfu::doom`]).
const DOOMED: u32 = 3;

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

/// libCacheSim's counting Bloom filter: sized for `entries` keys at 0.1% false positives (14.4
/// counters a key, 10 probes), each probe `(a + i·b) mod counters` with `a` and `b` the low 32
/// bits of two XXH64 hashes of the key's 8 bytes; a key's count is its probes' least, and
/// adding raises every probe (its source is named for minimal increment, which raises only the
/// probes at the least, but the test for that guards only a debug print).
struct Filter {
    counters: Vec<u32>,
    probes: u32,
}

const FILTER_SEEDS: [u64; 2] = [0x1234_5678, 0x1234_4321];

impl Filter {
    fn new(entries: u64) -> Filter {
        // ln² 2 as libCacheSim writes it, so that the counters round alike.
        let per_key = -(0.001f64.ln()) / 0.480453013918201;
        let probes = (std::f64::consts::LN_2 * per_key).ceil() as u32;
        let counters = ((per_key * entries as f64).ceil() as u64).clamp(2 * probes as u64, 1 << 28);
        Filter { counters: vec![0; counters as usize], probes }
    }

    /// A key's probes: `(a + i·b) mod n` for `a` and `b` its two hashes, `n` the counters.
    fn slots(&self, key: Key) -> impl Iterator<Item = usize> + use<> {
        let hash = |seed| twox_hash::XxHash64::oneshot(seed, &key.to_le_bytes()) as u32;
        let (a, b) = (hash(FILTER_SEEDS[0]), hash(FILTER_SEEDS[1]));
        let n = self.counters.len() as u32;
        (0..self.probes).map(move |i| (a.wrapping_add(i.wrapping_mul(b)) % n) as usize)
    }

    fn get(&self, key: Key) -> u32 {
        self.slots(key).map(|x| self.counters[x]).min().unwrap_or(0)
    }

    fn add(&mut self, key: Key) {
        for x in self.slots(key) {
            self.counters[x] += 1;
        }
    }

    fn halve(&mut self) {
        self.counters.iter_mut().for_each(|c| *c >>= 1);
    }
}

/// libCacheSim's counts, halved after `period` main-cache hits: its filter in objects; in
/// bytes, where it sizes the filter for as many keys as the cache has bytes (gigabytes of
/// counters, so that keys never collide), exact counts.
struct Counts {
    filter: Option<Filter>,
    exact: KeyMap<u32>,
    main_hits: u64,
    period: u64,
}

impl Counts {
    fn add(&mut self, key: Key) {
        match &mut self.filter {
            Some(filter) => filter.add(key),
            None => *self.exact.entry(key).or_insert(0) += 1,
        }
    }

    fn get(&self, key: Key) -> u32 {
        match &self.filter {
            Some(filter) => filter.get(key),
            None => self.exact.get(&key).copied().unwrap_or(0),
        }
    }

    fn main_hit(&mut self, key: Key) {
        self.add(key);
        self.main_hits += 1;
        if self.main_hits >= self.period {
            self.main_hits = 0;
            match &mut self.filter {
                Some(filter) => filter.halve(),
                None => self.exact.retain(|_, count| {
                    *count >>= 1;
                    *count > 0
                }),
            }
        }
    }
}

pub struct WTinyLfu {
    arena: Arena,
    /// Indexed by a node's `aux`: the window, probation, protected, doomed.
    lists: [List; 4],
    map: KeyIndex,
    unit: Unit,
    window_target: u64,
    protected_target: u64,
    sketch: Sketch,
    /// With libCacheSim's rules: the main cache's and probation's capacities, and the counts.
    main_target: u64,
    probation_target: u64,
    counts: Option<Counts>,
}

impl crate::frame::Registered for WTinyLfu {
    type Config = WTinyLfuConfig;
    const VARIANTS: &'static [&'static str] =
        &["window_ratio=0.2,protected_ratio=0.5", "libcachesim_rules=true"];
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
        let protected_target = (main as f64 * config.protected_ratio) as u64;
        let counts = config.libcachesim_rules.then(|| Counts {
            filter: (capacity.unit == Unit::Objects).then(|| Filter::new(main)),
            exact: KeyMap::default(),
            main_hits: 0,
            period: 32 * main,
        });
        Ok(WTinyLfu {
            arena: Arena::with_capacity(expected),
            lists: [List::default(); 4],
            map: KeyIndex::with_capacity(expected),
            unit: capacity.unit,
            window_target,
            protected_target,
            sketch: Sketch::new(expected as u64, config.sample_factor),
            main_target: main,
            // Probation's share as libCacheSim states it (1:4, a fifth), not as 1 - 0.8 rounds
            // in binary (a hair under a fifth, which rounds 99 objects of 495 down to 98).
            probation_target: (main as f64 * ((1.0 - config.protected_ratio) * 1e9).round() / 1e9)
                as u64,
            counts,
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

    fn main_used(&self) -> u64 {
        self.used_by(PROBATION) + self.used_by(PROTECTED)
    }

    /// A key libCacheSim evicts where the frame cannot (at a hit, or more than one for one
    /// candidate): it leaves the segments at once, so they count as libCacheSim's do, and stays
    /// resident until the next evictions take it, before any other key. A hit on it in between
    /// (libCacheSim's miss) leaves it where it is.
    fn doom(&mut self, node: u32) {
        self.arena.relink(&mut self.lists, node, DOOMED);
    }

    /// libCacheSim's move of a candidate into the main cache (its SLRU's insertion): the first
    /// segment with room, probation then protected; with room in neither, the main cache's
    /// victims go until the candidate fits, and it enters probation.
    fn enter_main(&mut self, node: u32) {
        let charge = self.unit.charge(self.arena.get(node).size);
        let to = if self.used_by(PROBATION) + charge <= self.probation_target {
            PROBATION
        } else if self.used_by(PROTECTED) + charge <= self.protected_target {
            PROTECTED
        } else {
            while self.main_used() + charge > self.main_target {
                let Some(victim) = self.main_victim() else { break };
                self.doom(victim);
            }
            PROBATION
        };
        self.arena.relink(&mut self.lists, node, to);
    }

    /// One eviction by libCacheSim's rules: keys it already evicted go first; then candidates
    /// drain into the main cache while it has room, then one duel by counts; each candidate
    /// weighed is counted once more.
    fn evict_as_libcachesim(&mut self) -> Option<(Key, u32)> {
        if let Some(doomed) = self.arena.back(&self.lists[DOOMED as usize]) {
            return Some(self.forget(doomed));
        }
        loop {
            let Some(candidate) = self.arena.back(&self.lists[WINDOW as usize]) else {
                let victim = self.main_victim()?;
                return Some(self.forget(victim));
            };
            let key = self.arena.get(candidate).key;
            let charge = self.unit.charge(self.arena.get(candidate).size);
            if self.main_used() + charge <= self.main_target {
                self.enter_main(candidate);
                self.counts.as_mut().expect("counts").add(key);
                continue;
            }
            let victim = self.main_victim();
            let counts = self.counts.as_mut().expect("libCacheSim's rules keep counts");
            let Some(victim) = victim else {
                counts.add(key);
                return Some(self.forget(candidate));
            };
            let wins = counts.get(key) > counts.get(self.arena.get(victim).key);
            counts.add(key);
            if wins {
                let gone = self.forget(victim);
                self.enter_main(candidate);
                return Some(gone);
            }
            return Some(self.forget(candidate));
        }
    }

    /// Protected's least recent keys back to probation's head while protected is over its share.
    fn cool_protected(&mut self) {
        while self.used_by(PROTECTED) > self.protected_target {
            let Some(tail) = self.arena.back(&self.lists[PROTECTED as usize]) else { break };
            self.arena.relink(&mut self.lists, tail, PROBATION);
        }
    }

    /// The main cache's victim: probation's least recent key, else protected's.
    fn main_victim(&self) -> Option<u32> {
        self.arena
            .back(&self.lists[PROBATION as usize])
            .or_else(|| self.arena.back(&self.lists[PROTECTED as usize]))
    }

    /// A hit by libCacheSim's rules: a window hit moves the key up the window, uncounted; a
    /// main-cache hit counts, and moves the key to protected's head, protected's least recent
    /// cooling to probation.
    fn access_as_libcachesim(&mut self, req: &Request) -> Option<u32> {
        let node = self.map.get(req.key)?;
        let n = *self.arena.get(node);
        match n.aux {
            WINDOW => self.arena.move_to_front(&mut self.lists[WINDOW as usize], node),
            DOOMED => {}
            PROTECTED => {
                self.counts.as_mut().expect("counts").main_hit(req.key);
                self.arena.move_to_front(&mut self.lists[PROTECTED as usize], node);
            }
            _ => {
                self.counts.as_mut().expect("counts").main_hit(req.key);
                self.arena.relink(&mut self.lists, node, PROTECTED);
                self.cool_protected();
                // libCacheSim evicts probation's least recent keys here while probation is over
                // its share (it can be: the segments' shares are rounded down, and a candidate
                // with no segment's room enters probation).
                while self.used_by(PROBATION) > self.probation_target {
                    let Some(tail) = self.arena.back(&self.lists[PROBATION as usize]) else {
                        break;
                    };
                    self.doom(tail);
                }
            }
        }
        Some(n.size)
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
        if self.counts.is_some() {
            return self.access_as_libcachesim(req);
        }
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
                self.cool_protected();
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
        if self.counts.is_some() {
            return self.evict_as_libcachesim();
        }
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
        if let Some(counts) = &mut self.counts {
            // The window takes every new key until the cache is full; evictions drain it.
            counts.add(req.key);
            return;
        }
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

    /// XXH64 of a key's 8 bytes, the filter's hash, as the reference algorithm gives it
    /// (values from an implementation of the xxHash specification written apart from this one).
    #[test]
    fn the_filter_hashes_keys_with_xxh64() {
        let hash = |key: u64, seed| twox_hash::XxHash64::oneshot(seed, &key.to_le_bytes());
        assert_eq!(hash(106, FILTER_SEEDS[0]), 0x4a51_cafe_29ad_c6c0);
        assert_eq!(hash(106, FILTER_SEEDS[1]), 0x7c87_1863_385b_71f7);
        assert_eq!(hash(1747, FILTER_SEEDS[0]), 0x9605_df70_2789_9f87);
    }

    /// Adding raises every one of a key's probes, whatever its count (libCacheSim's filter
    /// is named for minimal increment, but its `if` around the raise holds only a debug print):
    /// a key sharing a probe with a frequent one raises that shared counter too.
    #[test]
    fn the_filter_raises_every_probe_and_halves() {
        let mut filter = Filter::new(100);
        assert_eq!((filter.counters.len(), filter.probes), (1438, 10));
        for _ in 0..6 {
            filter.add(7);
        }
        let sevens: Vec<usize> = filter.slots(7).collect();
        let (other, shared) = (8..10_000)
            .find_map(|k| filter.slots(k).find(|x| sevens.contains(x)).map(|x| (k, x)))
            .expect("some key shares a probe with key 7");
        filter.add(other);
        assert_eq!(filter.counters[shared], 7, "the shared probe is raised past the least");
        assert_eq!((filter.get(7), filter.get(other)), (6, 1));
        filter.halve();
        assert_eq!((filter.get(7), filter.get(other)), (3, 0));
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
