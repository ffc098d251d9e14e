//! GDSF, Greedy-Dual-Size-Frequency (Cherkasova, "Improving WWW Proxies Performance with
//! Greedy-Dual-Size-Frequency Caching Policy", HP Labs HPL-98-69, 1998): each key's priority
//! is `L + F × C / S`, its reference count `F` while resident, times its cost `C` (1: every
//! miss costs the same), over its size `S`, plus the cache's age `L`, which is the priority of
//! the last key evicted. The lowest priority goes first. Small keys referenced often stay;
//! large ones leave unless referenced more; `L` ages keys that stopped being referenced, since
//! every key ranked later starts above them.
//!
//! Priorities are floats scaled by 10^6 (`F × 10^6 / S`), ties go to the key ranked first, and
//! with the capacity in objects every size counts as 1: libCacheSim's `GDSF` does the same, and
//! agrees exactly (`tests/peer_libcachesim.rs`).

use tiercache_core::{Capacity, Key, Request, Unit};

use crate::frame::Eviction;
use crate::queue::expected_objects;
use crate::rank::{f64_rank, rank_f64, Ranked};

/// The scale of `F / S` (libCacheSim's), so that priorities of large keys stay well apart
/// from one another in a float.
const SCALE: f64 = 1.0e6;

pub struct Gdsf {
    ranked: Ranked,
    unit: Unit,
    /// `L`: the priority of the last key evicted.
    age: f64,
}

impl crate::frame::Registered for Gdsf {
    type Config = ();
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<Gdsf, crate::error::PolicyError> {
        let ranked = Ranked::new(capacity.unit, expected_objects(capacity));
        Ok(Gdsf { ranked, unit: capacity.unit, age: 0.0 })
    }
}

impl Gdsf {
    fn priority(&self, count: u64, size: u32) -> u64 {
        let size = match self.unit {
            Unit::Bytes => size as f64,
            Unit::Objects => 1.0,
        };
        f64_rank(self.age + count as f64 * SCALE / size)
    }
}

impl Eviction for Gdsf {
    fn peek(&self, key: Key) -> Option<u32> {
        self.ranked.get(key).map(|e| e.size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.ranked.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let entry = *self.ranked.get(req.key)?;
        let count = entry.count + 1;
        self.ranked.rerank(req.key, count, self.priority(count, entry.size));
        Some(entry.size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let entry = self.ranked.pop_lowest()?;
        self.age = rank_f64(entry.rank);
        Some((entry.key, entry.size))
    }

    fn insert(&mut self, req: &Request) {
        self.ranked.insert(req.key, req.size, 1, self.priority(1, req.size));
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        self.ranked.remove(key).map(|e| e.size)
    }

    fn used(&self) -> u64 {
        self.ranked.used()
    }

    fn resident(&self) -> u64 {
        self.ranked.len()
    }

    fn label(&self) -> String {
        "gdsf".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    /// Two keys of one reference each: the larger has the lower priority and goes first; once
    /// it is gone, the age is its priority, so a key referenced again ranks above all others.
    #[test]
    fn the_larger_of_equally_used_keys_goes_first_and_sets_the_age() {
        let capacity = Capacity { amount: 1 << 20, unit: Unit::Bytes };
        let mut gdsf = Gdsf::build(&(), capacity).unwrap();
        gdsf.insert(&Request::read(1, 4096));
        gdsf.insert(&Request::read(2, 512));
        assert_eq!(gdsf.evict(&Request::read(3, 1)), Some((1, 4096)));
        assert_eq!(gdsf.age, 1.0e6 / 4096.0);
        gdsf.insert(&Request::read(3, 512));
        gdsf.access(&Request::read(2, 512));
        // 2: 2 × 10^6 / 512; 3: age + 10^6 / 512, lower.
        assert_eq!(gdsf.evict(&Request::read(4, 1)), Some((3, 512)));
    }
}
