//! Log: a FIFO whose order is the order blocks were written, as a log-structured flash cache
//! keeps it. A block leaves when the log's head reaches it; a block removed or rewritten
//! leaves a hole that keeps its space until the head reaches the hole, and a rewritten block
//! goes to the tail again, as its new copy is written there.
//!
//! This is the eviction of the flash caches that write their device in large sequential
//! regions: CacheLib's large object cache reclaims whole regions in FIFO order, the space of
//! items removed from a region freed only with the region (Berg et al., "The CacheLib Caching
//! Engine: Design and Experiences at Scale", OSDI'20, section 4.2), and foyer's block engine
//! does the same by default, first taking any region whose data is 80% invalid (foyer-storage
//! 0.22.3, `engine/block/engine.rs`: `InvalidRatioPicker::new(0.8)`, then `FifoPicker`). Here
//! the unit of reclaim is one block, so nothing live is dropped for a neighbour's sake. The engine hands a flash tier's slots out in log order and writes runs
//! of adjacent slots in one request (see `tiercache_engine`'s write-behind): with this policy
//! the slot the head reaches is always the one the next block takes, so the tier is written
//! sequentially. Under FIFO a rewrite keeps its old place in the order and its hole is
//! refilled at once, which scatters the writes.
//!
//! A read hit changes nothing (quiet, as FIFO's). A write hit moves the block to the tail,
//! its old place a hole, and drops blocks from the head until the log fits again; that is
//! done in `tick`, before the lookup, so those drops come before the update in the decision.

use std::collections::VecDeque;

use tiercache_core::{Capacity, Key, KeyMap, Op, Request};

use crate::frame::{Eviction, Sink};

/// One block written, or the hole it left.
struct Entry {
    key: Key,
    size: u32,
    live: bool,
}

pub struct Log {
    /// Blocks and holes in the order they were written, oldest (the head) first. The head is
    /// never a hole: holes there are reclaimed as soon as they reach it.
    entries: VecDeque<Entry>,
    /// The position of `entries[0]` among all blocks ever written.
    base: u64,
    /// Per resident key, the position of its entry.
    at: KeyMap<u64>,
    capacity: Capacity,
    /// Space of the blocks in the log (what `used` reports).
    used: u64,
    /// Space of the blocks and the holes: what must fit the capacity.
    space: u64,
}

impl crate::frame::Registered for Log {
    type Config = ();
    const QUIET_HITS: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<Log, crate::error::PolicyError> {
        Ok(Log::new(capacity))
    }
}

impl Log {
    pub fn new(capacity: Capacity) -> Log {
        let expected = crate::queue::expected_objects(capacity).min(1 << 24);
        Log {
            entries: VecDeque::with_capacity(expected),
            base: 0,
            at: KeyMap::with_capacity_and_hasher(expected, Default::default()),
            capacity,
            used: 0,
            space: 0,
        }
    }

    fn entry(&self, key: Key) -> Option<&Entry> {
        self.at.get(&key).map(|&pos| &self.entries[(pos - self.base) as usize])
    }

    fn push(&mut self, key: Key, size: u32) {
        let previous = self.at.insert(key, self.base + self.entries.len() as u64);
        debug_assert!(previous.is_none(), "key {key} written twice");
        self.entries.push_back(Entry { key, size, live: true });
        self.used += self.capacity.charge(size);
        self.space += self.capacity.charge(size);
    }

    /// Leaves a hole where `key` is; returns its size.
    fn punch(&mut self, key: Key) -> Option<u32> {
        let pos = self.at.remove(&key)?;
        let entry = &mut self.entries[(pos - self.base) as usize];
        entry.live = false;
        let size = entry.size;
        self.used -= self.capacity.charge(size);
        self.reclaim_holes();
        Some(size)
    }

    /// Reclaims the holes at the head.
    fn reclaim_holes(&mut self) {
        while self.entries.front().is_some_and(|e| !e.live) {
            let hole = self.entries.pop_front().expect("a front entry");
            self.base += 1;
            self.space -= self.capacity.charge(hole.size);
        }
    }

    /// Drops the block at the head (never a hole) and the holes behind it.
    fn pop_head(&mut self) -> Option<(Key, u32)> {
        let head = self.entries.pop_front()?;
        debug_assert!(head.live, "a hole at the head");
        self.base += 1;
        self.at.remove(&head.key);
        self.used -= self.capacity.charge(head.size);
        self.space -= self.capacity.charge(head.size);
        self.reclaim_holes();
        Some((head.key, head.size))
    }
}

impl Eviction for Log {
    /// A write hit: the block's new copy goes to the tail, and the head drops blocks until
    /// the log fits (never the block itself).
    fn tick(&mut self, req: &Request, sink: &mut Sink) {
        if req.op != Op::Write {
            return;
        }
        let Some(&pos) = self.at.get(&req.key) else { return };
        if pos + 1 == self.base + self.entries.len() as u64 {
            return;
        }
        let size = self.punch(req.key).expect("a resident key");
        self.push(req.key, size);
        while self.space > self.capacity.amount
            && self.entries.front().is_some_and(|e| e.key != req.key)
        {
            let (key, size) = self.pop_head().expect("a log over capacity holds blocks");
            sink.evicted(key, size);
        }
    }

    /// Room for a missed block at the tail: the head drops blocks, and the holes behind
    /// them, until the block fits (the frame then finds the blocks alone within capacity).
    fn prepare_insert(&mut self, req: &Request, sink: &mut Sink) {
        let charge = self.capacity.charge(req.size);
        while self.space + charge > self.capacity.amount {
            let Some((key, size)) = self.pop_head() else { break };
            sink.evicted(key, size);
        }
    }

    fn peek(&self, key: Key) -> Option<u32> {
        self.entry(key).map(|e| e.size)
    }

    #[inline]
    fn access(&mut self, req: &Request) -> Option<u32> {
        self.peek(req.key)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        self.pop_head()
    }

    fn insert(&mut self, req: &Request) {
        self.push(req.key, req.size);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        self.punch(key)
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn resident(&self) -> u64 {
        self.at.len() as u64
    }

    fn label(&self) -> String {
        "log".into()
    }
}

#[cfg(test)]
mod tests {
    use tiercache_core::{Action, Decision};

    use super::*;
    use crate::admission::Admission;
    use crate::frame::SingleTier;
    use crate::policy::Policy;

    fn run(policy: &mut dyn Policy, op: Op, key: Key) -> Decision {
        let mut out = Decision::new();
        policy.decide(&Request::new(0, key, 1, op), &mut out);
        out
    }

    fn evicted(out: &Decision) -> Vec<Key> {
        out.actions
            .iter()
            .filter_map(|a| match a {
                Action::Evict { key, .. } => Some(*key),
                _ => None,
            })
            .collect()
    }

    /// A log of three blocks, 1, 2 and 3 written in that order.
    fn full_log_of_three() -> Box<dyn Policy> {
        let capacity = Capacity::objects(3);
        let mut policy: Box<dyn Policy> =
            Box::new(SingleTier::new(Log::new(capacity), capacity, Admission::always()));
        for key in 1..=3 {
            run(&mut *policy, Op::Write, key);
        }
        policy
    }

    #[test]
    fn blocks_leave_in_the_order_they_were_written() {
        let mut policy = full_log_of_three();
        run(&mut *policy, Op::Read, 1);
        assert_eq!(evicted(&run(&mut *policy, Op::Write, 4)), [1], "a read hit changes nothing");
        assert_eq!(evicted(&run(&mut *policy, Op::Write, 5)), [2]);
    }

    #[test]
    fn a_rewritten_block_goes_to_the_tail_and_its_hole_keeps_its_space() {
        let mut policy = full_log_of_three();
        // 2 rewritten: the log is 1, (hole), 3, 2, one over, so the head (1) goes first,
        // before the update, and the hole behind it with it.
        let out = run(&mut *policy, Op::Write, 2);
        assert_eq!(evicted(&out), [1]);
        assert!(matches!(out.actions.last(), Some(Action::Update { key: 2, .. })));
        assert_eq!(policy.used(tiercache_core::TierId(0)), 2);
        assert_eq!(policy.resident(tiercache_core::TierId(0)), 2);
        // Now 3, 2: the next two writes fill the log, then 3 leaves before 2.
        assert!(evicted(&run(&mut *policy, Op::Write, 4)).is_empty());
        assert_eq!(evicted(&run(&mut *policy, Op::Write, 5)), [3]);
        assert_eq!(evicted(&run(&mut *policy, Op::Write, 6)), [2]);
    }

    #[test]
    fn a_removed_block_leaves_a_hole_until_the_head_reaches_it() {
        let mut policy = full_log_of_three();
        run(&mut *policy, Op::Delete, 2);
        assert_eq!(policy.used(tiercache_core::TierId(0)), 2, "the blocks alone");
        // The hole keeps its space: 4 needs room, so 1 leaves, and the hole behind it is
        // reclaimed with it.
        assert_eq!(evicted(&run(&mut *policy, Op::Write, 4)), [1]);
        assert!(evicted(&run(&mut *policy, Op::Write, 5)).is_empty());
        assert_eq!(evicted(&run(&mut *policy, Op::Write, 6)), [3]);
    }
}
