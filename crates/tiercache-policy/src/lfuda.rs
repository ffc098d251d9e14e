//! LFU with dynamic aging, LFU-DA (Arlitt, Cherkasova, Dilley, Friedrich and Jin, "Evaluating
//! Content Management Techniques for Web Proxy Caches", Performance Evaluation Review 27(4),
//! 2000; Dilley and Arlitt, IEEE Internet Computing 3(2), 1999): each key's priority is
//! `K = F + L`, its reference count while resident plus the cache's age `L`, the priority of
//! the last key evicted; a hit counts one more reference and takes the age as it is now. The
//! lowest priority goes first; among equals, the key ranked first. Unlike LFU, a key that was
//! popular once does not stay forever: keys ranked later start at the age it helped raise.
//!
//! libCacheSim's `LFUDA` departs from the paper: a hit adds the current minimum priority to the
//! key's (not one reference), so before the first eviction hits change nothing; its age is the
//! lowest priority resident rather than the last evicted. The two differ by the points pinned
//! in `tests/peer_libcachesim.rs`.

use tiercache_core::{Capacity, Key, Request};

use crate::frame::Eviction;
use crate::queue::expected_objects;
use crate::rank::Ranked;

pub struct Lfuda {
    ranked: Ranked,
    /// `L`: the priority of the last key evicted.
    age: u64,
}

impl crate::frame::Registered for Lfuda {
    type Config = ();
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<Lfuda, crate::error::PolicyError> {
        Ok(Lfuda { ranked: Ranked::new(capacity.unit, expected_objects(capacity)), age: 0 })
    }
}

impl Eviction for Lfuda {
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
        self.ranked.rerank(req.key, count, count + self.age);
        Some(entry.size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let entry = self.ranked.pop_lowest()?;
        self.age = entry.rank;
        Some((entry.key, entry.size))
    }

    fn insert(&mut self, req: &Request) {
        self.ranked.insert(req.key, req.size, 1, 1 + self.age);
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
        "lfuda".into()
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

    /// A key hit many times early outlives new keys at first, but each eviction raises the age,
    /// so new keys start ever higher and once they are referenced twice they pass it.
    #[test]
    fn aging_lets_new_keys_pass_a_key_that_was_popular_once() {
        let capacity = Capacity { amount: 2, unit: Unit::Objects };
        let mut lfuda = Lfuda::build(&(), capacity).unwrap();
        lfuda.insert(&read(1));
        for _ in 0..3 {
            lfuda.access(&read(1)); // K(1) = 4
        }
        lfuda.insert(&read(2)); // K = 1
        assert_eq!(lfuda.evict(&read(3)), Some((2, 1)));
        assert_eq!(lfuda.age, 1);
        lfuda.insert(&read(3)); // K = 2
        lfuda.access(&read(3)); // K = 2 + 1 = 3
        assert_eq!(lfuda.evict(&read(4)), Some((3, 1)), "3 (K 3) is below 1 (K 4)");
        lfuda.insert(&read(4)); // K = 1 + 3 = 4, ties with 1, ranked later
        lfuda.access(&read(4)); // K = 2 + 3 = 5
        assert_eq!(lfuda.evict(&read(5)), Some((1, 1)), "the once popular key goes");
    }
}
