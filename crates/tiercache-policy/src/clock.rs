//! CLOCK (second chance, generalised to an n-bit counter): keys sit in insertion order; a hit
//! raises the key's counter up to `2^bits - 1`; eviction looks at the oldest key and, if its
//! counter is above zero, lowers it and moves the key to the head instead of evicting it.
//! With `bits = 1` this is Corbató's CLOCK; libCacheSim's `Clock` uses the same rule.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::queue::{expected_objects, Queue};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClockConfig {
    /// Width of the per-key counter in bits (1 to 8).
    pub bits: u32,
}

impl Default for ClockConfig {
    fn default() -> ClockConfig {
        ClockConfig { bits: 1 }
    }
}

impl ClockConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        if !(1..=8).contains(&self.bits) {
            return Err(PolicyError::bad(
                "clock",
                "bits",
                format!("must be 1 to 8, got {}", self.bits),
            ));
        }
        Ok(())
    }
}

pub struct Clock {
    queue: Queue,
    max_count: u32,
}

impl crate::frame::Registered for Clock {
    type Config = ClockConfig;
    const VARIANTS: &'static [&'static str] = &["bits=2"];
    const QUIET_HITS: bool = true;

    fn validate(config: &ClockConfig) -> Result<(), PolicyError> {
        config.validate()
    }

    fn build(config: &ClockConfig, capacity: Capacity) -> Result<Clock, PolicyError> {
        Ok(Clock::new(config, capacity))
    }
}

impl Clock {
    pub fn new(config: &ClockConfig, capacity: Capacity) -> Clock {
        let max_count = (1u32 << config.bits) - 1;
        Clock { queue: Queue::new(capacity.unit, expected_objects(capacity)), max_count }
    }
}

impl Eviction for Clock {
    fn peek(&self, key: Key) -> Option<u32> {
        self.queue.find(key).map(|node| self.queue.arena.get(node).size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.queue.map.prefetch(key);
    }

    #[inline]
    fn access(&mut self, req: &Request) -> Option<u32> {
        let node = self.queue.arena.get_mut(self.queue.find(req.key)?);
        node.aux = (node.aux + 1).min(self.max_count);
        Some(node.size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        loop {
            let oldest = self.queue.arena.back(&self.queue.list)?;
            let node = self.queue.arena.get_mut(oldest);
            if node.aux == 0 {
                return self.queue.pop_oldest();
            }
            node.aux -= 1;
            self.queue.arena.move_to_front(&mut self.queue.list, oldest);
        }
    }

    fn insert(&mut self, req: &Request) {
        self.queue.push(req.key, req.size, 0);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        self.queue.remove(key)
    }

    fn used(&self) -> u64 {
        self.queue.used()
    }

    fn resident(&self) -> u64 {
        self.queue.resident()
    }

    fn label(&self) -> String {
        if self.max_count == 1 {
            "clock".into()
        } else {
            format!("clock(bits={})", self.max_count.count_ones())
        }
    }
}
