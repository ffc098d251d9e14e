//! LFU with aging (Arlitt et al., "Evaluating content management techniques for Web proxy
//! caches", 2000), the clean-cache policy of Hibachi (Fan et al., MSST'17, section IV-B): evict
//! the least frequently used key, the least recently used among equals; when the average
//! count of the resident keys exceeds `aging_threshold` (5.5 in Hibachi), halve every count
//! (rounding up, so a count never drops to zero). `aging_threshold = none` is plain LFU, the
//! rule of libCacheSim's `LFU`.
//!
//! Keys are ordered by (count, last access) in a B-tree: O(log n) per access.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, KeyMap, Request, Unit};

use crate::error::PolicyError;
use crate::frame::Eviction;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LfuConfig {
    /// Average count above which all counts are halved; `None` disables aging.
    pub aging_threshold: Option<f64>,
}

impl Default for LfuConfig {
    fn default() -> LfuConfig {
        LfuConfig { aging_threshold: Some(5.5) }
    }
}

impl crate::Params for LfuConfig {
    fn set(&mut self, policy: &str, key: &str, value: &str) -> Result<(), PolicyError> {
        match key {
            "aging_threshold" => {
                self.aging_threshold = match value {
                    "none" | "off" => None,
                    v => Some(crate::parse_value(policy, key, v)?),
                }
            }
            _ => return Err(crate::unknown_key(policy, key)),
        }
        Ok(())
    }
}

impl LfuConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        match self.aging_threshold {
            Some(t) if !(t > 1.0 && t.is_finite()) => {
                Err(PolicyError::bad("lfu", "aging_threshold", format!("must be above 1, got {t}")))
            }
            _ => Ok(()),
        }
    }
}

#[derive(Clone, Copy)]
struct Entry {
    count: u32,
    last: u64,
    size: u32,
}

pub struct Lfu {
    entries: KeyMap<Entry>,
    order: BTreeSet<(u32, u64, Key)>,
    unit: Unit,
    used: u64,
    count_sum: u64,
    clock: u64,
    aging_threshold: Option<f64>,
    agings: u64,
}

impl Lfu {
    pub fn new(config: &LfuConfig, capacity: Capacity) -> Lfu {
        Lfu {
            entries: KeyMap::default(),
            order: BTreeSet::new(),
            unit: capacity.unit,
            used: 0,
            count_sum: 0,
            clock: 0,
            aging_threshold: config.aging_threshold,
            agings: 0,
        }
    }

    /// How many times all counts were halved.
    pub fn agings(&self) -> u64 {
        self.agings
    }

    fn charge(&self, size: u32) -> u64 {
        match self.unit {
            Unit::Bytes => size as u64,
            Unit::Objects => 1,
        }
    }

    fn age_if_due(&mut self) {
        let Some(threshold) = self.aging_threshold else { return };
        if self.entries.is_empty()
            || (self.count_sum as f64 / self.entries.len() as f64) <= threshold
        {
            return;
        }
        self.agings += 1;
        self.order.clear();
        self.count_sum = 0;
        for (key, entry) in self.entries.iter_mut() {
            entry.count = entry.count.div_ceil(2);
            self.count_sum += entry.count as u64;
            self.order.insert((entry.count, entry.last, *key));
        }
    }
}

impl Eviction for Lfu {
    fn peek(&self, key: Key) -> Option<u32> {
        self.entries.get(&key).map(|e| e.size)
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let entry = self.entries.get_mut(&req.key)?;
        self.order.remove(&(entry.count, entry.last, req.key));
        self.clock += 1;
        entry.count = entry.count.saturating_add(1);
        entry.last = self.clock;
        self.order.insert((entry.count, entry.last, req.key));
        let size = entry.size;
        self.count_sum += 1;
        self.age_if_due();
        Some(size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let (count, _, key) = self.order.pop_first()?;
        let entry = self.entries.remove(&key).expect("ordered keys are resident");
        self.count_sum -= count as u64;
        self.used -= self.charge(entry.size);
        Some((key, entry.size))
    }

    fn insert(&mut self, req: &Request) {
        self.clock += 1;
        let entry = Entry { count: 1, last: self.clock, size: req.size };
        self.entries.insert(req.key, entry);
        self.order.insert((1, self.clock, req.key));
        self.count_sum += 1;
        self.used += self.charge(req.size);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let entry = self.entries.remove(&key)?;
        self.order.remove(&(entry.count, entry.last, key));
        self.count_sum -= entry.count as u64;
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
        match self.aging_threshold {
            Some(t) => format!("lfu(aging={t})"),
            None => "lfu".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_counts_when_the_average_passes_the_threshold() {
        let config = LfuConfig { aging_threshold: Some(2.0) };
        let mut lfu = Lfu::new(&config, Capacity::objects(10));
        lfu.insert(&Request::read(1, 1));
        lfu.insert(&Request::read(2, 1));
        for _ in 0..3 {
            lfu.access(&Request::read(1, 1));
        }
        // Counts 4 and 1: average 2.5 > 2, so they became 2 and 1.
        assert_eq!(lfu.agings(), 1);
        assert_eq!(lfu.entries[&1].count, 2);
        assert_eq!(lfu.entries[&2].count, 1);
        assert_eq!(lfu.evict(&Request::read(3, 1)), Some((2, 1)));
    }
}
