//! LFU with aging (Arlitt et al., "Evaluating content management techniques for Web proxy
//! caches", 2000), the clean-cache policy of Hibachi (Fan et al., MSST'17, section IV-B): evict
//! the least frequently used key, the least recently used among equals; when the average
//! count of the resident keys exceeds `aging_threshold` (5.5 in Hibachi), halve every count
//! (rounding up, so a count never drops to zero). `aging_threshold = none` is plain LFU, the
//! rule of libCacheSim's `LFU`.
//!
//! Keys live in one list per count (Shah, Mitra and Matani's O(1) LFU), most recent at the
//! head: an access moves a key to the next count's list, an eviction takes the oldest key of
//! the lowest count. The lists are kept in an ordered map by count, whose few distinct counts
//! make the lowest one cheap to find. Halving merges the lists of counts 2c-1 and 2c by last
//! access, in one pass over the keys.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request, Unit};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::index::KeyIndex;
use crate::list::{Arena, List};

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

pub struct Lfu {
    /// Key to its node; a node's `aux` is its count.
    index: KeyIndex,
    arena: Arena,
    /// The clock of each node's last access, by node index.
    last: Vec<u64>,
    /// The keys of each count, most recent access at the head.
    counts: BTreeMap<u32, List>,
    unit: Unit,
    used: u64,
    count_sum: u64,
    clock: u64,
    aging_threshold: Option<f64>,
    agings: u64,
}

impl crate::frame::Registered for Lfu {
    type Config = LfuConfig;
    const VARIANTS: &'static [&'static str] = &["aging_threshold=none"];
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn validate(config: &LfuConfig) -> Result<(), PolicyError> {
        config.validate()
    }

    fn build(config: &LfuConfig, capacity: Capacity) -> Result<Lfu, PolicyError> {
        Ok(Lfu::new(config, capacity))
    }
}

impl Lfu {
    pub fn new(config: &LfuConfig, capacity: Capacity) -> Lfu {
        let expected = crate::queue::expected_objects(capacity).min(1 << 24);
        Lfu {
            index: KeyIndex::with_capacity(expected),
            arena: Arena::with_capacity(expected),
            last: Vec::new(),
            counts: BTreeMap::new(),
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

    /// Links node `at` at the head of its count's list, as accessed now.
    fn link(&mut self, at: u32) {
        self.clock += 1;
        let slot = at as usize;
        if self.last.len() <= slot {
            self.last.resize(slot + 1, 0);
        }
        self.last[slot] = self.clock;
        let count = self.arena.get(at).aux;
        let list = self.counts.entry(count).or_default();
        self.arena.push_front(list, at);
    }

    /// Unlinks node `at` from its count's list, dropping the list when it empties.
    fn unlink(&mut self, at: u32) {
        let count = self.arena.get(at).aux;
        let list = self.counts.get_mut(&count).expect("a resident key's count has a list");
        self.arena.unlink(list, at);
        if list.is_empty() {
            self.counts.remove(&count);
        }
    }

    fn age_if_due(&mut self) {
        let Some(threshold) = self.aging_threshold else { return };
        if self.index.is_empty() || (self.count_sum as f64 / self.index.len() as f64) <= threshold {
            return;
        }
        self.agings += 1;
        self.count_sum = 0;
        // Each list, oldest first; counts 2c-1 and 2c become c, merged by last access.
        let mut old = std::mem::take(&mut self.counts);
        let mut drained: Vec<(u32, Vec<u32>)> = Vec::with_capacity(old.len());
        for (count, list) in old.iter_mut() {
            let mut nodes = Vec::with_capacity(list.len as usize);
            while let Some(at) = self.arena.pop_back(list) {
                nodes.push(at);
            }
            drained.push((count.div_ceil(2), nodes));
        }
        let mut i = 0;
        while i < drained.len() {
            let count = drained[i].0;
            let mut merged = std::mem::take(&mut drained[i].1);
            if i + 1 < drained.len() && drained[i + 1].0 == count {
                let other = std::mem::take(&mut drained[i + 1].1);
                merged = merge_by(&merged, &other, |at| self.last[at as usize]);
                i += 1;
            }
            i += 1;
            let list = self.counts.entry(count).or_default();
            for at in merged {
                self.arena.get_mut(at).aux = count;
                self.arena.push_front(list, at);
                self.count_sum += count as u64;
            }
        }
    }
}

/// Two sequences ascending by `key`, merged into one.
fn merge_by(a: &[u32], b: &[u32], key: impl Fn(u32) -> u64) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if key(a[i]) <= key(b[j]) {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

impl Eviction for Lfu {
    #[inline]
    fn prefetch(&self, key: Key) {
        self.index.prefetch(key);
    }

    fn peek(&self, key: Key) -> Option<u32> {
        self.index.get(key).map(|at| self.arena.get(at).size)
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let at = self.index.get(req.key)?;
        self.unlink(at);
        let node = self.arena.get_mut(at);
        node.aux = node.aux.saturating_add(1);
        let size = node.size;
        self.link(at);
        self.count_sum += 1;
        self.age_if_due();
        Some(size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let mut lowest = self.counts.first_entry()?;
        let at = self.arena.pop_back(lowest.get_mut()).expect("lists in the map are not empty");
        if lowest.get().is_empty() {
            lowest.remove();
        }
        let node = *self.arena.get(at);
        self.arena.release(at);
        self.index.remove(node.key);
        self.count_sum -= node.aux as u64;
        self.used -= self.charge(node.size);
        Some((node.key, node.size))
    }

    fn insert(&mut self, req: &Request) {
        let at = self.arena.alloc(req.key, req.size, 1);
        self.index.insert(req.key, at);
        self.link(at);
        self.count_sum += 1;
        self.used += self.charge(req.size);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let at = self.index.remove(key)?;
        self.unlink(at);
        let node = *self.arena.get(at);
        self.arena.release(at);
        self.count_sum -= node.aux as u64;
        self.used -= self.charge(node.size);
        Some(node.size)
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn resident(&self) -> u64 {
        self.index.len() as u64
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
        let count = |lfu: &Lfu, key: u64| lfu.arena.get(lfu.index.get(key).unwrap()).aux;
        assert_eq!(count(&lfu, 1), 2);
        assert_eq!(count(&lfu, 2), 1);
        assert_eq!(lfu.evict(&Request::read(3, 1)), Some((2, 1)));
    }

    /// The rule written plainly: every key's (count, last access) in one ordered set.
    #[derive(Default)]
    struct Reference {
        entries: std::collections::HashMap<u64, (u32, u64)>,
        order: std::collections::BTreeSet<(u32, u64, u64)>,
        clock: u64,
        sum: u64,
        threshold: Option<f64>,
    }

    impl Reference {
        fn access(&mut self, key: u64) -> bool {
            let Some((count, last)) = self.entries.get_mut(&key) else { return false };
            self.clock += 1;
            self.order.remove(&(*count, *last, key));
            *count += 1;
            *last = self.clock;
            self.order.insert((*count, *last, key));
            self.sum += 1;
            let average = self.sum as f64 / self.entries.len() as f64;
            if self.threshold.is_some_and(|t| average > t) {
                self.order.clear();
                self.sum = 0;
                for (k, (count, last)) in self.entries.iter_mut() {
                    *count = count.div_ceil(2);
                    self.sum += *count as u64;
                    self.order.insert((*count, *last, *k));
                }
            }
            true
        }

        fn insert(&mut self, key: u64) {
            self.clock += 1;
            self.entries.insert(key, (1, self.clock));
            self.order.insert((1, self.clock, key));
            self.sum += 1;
        }

        fn evict(&mut self) -> u64 {
            let (count, _, key) = self.order.pop_first().unwrap();
            self.entries.remove(&key);
            self.sum -= count as u64;
            key
        }
    }

    #[test]
    fn evicts_exactly_as_the_rule_written_plainly() {
        for threshold in [Some(5.5), Some(2.0), None] {
            let config = LfuConfig { aging_threshold: threshold };
            let mut lfu = Lfu::new(&config, Capacity::objects(64));
            let mut reference = Reference { threshold, ..Default::default() };
            let mut rng = tiercache_core::SeededRng::new(11);
            for _ in 0..200_000 {
                // Skewed keys over 300, so counts, agings and evictions all happen.
                let spread = rng.below(300) + 1;
                let key = rng.below(spread);
                let req = Request::read(key, 1);
                let hit = lfu.access(&req).is_some();
                assert_eq!(hit, reference.access(key), "key {key}");
                if !hit {
                    if lfu.resident() == 64 {
                        assert_eq!(lfu.evict(&req).unwrap().0, reference.evict());
                    }
                    lfu.insert(&req);
                    reference.insert(key);
                }
            }
            assert!(threshold.is_none() || lfu.agings() > 10, "{threshold:?}: {}", lfu.agings());
        }
    }
}
