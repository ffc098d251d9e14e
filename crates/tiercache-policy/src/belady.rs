//! Belady's MIN (Belady, "A study of replacement algorithms for a virtual-storage computer",
//! IBM Systems Journal, 1966): evict the key whose next request is farthest in the future, and
//! do not admit a missed key that would itself be that victim. It reads each request's
//! `next_access`, so it runs only on streams whose future is known (the simulator annotates it).
//!
//! With a capacity in objects this is the optimum: no policy misses less on the same stream.
//! With a capacity in bytes, farthest-next-use is a heuristic (optimal caching of variable-size
//! objects is NP-hard), not a bound.

use std::collections::BTreeSet;

use tiercache_core::{Capacity, Key, KeyMap, RejectReason, Request, Unit, NEVER};

use crate::frame::Eviction;

pub struct Belady {
    entries: KeyMap<(u64, u32)>,
    by_next_use: BTreeSet<(u64, Key)>,
    unit: Unit,
    used: u64,
}

impl crate::frame::Registered for Belady {
    type Config = ();
    const QUIET_HITS: bool = false;
    const NEEDS_FUTURE: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<Belady, crate::error::PolicyError> {
        Ok(Belady::new(capacity))
    }
}

impl Belady {
    pub fn new(capacity: Capacity) -> Belady {
        Belady {
            entries: KeyMap::default(),
            by_next_use: BTreeSet::new(),
            unit: capacity.unit,
            used: 0,
        }
    }

    fn charge(&self, size: u32) -> u64 {
        match self.unit {
            Unit::Bytes => size as u64,
            Unit::Objects => 1,
        }
    }
}

impl Eviction for Belady {
    fn peek(&self, key: Key) -> Option<u32> {
        self.entries.get(&key).map(|e| e.1)
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let entry = self.entries.get_mut(&req.key)?;
        self.by_next_use.remove(&(entry.0, req.key));
        entry.0 = req.next_access;
        self.by_next_use.insert((req.next_access, req.key));
        Some(entry.1)
    }

    fn admit(&mut self, req: &Request, needs_room: bool) -> Result<(), RejectReason> {
        let farthest = self.by_next_use.last().map(|(next, _)| *next);
        let pointless = req.next_access == NEVER
            || (needs_room && farthest.is_some_and(|f| req.next_access >= f));
        if pointless {
            Err(RejectReason::NotWorthIt)
        } else {
            Ok(())
        }
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let (_, key) = self.by_next_use.pop_last()?;
        let (_, size) = self.entries.remove(&key).expect("ordered keys are resident");
        self.used -= self.charge(size);
        Some((key, size))
    }

    fn insert(&mut self, req: &Request) {
        self.entries.insert(req.key, (req.next_access, req.size));
        self.by_next_use.insert((req.next_access, req.key));
        self.used += self.charge(req.size);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let (next, size) = self.entries.remove(&key)?;
        self.by_next_use.remove(&(next, key));
        self.used -= self.charge(size);
        Some(size)
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn resident(&self) -> u64 {
        self.entries.len() as u64
    }

    fn label(&self) -> String {
        "belady".into()
    }
}
