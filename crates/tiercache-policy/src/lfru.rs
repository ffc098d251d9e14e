//! LFRU as NVCache uses it (Fedorova et al., "Writes Hurt: Lessons in Cache Design for Optane
//! NVRAM", SoCC'22, section 3.1): no eviction on the request path. When the cache is full it
//! admits nothing; an eviction sweep runs periodically (once a second in NVCache), targets the
//! blocks not reused within a time window, and evicts the least frequently used among them.
//! NVCache approximates recency and frequency without lists; here each block keeps a counter of
//! accesses that every sweep halves (so it weighs recent accesses more: a frequency/recency
//! counter) and the time of its last access.
//!
//! A sweep evicts candidates, least counter first (oldest first among equals), until
//! `free_target` of the capacity is free or no candidate is left. Time is the request's
//! `time_us`: the simulator supplies a request count as time for traces without timestamps.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, KeyMap, RejectReason, Request, Unit};

use crate::error::PolicyError;
use crate::frame::{Eviction, Sink};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LfruConfig {
    /// Time between sweeps, in microseconds of trace time.
    pub sweep_interval_us: u64,
    /// Blocks accessed within this window before a sweep are not evicted by it.
    pub window_us: u64,
    /// Fraction of the capacity a sweep tries to free.
    pub free_target: f64,
}

impl Default for LfruConfig {
    fn default() -> LfruConfig {
        LfruConfig { sweep_interval_us: 1_000_000, window_us: 1_000_000, free_target: 0.05 }
    }
}

impl LfruConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.sweep_interval_us == 0 {
            return Err(PolicyError::bad("lfru", "sweep_interval_us", "must be above 0"));
        }
        if !(self.free_target > 0.0 && self.free_target <= 1.0) {
            return Err(PolicyError::bad("lfru", "free_target", "must be in (0, 1]"));
        }
        Ok(())
    }
}

#[derive(Clone, Copy)]
struct Entry {
    size: u32,
    counter: u32,
    last_us: u64,
}

pub struct Lfru {
    entries: KeyMap<Entry>,
    config: LfruConfig,
    capacity: Capacity,
    used: u64,
    next_sweep_us: Option<u64>,
    sweeps: u64,
    /// Whether sweeps run: NVCache's no-eviction (Writes Hurt section 3.2.2, Table 1) stops
    /// them, since the sweep is how LFRU evicts; blocks then leave only when removed.
    sweeping: bool,
    /// Whether sweeps are held for now: NVCache abstains from evicting while its overhead
    /// bypass ratio is over target (Writes Hurt section 3.2).
    held: bool,
}

impl crate::frame::Registered for Lfru {
    type Config = LfruConfig;
    const VARIANTS: &'static [&'static str] = &["sweep_interval_us=100000,window_us=50000"];
    const QUIET_HITS: bool = false;
    const USES_TIME: bool = true;

    fn validate(config: &LfruConfig) -> Result<(), PolicyError> {
        config.validate()
    }

    fn build(config: &LfruConfig, capacity: Capacity) -> Result<Lfru, PolicyError> {
        Ok(Lfru::new(config, capacity))
    }
}

impl Lfru {
    pub fn new(config: &LfruConfig, capacity: Capacity) -> Lfru {
        Lfru {
            entries: KeyMap::default(),
            config: config.clone(),
            capacity,
            used: 0,
            next_sweep_us: None,
            sweeps: 0,
            sweeping: true,
            held: false,
        }
    }

    /// Stops the sweeps for good: nothing is evicted from now on (NVCache's no-eviction).
    pub fn stop_sweeping(&mut self) {
        self.sweeping = false;
    }

    /// Holds the sweeps (`true`) until let go (`false`); a sweep due meanwhile runs at the first
    /// request after.
    pub fn hold_sweeps(&mut self, hold: bool) {
        self.held = hold;
    }

    pub fn sweeps(&self) -> u64 {
        self.sweeps
    }

    fn charge(&self, size: u32) -> u64 {
        match self.capacity.unit {
            Unit::Bytes => size as u64,
            Unit::Objects => 1,
        }
    }

    fn sweep(&mut self, now_us: u64, sink: &mut Sink) {
        self.sweeps += 1;
        let goal = self.capacity.amount - self.capacity.share(self.config.free_target);
        let stale_before = now_us.saturating_sub(self.config.window_us);
        let mut candidates: Vec<(u32, u64, Key)> = Vec::new();
        for (key, entry) in self.entries.iter_mut() {
            if entry.last_us < stale_before {
                candidates.push((entry.counter, entry.last_us, *key));
            }
            entry.counter /= 2;
        }
        candidates.sort_unstable();
        for (_, _, key) in candidates {
            if self.used <= goal {
                break;
            }
            let entry = self.entries.remove(&key).expect("candidate is resident");
            self.used -= self.charge(entry.size);
            sink.evicted(key, entry.size);
        }
    }
}

impl Eviction for Lfru {
    fn peek(&self, key: Key) -> Option<u32> {
        self.entries.get(&key).map(|e| e.size)
    }

    fn tick(&mut self, req: &Request, sink: &mut Sink) {
        if !self.sweeping || self.held {
            return;
        }
        // Sweeps fire at multiples of the interval, like a timer thread waking each second.
        let now = req.time_us;
        let interval = self.config.sweep_interval_us;
        let next_due = (now / interval + 1) * interval;
        match self.next_sweep_us {
            Some(due) if now >= due => {
                self.sweep(now, sink);
                self.next_sweep_us = Some(next_due);
            }
            Some(_) => {}
            None => self.next_sweep_us = Some(next_due),
        }
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let entry = self.entries.get_mut(&req.key)?;
        entry.counter = entry.counter.saturating_add(1);
        entry.last_us = req.time_us;
        Some(entry.size)
    }

    /// Full means no admission until the next sweep frees space.
    fn admit(&mut self, _req: &Request, needs_room: bool) -> Result<(), RejectReason> {
        if needs_room {
            Err(RejectReason::NoSpace)
        } else {
            Ok(())
        }
    }

    /// Only reached when a resident block grows in place: drop the coldest block.
    fn evict(&mut self, incoming: &Request) -> Option<(Key, u32)> {
        let (&key, _) = self
            .entries
            .iter()
            .filter(|(k, _)| **k != incoming.key)
            .min_by_key(|(k, e)| (e.counter, e.last_us, **k))?;
        let entry = self.entries.remove(&key)?;
        self.used -= self.charge(entry.size);
        Some((key, entry.size))
    }

    fn insert(&mut self, req: &Request) {
        let entry = Entry { size: req.size, counter: 1, last_us: req.time_us };
        self.entries.insert(req.key, entry);
        self.used += self.charge(req.size);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let entry = self.entries.remove(&key)?;
        self.used -= self.charge(entry.size);
        Some(entry.size)
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn resident(&self) -> u64 {
        self.entries.len() as u64
    }

    fn label(&self) -> String {
        "lfru".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Admission;
    use crate::frame::SingleTier;
    use crate::policy::Policy;
    use tiercache_core::{Action, Decision, Op};

    fn at(time_us: u64, key: u64) -> Request {
        Request::new(time_us, key, 1, Op::Read)
    }

    #[test]
    fn full_cache_admits_nothing_until_a_sweep_evicts_stale_least_frequent() {
        let config = LfruConfig { sweep_interval_us: 1000, window_us: 500, free_target: 0.5 };
        let capacity = Capacity::objects(4);
        let mut policy =
            SingleTier::new(Lfru::new(&config, capacity), capacity, Admission::always());
        let mut d = Decision::new();
        let mut run = |policy: &mut SingleTier<Lfru>, req: Request| {
            d.clear();
            policy.decide(&req, &mut d);
            d.clone()
        };
        for key in 1..=4 {
            run(&mut policy, at(10, key));
        }
        // Key 1 is used often and recently; 2 is used often but long ago; 3 and 4 once, long ago.
        for _ in 0..3 {
            run(&mut policy, at(100, 2));
            run(&mut policy, at(900, 1));
        }
        let full = run(&mut policy, at(950, 5));
        assert!(matches!(full.actions[..], [Action::Reject { reason: RejectReason::NoSpace, .. }]));
        // The sweep at t=1000 considers blocks idle since t=500 (2, 3, 4), evicts the least
        // frequent first until half the cache is free: 3 and 4, then admits 5.
        let swept = run(&mut policy, at(1000, 5));
        let evicted: Vec<u64> = swept
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Evict { key, .. } => Some(*key),
                _ => None,
            })
            .collect();
        assert_eq!(evicted, vec![3, 4]);
        assert!(matches!(swept.actions.last(), Some(Action::Insert { key: 5, .. })));
        assert_eq!(policy.eviction().sweeps(), 1);
    }
}
