//! CLOCK-Pro (Jiang, Chen and Zhang, "CLOCK-Pro: An Effective Improvement of the CLOCK
//! Replacement", USENIX ATC'05): LIRS's reuse distances ([`crate::lirs`]) kept by clock hands
//! instead of stacks, so a hit only sets a reference bit. Every key is on one circular list in
//! the order of its last move to the head, tagged hot (resident), cold resident, or cold
//! non-resident (a name kept while the key is in its *test period*); a cold key is in its test
//! period from its insertion or its last move to the head until a hand passes it. A cold key
//! reused in its test period has a reuse distance below the hot keys' recency, and turns hot.
//! Three hands sweep from the oldest key towards the newest, wrapping:
//!
//! - the cold hand finds the victim: a cold resident key with its bit clear is evicted (its
//!   name stays while it is in its test period); with its bit set it moves to the head, turning
//!   hot if it is in its test period;
//! - the hot hand, when a key turns hot and the hot keys fill their share, demotes the first
//!   hot key with its bit clear (clearing the set ones it passes, which move to the head), and
//!   ends the test period of the cold keys it passes;
//! - the test hand ends test periods (dropping names) while the names outnumber the bound.
//!
//! The cold keys' share adapts (the paper's `m_c`): one more when a cold key is reused in its
//! test period, one less when a test period ends unused, within 1% and 99% of the cache (and
//! at least two keys). Until the cache is full, missed keys enter hot while more than the
//! minimum cold share is free, then cold. The names are bounded by the capacity (the paper's
//! bound). Where the paper is silent, this follows its authors' reference code as Caffeine's
//! simulator documents it: a key turning hot whose hot hand finds no key to demote before
//! reaching it stays cold, and moves to the head still in its test period.
//!
//! Sizes: the shares, the bound and the adaptation are in the capacity's unit (a key's charge).
//! libCacheSim's `ClockPro` (2025) is a different reading: it refuses to insert a key while
//! the cold keys fill their share and adapts by sizes differently; its own header puts it 9
//! points from PyClockPro's miss ratio on CloudPhysics. `tests/peer_libcachesim.rs` pins how
//! far apart the two are.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request, Unit};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::index::KeyIndex;
use crate::list::{Arena, List};
use crate::queue::expected_objects;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClockProConfig {
    /// The cold keys' least share of the capacity (at least two objects' worth).
    pub min_cold_ratio: f64,
    /// The cold keys' largest share.
    pub max_cold_ratio: f64,
    /// How many names of cold keys no longer resident are kept, as a share of the capacity.
    pub names_ratio: f64,
}

impl Default for ClockProConfig {
    fn default() -> ClockProConfig {
        ClockProConfig { min_cold_ratio: 0.01, max_cold_ratio: 0.99, names_ratio: 1.0 }
    }
}

/// A key's state in a node's `aux`: its status in the low bits, its reference bit above.
const HOT: u32 = 0;
const COLD: u32 = 1;
const COLD_IN_TEST: u32 = 2;
const NAME: u32 = 3;
const STATUS: u32 = 3;
const REFERENCED: u32 = 4;

fn resident(aux: u32) -> bool {
    aux & STATUS != NAME
}

fn resident_cold(aux: u32) -> bool {
    matches!(aux & STATUS, COLD | COLD_IN_TEST)
}

fn in_test(aux: u32) -> bool {
    matches!(aux & STATUS, COLD_IN_TEST | NAME)
}

fn hot(aux: u32) -> bool {
    aux & STATUS == HOT
}

pub struct ClockPro {
    arena: Arena,
    /// The clock, newest at the head; the hands step towards the head and wrap to the tail.
    clock: List,
    map: KeyIndex,
    unit: Unit,
    capacity: u64,
    hand_cold: Option<u32>,
    hand_hot: Option<u32>,
    hand_test: Option<u32>,
    /// Charges of the hot keys, the cold resident ones and the names; how many hot and cold
    /// resident keys there are, and how many keys are in their test period.
    hot: u64,
    cold: u64,
    names: u64,
    hot_keys: u64,
    cold_keys: u64,
    testing: u64,
    cold_target: u64,
    min_cold: u64,
    max_cold: u64,
    max_names: u64,
    /// Space free when the miss being inserted was found.
    free_at_miss: u64,
}

impl crate::frame::Registered for ClockPro {
    type Config = ClockProConfig;
    const VARIANTS: &'static [&'static str] = &["names_ratio=2", "min_cold_ratio=0.1"];
    const QUIET_HITS: bool = true;
    /// A hit sets a bit that the hands clear: told only a key's first hit an epoch, a bit
    /// cleared in between would stay clear, and the hands would decide otherwise.
    const COUNTS_HITS: bool = true;

    fn validate(config: &ClockProConfig) -> Result<(), PolicyError> {
        let share = |x: f64| x > 0.0 && x < 1.0;
        if !share(config.min_cold_ratio) {
            return Err(PolicyError::bad("clock-pro", "min_cold_ratio", "must be in (0, 1)"));
        }
        if !share(config.max_cold_ratio) || config.max_cold_ratio < config.min_cold_ratio {
            return Err(PolicyError::bad(
                "clock-pro",
                "max_cold_ratio",
                "must be in (0, 1) and at least min_cold_ratio",
            ));
        }
        if config.names_ratio.is_nan() || !(0.0..=4.0).contains(&config.names_ratio) {
            return Err(PolicyError::bad("clock-pro", "names_ratio", "must be in [0, 4]"));
        }
        Ok(())
    }

    fn build(config: &ClockProConfig, capacity: Capacity) -> Result<ClockPro, PolicyError> {
        let amount = capacity.amount;
        let min_cold = ((amount as f64 * config.min_cold_ratio) as u64).max(2).min(amount);
        let max_cold = ((amount as f64 * config.max_cold_ratio) as u64)
            .min(amount.saturating_sub(min_cold))
            .max(min_cold);
        let expected = expected_objects(capacity).min(1 << 24);
        Ok(ClockPro {
            arena: Arena::with_capacity(expected * 2),
            clock: List::default(),
            map: KeyIndex::with_capacity(expected * 2),
            unit: capacity.unit,
            capacity: amount,
            hand_cold: None,
            hand_hot: None,
            hand_test: None,
            hot: 0,
            cold: 0,
            names: 0,
            hot_keys: 0,
            cold_keys: 0,
            testing: 0,
            cold_target: min_cold,
            min_cold,
            max_cold,
            max_names: (amount as f64 * config.names_ratio) as u64,
            free_at_miss: 0,
        })
    }
}

impl ClockPro {
    fn aux(&self, node: u32) -> u32 {
        self.arena.get(node).aux
    }

    fn charge(&self, node: u32) -> u64 {
        self.unit.charge(self.arena.get(node).size)
    }

    /// One step of a hand: towards the head, from the head to the tail.
    fn step(&self, node: u32) -> u32 {
        self.arena.newer(node).or_else(|| self.arena.back(&self.clock)).expect("a clock")
    }

    /// Sets `node`'s status (its bit as given), keeping the totals.
    fn set(&mut self, node: u32, aux: u32) {
        let charge = self.charge(node);
        let old = self.aux(node);
        self.count(old, charge, false);
        self.count(aux, charge, true);
        self.arena.get_mut(node).aux = aux;
    }

    fn count(&mut self, aux: u32, charge: u64, add: bool) {
        let apply = |total: &mut u64, by: u64| {
            *total = if add { *total + by } else { *total - by };
        };
        match aux & STATUS {
            HOT => {
                apply(&mut self.hot, charge);
                apply(&mut self.hot_keys, 1);
            }
            COLD | COLD_IN_TEST => {
                apply(&mut self.cold, charge);
                apply(&mut self.cold_keys, 1);
            }
            _ => apply(&mut self.names, charge),
        }
        if in_test(aux) {
            apply(&mut self.testing, 1);
        }
    }

    /// Moves each hand on `node` one step, before `node` leaves its place.
    fn move_hands_off(&mut self, node: u32) {
        let next = (self.clock.len > 1).then(|| self.step(node));
        for hand in [&mut self.hand_cold, &mut self.hand_hot, &mut self.hand_test] {
            if *hand == Some(node) {
                *hand = next;
            }
        }
    }

    /// Moves `node` to the head with `status`, its bit cleared.
    fn move_to_head(&mut self, node: u32, status: u32) {
        self.move_hands_off(node);
        self.arena.move_to_front(&mut self.clock, node);
        self.set(node, status);
    }

    /// Takes `node` off the clock and forgets its key.
    fn drop_node(&mut self, node: u32) -> (Key, u32) {
        self.move_hands_off(node);
        let charge = self.charge(node);
        self.count(self.aux(node), charge, false);
        let n = *self.arena.get(node);
        self.arena.unlink(&mut self.clock, node);
        self.arena.release(node);
        self.map.remove(n.key);
        (n.key, n.size)
    }

    fn adjust_cold_target(&mut self, up: bool, charge: u64) {
        self.cold_target = match up {
            true => self.cold_target + charge,
            false => self.cold_target.saturating_sub(charge),
        }
        .clamp(self.min_cold, self.max_cold);
    }

    /// Ends `node`'s test period: a name is dropped, a resident key stays cold; either way
    /// the cold share shrinks, unless the key was reused meanwhile.
    fn end_test(&mut self, node: u32) {
        let aux = self.aux(node);
        if !in_test(aux) {
            return;
        }
        let charge = self.charge(node);
        if resident_cold(aux) {
            self.set(node, COLD | (aux & REFERENCED));
        } else {
            self.drop_node(node);
        }
        self.adjust_cold_target(aux & REFERENCED != 0, charge);
    }

    /// Whether `node` (`key`'s), a cold key reused in its test period, may turn hot: the cold
    /// share grows, and the hot hand must make room by demoting a hot key it reaches before
    /// `node`. The hand may end `node`'s test period on its way (a name is then dropped).
    fn can_promote(&mut self, key: Key, node: u32) -> bool {
        let testing = |c: &Self| c.map.get(key) == Some(node) && in_test(c.aux(node));
        if !testing(self) {
            return false;
        }
        let charge = self.charge(node);
        self.adjust_cold_target(true, charge);
        while self.hot + charge > self.capacity.saturating_sub(self.cold_target) {
            if !testing(self) || !self.run_hand_hot(node) {
                return false;
            }
        }
        testing(self)
    }

    /// The hot hand, until it demotes a hot key or reaches `trigger`; whether it demoted one.
    fn run_hand_hot(&mut self, trigger: u32) -> bool {
        let mut demoted = false;
        while let Some(at) = self.hand_hot.filter(|&at| at != trigger) {
            let aux = self.aux(at);
            if hot(aux) {
                if aux & REFERENCED != 0 {
                    self.move_to_head(at, HOT);
                } else {
                    self.move_to_head(at, COLD);
                    demoted = true;
                    break;
                }
            } else {
                self.hand_hot = Some(self.step(at));
                self.end_test(at);
            }
        }
        self.next_hand_hot();
        demoted
    }

    /// The cold hand at one key: the evicted key if it evicted one.
    fn run_hand_cold(&mut self) -> Option<(Key, u32)> {
        let at = self.hand_cold?;
        let aux = self.aux(at);
        debug_assert!(resident_cold(aux));
        let mut evicted = None;
        if aux & REFERENCED != 0 {
            let key = self.arena.get(at).key;
            let status = match in_test(aux) && self.can_promote(key, at) {
                true => HOT,
                false => COLD_IN_TEST,
            };
            self.move_to_head(at, status);
        } else {
            let n = *self.arena.get(at);
            if in_test(aux) {
                self.set(at, NAME);
                self.hand_cold = Some(self.step(at));
            } else {
                self.drop_node(at);
            }
            evicted = Some((n.key, n.size));
            while self.names > self.max_names {
                let Some(test) = self.hand_test else { break };
                self.end_test(test);
                self.next_hand_test();
            }
        }
        self.next_hand_cold();
        evicted
    }

    /// With no cold resident key (only after removals), the hot hand's first hot key turns
    /// cold, so that the cold hand has one.
    fn demote_any(&mut self) {
        self.next_hand_hot();
        if let Some(at) = self.hand_hot {
            self.move_to_head(at, COLD);
            self.organize();
        }
    }

    fn next_hand_cold(&mut self) {
        if self.cold_keys == 0 {
            self.hand_cold = None;
            return;
        }
        let mut at = self.hand_cold.or_else(|| self.arena.back(&self.clock)).expect("a clock");
        while !resident_cold(self.aux(at)) {
            at = self.step(at);
        }
        self.hand_cold = Some(at);
    }

    fn next_hand_hot(&mut self) {
        if self.hot_keys == 0 {
            self.hand_hot = None;
            return;
        }
        let mut at = self.hand_hot.or_else(|| self.arena.back(&self.clock)).expect("a clock");
        while !hot(self.aux(at)) {
            let passed = at;
            at = self.step(at);
            self.end_test(passed);
        }
        self.hand_hot = Some(at);
        self.next_hand_test();
    }

    fn next_hand_test(&mut self) {
        if self.testing == 0 {
            self.hand_test = None;
            return;
        }
        let start = self.hand_test.or(self.hand_hot).or_else(|| self.arena.back(&self.clock));
        let mut at = start.expect("a clock");
        while !in_test(self.aux(at)) {
            at = self.step(at);
        }
        self.hand_test = Some(at);
    }

    fn organize(&mut self) {
        self.next_hand_cold();
        self.next_hand_hot();
        self.next_hand_test();
    }
}

impl Eviction for ClockPro {
    fn peek(&self, key: Key) -> Option<u32> {
        let node = self.map.get(key)?;
        resident(self.aux(node)).then(|| self.arena.get(node).size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.map.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let node = self.map.get(req.key)?;
        let aux = self.aux(node);
        if !resident(aux) {
            return None;
        }
        self.arena.get_mut(node).aux = aux | REFERENCED;
        Some(self.arena.get(node).size)
    }

    fn prepare_insert(&mut self, _req: &Request, _sink: &mut crate::frame::Sink) {
        self.free_at_miss = self.capacity.saturating_sub(self.used());
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        loop {
            if self.hand_cold.is_none() {
                self.next_hand_cold();
            }
            if self.hand_cold.is_none() {
                if self.hot_keys == 0 {
                    return None;
                }
                self.demote_any();
                self.hand_cold?;
            }
            if let Some(evicted) = self.run_hand_cold() {
                return Some(evicted);
            }
        }
    }

    fn insert(&mut self, req: &Request) {
        let name = self.map.get(req.key);
        if let Some(node) = name {
            // A name: the key comes back where its name is, at whatever size it now has.
            let (aux, old) = (self.aux(node), self.charge(node));
            self.count(aux, old, false);
            self.arena.resize(&mut self.clock, node, req.size);
            self.count(aux, self.charge(node), true);
        }
        // Until the cache is full, no key needed evicting: while the least cold share stays
        // free besides the key, it enters hot; then cold. (In objects these are the paper's
        // "free > minimum" and "free > 0"; in bytes a full cache still has a few bytes free.)
        let charge = self.unit.charge(req.size);
        let status = if self.free_at_miss >= charge + self.min_cold {
            HOT
        } else if self.free_at_miss >= charge {
            COLD_IN_TEST
        } else {
            match name {
                Some(node) if self.can_promote(req.key, node) => HOT,
                _ => COLD_IN_TEST,
            }
        };
        match self.map.get(req.key) {
            Some(node) => self.move_to_head(node, status),
            None => {
                let node = self.arena.alloc(req.key, req.size, status);
                self.arena.push_front(&mut self.clock, node);
                self.count(status, self.charge(node), true);
                self.map.insert(req.key, node);
            }
        }
        self.organize();
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let node = self.map.get(key)?;
        let was_resident = resident(self.aux(node));
        let (_, size) = self.drop_node(node);
        self.organize();
        was_resident.then_some(size)
    }

    fn used(&self) -> u64 {
        self.hot + self.cold
    }

    fn resident(&self) -> u64 {
        self.hot_keys + self.cold_keys
    }

    fn label(&self) -> String {
        "clock-pro".into()
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        vec![("cold_target", self.cold_target as f64)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    /// A request as the frame runs it; whether it hit.
    fn run(c: &mut ClockPro, key: Key) -> bool {
        run_sized(c, read(key))
    }

    fn run_sized(c: &mut ClockPro, req: Request) -> bool {
        if c.access(&req).is_some() {
            return true;
        }
        let mut decision = tiercache_core::Decision::default();
        let mut sink = crate::frame::Sink::new(&mut decision, tiercache_core::TierId(0));
        c.prepare_insert(&req, &mut sink);
        while c.used() + c.unit.charge(req.size) > c.capacity {
            c.evict(&req).expect("something to evict");
        }
        c.insert(&req);
        false
    }

    /// The paper's point: keys reused at short distances turn hot, and a scan of keys used
    /// once passes through the cold share without evicting them (CLOCK or LRU would lose
    /// them all to a scan longer than the cache).
    #[test]
    fn a_scan_passes_through_the_cold_keys_and_spares_the_hot_ones() {
        let capacity = Capacity { amount: 100, unit: Unit::Objects };
        let mut c = ClockPro::build(&ClockProConfig::default(), capacity).unwrap();
        // Fill the cache, then reuse keys 1-50 often enough to be hot.
        for key in 1..=100 {
            run(&mut c, key);
        }
        for _ in 0..3 {
            for key in 1..=50 {
                run(&mut c, key);
            }
        }
        // A scan of 1,000 keys used once.
        for key in 1000..2000 {
            assert!(!run(&mut c, key));
        }
        let hits = (1..=50).filter(|&key| c.peek(key).is_some()).count();
        assert!(hits >= 45, "hot keys resident after the scan: {hits} of 50");
        assert!(c.used() <= 100 && c.names <= 100, "{} used, {} names", c.used(), c.names);
        assert!(c.cold_target >= c.min_cold && c.cold_target <= c.max_cold);
    }

    /// A key evicted in its test period and missed again before its name is dropped turns hot
    /// at once (its reuse distance is within the hot keys' recency), and the cold share grows.
    #[test]
    fn a_name_missed_in_its_test_period_comes_back_hot() {
        let capacity = Capacity { amount: 10, unit: Unit::Objects };
        let mut c = ClockPro::build(&ClockProConfig::default(), capacity).unwrap();
        for key in 1..=10 {
            run(&mut c, key);
        }
        // While more than the least cold share (2 keys) is free, keys enter hot: 1-8; then
        // cold, in their test period: 9 and 10. Key 11's miss evicts the oldest cold key, 9,
        // whose name stays.
        let status = |c: &ClockPro, key: Key| c.map.get(key).map(|node| c.aux(node) & STATUS);
        assert_eq!((status(&c, 8), status(&c, 9)), (Some(HOT), Some(COLD_IN_TEST)));
        let target = c.cold_target;
        run(&mut c, 11);
        assert_eq!(status(&c, 9), Some(NAME), "9 is a name in its test period");
        assert!(!run(&mut c, 9), "a name is a miss");
        assert_eq!(status(&c, 9), Some(HOT));
        assert_eq!(status(&c, 1), Some(COLD), "the hot hand demoted the oldest hot key");
        assert!(c.cold_target > target, "reuse in the test period grows the cold share");
    }

    /// In bytes a full cache still has a few bytes free: a name missed then is still a key
    /// reused in its test period, and turns hot as in a cache counted in objects.
    #[test]
    fn in_bytes_a_full_cache_with_bytes_to_spare_still_promotes_names() {
        let capacity = Capacity { amount: 100, unit: Unit::Bytes };
        let config = ClockProConfig { min_cold_ratio: 0.3, ..ClockProConfig::default() };
        let mut c = ClockPro::build(&config, capacity).unwrap();
        let miss = |c: &mut ClockPro, key: Key, size: u32| {
            assert!(!run_sized(c, Request::read(key, size)), "{key} should miss");
        };
        let status = |c: &ClockPro, key: Key| c.map.get(key).map(|node| c.aux(node) & STATUS);
        miss(&mut c, 1, 50);
        miss(&mut c, 2, 30);
        assert_eq!((status(&c, 1), status(&c, 2)), (Some(HOT), Some(COLD_IN_TEST)));
        miss(&mut c, 3, 30);
        assert_eq!(status(&c, 2), Some(NAME), "2 evicted in its test period");
        assert_eq!(100 - c.used(), 20, "20 bytes free, not enough for 30");
        miss(&mut c, 2, 30);
        assert_eq!(status(&c, 2), Some(HOT));
    }
}
