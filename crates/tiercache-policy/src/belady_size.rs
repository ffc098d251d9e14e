//! Belady-Size: Belady's MIN weighted by size for caches of objects that differ in size. The
//! victim is the resident key with the largest product of its size and the time until its next
//! request, the offline heuristic Berger, Beckmann and Harchol-Balter compare their bounds with
//! ("Practical Bounds on Optimal Caching with Variable Object Sizes", SIGMETRICS'18), and a key
//! never requested again goes before any other. A missed key that is never requested again is
//! not admitted. It reads each request's `next_access`, so it runs only on streams whose future
//! is known (the simulator annotates it), and it counts the requests it decides as its clock.
//!
//! libCacheSim's `BeladySize` weighs 128 resident keys drawn at random at each eviction rather
//! than every key; this one weighs every key. Since the time until a request shrinks with the
//! clock while the sizes stay, two keys of different sizes can swap places, so no one order
//! holds: keys are kept by size, each size's keys by next request, and an eviction weighs the
//! farthest of each size, largest size first, stopping once no smaller size could outweigh the
//! best found (its size times the farthest next request of all). Ties go to the larger key.
//! With the capacity in objects every size counts as 1 and it evicts as Belady's MIN.
//!
//! Invariants: `by_size[s]` holds `(next, key)` of exactly the resident keys ranked `s`;
//! `by_next` holds the same pairs of all resident keys; `used` is their charge.

use std::collections::{BTreeMap, BTreeSet};

use tiercache_core::{Capacity, Key, KeyMap, RejectReason, Request, Unit, NEVER};

use crate::frame::Eviction;

pub struct BeladySize {
    /// Each resident key's next request and size.
    entries: KeyMap<(u64, u32)>,
    by_size: BTreeMap<u32, BTreeSet<(u64, Key)>>,
    by_next: BTreeSet<(u64, Key)>,
    unit: Unit,
    used: u64,
    /// The stream index of the request being decided.
    now: u64,
    /// Requests decided so far.
    decided: u64,
}

impl crate::frame::Registered for BeladySize {
    type Config = ();
    const QUIET_HITS: bool = false;
    const NEEDS_FUTURE: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<BeladySize, crate::error::PolicyError> {
        Ok(BeladySize {
            entries: KeyMap::default(),
            by_size: BTreeMap::new(),
            by_next: BTreeSet::new(),
            unit: capacity.unit,
            used: 0,
            now: 0,
            decided: 0,
        })
    }
}

impl BeladySize {
    /// The size a key is weighed and charged by: its own in bytes, 1 in objects.
    fn rank(&self, size: u32) -> u32 {
        match self.unit {
            Unit::Bytes => size,
            Unit::Objects => 1,
        }
    }

    /// A key's weight: its size times the time until its next request; a key never requested
    /// again outweighs every other.
    fn weight(&self, rank: u32, next: u64) -> u128 {
        if next == NEVER {
            return u128::MAX;
        }
        rank as u128 * next.saturating_sub(self.now) as u128
    }

    fn place(&mut self, key: Key, next: u64, rank: u32) {
        self.by_size.entry(rank).or_default().insert((next, key));
        self.by_next.insert((next, key));
    }

    fn unplace(&mut self, key: Key, next: u64, rank: u32) {
        let keys = self.by_size.get_mut(&rank).expect("a resident key's size is kept");
        keys.remove(&(next, key));
        if keys.is_empty() {
            self.by_size.remove(&rank);
        }
        self.by_next.remove(&(next, key));
    }

    /// The heaviest resident key.
    fn heaviest(&self) -> Option<Key> {
        let farthest = self.by_next.last()?.0;
        let mut best: Option<(u128, Key)> = None;
        for (&rank, keys) in self.by_size.iter().rev() {
            if let Some((weight, _)) = best {
                if self.weight(rank, farthest) <= weight {
                    break;
                }
            }
            let &(next, key) = keys.last().expect("a size without keys is dropped");
            let weight = self.weight(rank, next);
            if best.is_none_or(|(most, _)| weight > most) {
                best = Some((weight, key));
            }
        }
        best.map(|(_, key)| key)
    }
}

impl Eviction for BeladySize {
    fn peek(&self, key: Key) -> Option<u32> {
        self.entries.get(&key).map(|e| e.1)
    }

    fn request(&mut self, _req: &Request) {
        self.now = self.decided;
        self.decided += 1;
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let &(next, size) = self.entries.get(&req.key)?;
        let rank = self.rank(size);
        self.unplace(req.key, next, rank);
        self.place(req.key, req.next_access, rank);
        self.entries.insert(req.key, (req.next_access, size));
        Some(size)
    }

    fn admit(&mut self, req: &Request, _needs_room: bool) -> Result<(), RejectReason> {
        if req.next_access == NEVER {
            Err(RejectReason::NotWorthIt)
        } else {
            Ok(())
        }
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let key = self.heaviest()?;
        self.remove(key).map(|size| (key, size))
    }

    fn insert(&mut self, req: &Request) {
        let rank = self.rank(req.size);
        self.entries.insert(req.key, (req.next_access, req.size));
        self.place(req.key, req.next_access, rank);
        self.used += rank as u64;
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let (next, size) = self.entries.remove(&key)?;
        let rank = self.rank(size);
        self.unplace(key, next, rank);
        self.used -= rank as u64;
        Some(size)
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn resident(&self) -> u64 {
        self.entries.len() as u64
    }

    fn label(&self) -> String {
        "belady-size".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    fn at(policy: &mut BeladySize, key: Key, size: u32, next: u64) -> Request {
        policy.request(&Request::read(key, size));
        let mut req = Request::read(key, size);
        req.next_access = next;
        req
    }

    /// Size times distance: a small key requested far off can stay while a large one
    /// requested sooner goes; and as the clock runs on, the order of the two can turn.
    #[test]
    fn the_victim_weighs_size_by_distance_and_the_clock_moves_it() {
        let mut policy =
            BeladySize::build(&(), Capacity { amount: 1 << 20, unit: Unit::Bytes }).unwrap();
        // At 0: key 1, 1,000 bytes, next at 100 (weight 100,000 at 0); key 2, 10,000 bytes,
        // next at 20 (200,000 at 0).
        let first = at(&mut policy, 1, 1000, 100);
        policy.insert(&first);
        let second = at(&mut policy, 2, 10_000, 20);
        policy.insert(&second);
        // At 2: 1 weighs 98,000, 2 weighs 180,000.
        let probe = at(&mut policy, 9, 1, 50);
        assert_eq!(policy.heaviest(), Some(2));
        // At 11: 1 weighs 89,000 and 2 weighs 90,000; at 12, 88,000 and 80,000.
        while policy.decided < 12 {
            at(&mut policy, 9, 1, 50);
        }
        assert_eq!(policy.now, 11);
        assert_eq!(policy.heaviest(), Some(2), "at 11: 90,000 against 89,000");
        at(&mut policy, 9, 1, 50);
        assert_eq!(policy.heaviest(), Some(1), "at 12: 88,000 against 80,000");
        assert_eq!(policy.evict(&probe), Some((1, 1000)));
        assert_eq!(policy.used(), 10_000);
    }

    /// A key never requested again goes first, whatever its size, and is not admitted.
    #[test]
    fn a_key_never_requested_again_goes_first_and_is_not_admitted() {
        let mut policy =
            BeladySize::build(&(), Capacity { amount: 1 << 20, unit: Unit::Bytes }).unwrap();
        let large = at(&mut policy, 1, 60_000, 1000);
        policy.insert(&large);
        let small = at(&mut policy, 2, 512, 5);
        policy.insert(&small);
        let hit = at(&mut policy, 2, 512, NEVER);
        assert_eq!(policy.access(&hit), Some(512));
        assert_eq!(policy.evict(&hit), Some((2, 512)));
        assert_eq!(policy.admit(&hit, false), Err(RejectReason::NotWorthIt));
    }

    /// In objects every key weighs its distance alone: the farthest goes, as in Belady's MIN.
    #[test]
    fn in_objects_it_evicts_the_farthest() {
        let mut policy =
            BeladySize::build(&(), Capacity { amount: 10, unit: Unit::Objects }).unwrap();
        for (key, size, next) in [(1, 4096, 40), (2, 512, 90), (3, 65536, 10)] {
            let req = at(&mut policy, key, size, next);
            policy.insert(&req);
        }
        let probe = at(&mut policy, 9, 1, 50);
        assert_eq!(policy.evict(&probe), Some((2, 512)));
        assert_eq!(policy.evict(&probe), Some((1, 4096)));
        assert_eq!(policy.used(), 1);
    }
}
