//! Set-associative: the capacity is cut into sets of `ways` slots; a key's hash chooses its
//! set, and the key may only live in one of that set's ways. A miss whose set is full evicts
//! that set's least recently used way (`order = lru`) or its oldest (`order = fifo`); a hit
//! moves the way to the front of its set under LRU and changes nothing under FIFO.
//!
//! The structure of hardware caches, and of flash caches that cannot afford an index entry per
//! block: CacheLib's BigHash keeps small objects in 4 KiB buckets chosen by hash with FIFO
//! inside a bucket (Berg et al., "The CacheLib Caching Engine", OSDI'20, section 4.2), and
//! Kangaroo's KSet is the same with a few bits of recency per object (McAllister et al.,
//! SOSP'21). Here it is for the flash tier: the set and the way say where a block lies, so the
//! membership of a set is the whole index. What it costs in DRAM per way is the key (8 bytes)
//! and its place in the set's order (1 byte), plus one byte per set; sizes cost nothing while
//! every key has the same one (an engine's blocks), two bytes a way once they differ (larger
//! sizes in a side map): the engine can keep a flash tier's metadata within 16 bytes a block
//! where a per-key list and map take over 100 (`docs/DURABILITY.md`).
//!
//! What it gives up against a fully associative LRU of the same capacity: conflict misses, a
//! key evicted while other sets still have room. With 16 or 32 ways they are few; the
//! simulator measures them (`tiercache sim --unit objects --policy setassoc`).
//!
//! Capacity counts objects (one to a way): a set's ways are its budget. The sets are
//! `ceil(capacity / ways)`, all of `ways` ways but the last, which holds the remainder.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, KeyMap, RejectReason, Request, Unit};

use crate::error::PolicyError;
use crate::frame::{Eviction, Sink};
use crate::placed::PlacedSlots;

/// Which way of a full set goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// The least recently used: a hit moves its way to the front.
    Lru,
    /// The oldest: hits change nothing.
    Fifo,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SetAssocConfig {
    /// Slots in a set (1 to 64).
    pub ways: u32,
    /// What a full set evicts.
    pub order: Order,
    /// Ways each set has beyond its budget, never filled by the policy: room a caller that
    /// stores the blocks (the engine) needs for a block's new copy before its old one is
    /// freed. They change no decision: which free way a key takes is not one.
    pub spare: u32,
}

impl Default for SetAssocConfig {
    fn default() -> SetAssocConfig {
        SetAssocConfig { ways: 16, order: Order::Lru, spare: 0 }
    }
}

impl SetAssocConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        if !(1..=MAX_WAYS).contains(&self.ways) {
            let reason = format!("must be 1 to {MAX_WAYS}, got {}", self.ways);
            return Err(PolicyError::bad("setassoc", "ways", reason));
        }
        if self.spare > MAX_WAYS - self.ways {
            let reason = format!(
                "is at most {} with {} ways (ways and spare at most {MAX_WAYS}), got {}",
                MAX_WAYS - self.ways,
                self.ways,
                self.spare
            );
            return Err(PolicyError::bad("setassoc", "spare", reason));
        }
        Ok(())
    }

    /// Checks that `capacity` is one this policy can run: counted in objects, and with sets
    /// whose ways a 32-bit slot number reaches.
    pub fn check_capacity(&self, capacity: Capacity) -> Result<(), PolicyError> {
        if capacity.unit != Unit::Objects {
            let reason = "counts objects, one to a way: give the capacity in objects \
                          (`--unit objects`)";
            return Err(PolicyError::bad("setassoc", "capacity", reason));
        }
        if capacity.amount > u32::MAX as u64 {
            let reason = format!("at most {} ways, got {}", u32::MAX, capacity.amount);
            return Err(PolicyError::bad("setassoc", "capacity", reason));
        }
        Ok(())
    }
}

const MAX_WAYS: u32 = 64;

/// A stored size that does not fit the two bytes kept per way: the size is in `large`.
const SIZE_ESCAPE: u16 = u16::MAX;

pub struct SetAssoc {
    order_rule: Order,
    /// The budget of every set but the last.
    ways: u32,
    /// Slots of every set: its budget and the spare ways.
    stride: u32,
    capacity: u32,
    sets: u32,
    /// Each slot's key (meaningful while the slot is occupied).
    keys: Vec<Key>,
    /// The size every key inserted so far had, while they all had one (an engine's blocks
    /// are all one size): then `sizes` stays empty.
    uniform: Option<u32>,
    /// Once sizes differ: each slot's stored size, or [`SIZE_ESCAPE`].
    sizes: Vec<u16>,
    /// Sizes of `SIZE_ESCAPE` bytes or more.
    large: KeyMap<u32>,
    /// Per set, a permutation of its ways: the first `filled` are occupied, most recent (LRU)
    /// or newest (FIFO) first; the rest are free, the longest free first. All zeros for a set
    /// never filled, which stands for the identity.
    order: Vec<u8>,
    /// Occupied ways per set.
    filled: Vec<u8>,
    resident: u64,
    /// The slots keys left, in order, while a caller asks for them (`track_vacated`).
    vacated: Option<Vec<(Key, u32)>>,
}

/// Where a key's set starts, how many ways it has, and which of them holds the key.
struct Found {
    start: usize,
    /// The key's position in the set's order.
    rank: usize,
}

impl crate::frame::Registered for SetAssoc {
    type Config = SetAssocConfig;
    const VARIANTS: &'static [&'static str] = &["ways=4,order=fifo", "ways=2,spare=1"];
    const QUIET_HITS: bool = true;

    fn validate(config: &SetAssocConfig) -> Result<(), PolicyError> {
        config.validate()
    }

    fn build(config: &SetAssocConfig, capacity: Capacity) -> Result<SetAssoc, PolicyError> {
        config.check_capacity(capacity)?;
        Ok(SetAssoc::new(config, capacity))
    }
}

impl SetAssoc {
    pub fn new(config: &SetAssocConfig, capacity: Capacity) -> SetAssoc {
        let capacity = capacity.amount.min(u32::MAX as u64) as u32;
        let ways = config.ways;
        let stride = ways + config.spare;
        let sets = capacity.div_ceil(ways).max(1);
        let slots = sets as usize * stride as usize;
        // Zeros, set to the identity when a set is first filled (`order_of`): untouched
        // memory until then.
        let order = vec![0; slots];
        SetAssoc {
            order_rule: config.order,
            ways,
            stride,
            capacity,
            sets,
            keys: vec![0; slots],
            uniform: None,
            sizes: Vec::new(),
            large: KeyMap::default(),
            order,
            filled: vec![0; sets as usize],
            resident: 0,
            vacated: None,
        }
    }

    /// The set of `key`: a hash independent of the one that chooses an engine shard (a
    /// SplitMix64 finaliser of the key), reduced by multiplication.
    #[inline]
    pub fn set_of(&self, key: Key) -> u32 {
        let mut z = key ^ 0x5851_F42D_4C95_7F2D;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z as u128 * self.sets as u128) >> 64) as u32
    }

    /// Slots in all: sets times their budget and spare ways. Slot `s` is way `s % stride` of
    /// set `s / stride`.
    pub fn slots(&self) -> u32 {
        self.sets * self.stride
    }

    /// Slots per set (budget and spare).
    pub fn stride(&self) -> u32 {
        self.stride
    }

    /// Slots per set the policy never fills.
    pub fn spare(&self) -> u32 {
        self.stride - self.ways
    }

    /// The key whose block lies in `slot`, if one does.
    pub fn key_at(&self, slot: u32) -> Option<Key> {
        let set = slot / self.stride;
        let (start, _, _) = self.span(set);
        let filled = self.filled.get(set as usize).copied()? as usize;
        (0..filled)
            .any(|rank| start + self.order[start + rank] as usize == slot as usize)
            .then(|| self.keys[slot as usize])
    }

    /// Every resident key and its slot.
    pub fn residents(&self) -> impl Iterator<Item = (Key, u32)> + '_ {
        (0..self.sets).flat_map(move |set| {
            let (start, _, _) = self.span(set);
            (0..self.filled[set as usize] as usize).map(move |rank| {
                let slot = start + self.order[start + rank] as usize;
                (self.keys[slot], slot as u32)
            })
        })
    }

    /// Set `set`'s first slot, its budget, and its ways in all (budget and spare).
    #[inline]
    fn span(&self, set: u32) -> (usize, usize, usize) {
        let start = set as usize * self.stride as usize;
        let first_way = set as usize * self.ways as usize;
        let budget = (self.capacity as usize - first_way).min(self.ways as usize);
        (start, budget, budget + (self.stride - self.ways) as usize)
    }

    fn find(&self, key: Key) -> Option<Found> {
        let set = self.set_of(key);
        let (start, _, _) = self.span(set);
        let filled = self.filled[set as usize] as usize;
        (0..filled)
            .find(|&rank| self.keys[start + self.order[start + rank] as usize] == key)
            .map(|rank| Found { start, rank })
    }

    fn slot_at(&self, found: &Found) -> usize {
        found.start + self.order[found.start + found.rank] as usize
    }

    /// The slot where `key` lies, if resident: where the engine stores its block.
    pub fn slot_of(&self, key: Key) -> Option<u32> {
        self.find(key).map(|f| self.slot_at(&f) as u32)
    }

    /// Starts (or stops) logging the slots keys leave, for a caller that must find a block
    /// the decision just dropped: by then the key is no longer resident, and its way may
    /// hold another key.
    pub fn track_vacated(&mut self, on: bool) {
        self.vacated = on.then(Vec::new);
    }

    /// The slots keys left since the last call, in order (empty unless tracking).
    pub fn take_vacated(&mut self) -> Vec<(Key, u32)> {
        self.vacated.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The free slots of `key`'s set, the longest free first: the order in which inserts
    /// take them.
    pub fn free_slots(&self, key: Key) -> impl Iterator<Item = u32> + '_ {
        let set = self.set_of(key);
        let (start, _, physical) = self.span(set);
        let filled = self.filled[set as usize] as usize;
        let fresh = !self.has_order(start, physical);
        (filled..physical).map(move |rank| match fresh {
            true => (start + rank) as u32,
            false => (start + self.order[start + rank] as usize) as u32,
        })
    }

    /// Whether the set at `start` of `physical` ways has its order written: a permutation of
    /// two or more ways has a nonzero entry among its first two.
    fn has_order(&self, start: usize, physical: usize) -> bool {
        physical < 2 || self.order[start] != 0 || self.order[start + 1] != 0
    }

    /// Moves resident `key` to `to`, a free slot of its set, and returns the slot it left
    /// (now free, the last to be taken again). Changes no decision: only which way holds the
    /// key. `None`, changing nothing, if `key` is not resident or `to` is not a free slot of
    /// its set.
    pub fn relocate(&mut self, key: Key, to: u32) -> Option<u32> {
        let found = self.find(key)?;
        let set = self.set_of(key) as usize;
        let (start, _, physical) = self.span(set as u32);
        let filled = self.filled[set] as usize;
        let to_rank =
            (filled..physical).find(|&r| start + self.order[start + r] as usize == to as usize)?;
        let from = self.slot_at(&found);
        let (to_way, from_way) = (self.order[start + to_rank], self.order[start + found.rank]);
        self.keys[to as usize] = key;
        if !self.sizes.is_empty() {
            self.sizes[to as usize] = self.sizes[from];
        }
        self.order[start + found.rank] = to_way;
        // The way left joins the free ways last.
        self.order.copy_within(start + to_rank + 1..start + physical, start + to_rank);
        self.order[start + physical - 1] = from_way;
        Some(from as u32)
    }

    fn size_at(&self, slot: usize) -> u32 {
        match self.sizes.get(slot) {
            None => self.uniform.expect("a resident key has a size"),
            Some(&SIZE_ESCAPE) => self.large[&self.keys[slot]],
            Some(&size) => size as u32,
        }
    }

    /// Records `key`'s size in `slot`: nothing while every size is the same one.
    fn set_size(&mut self, slot: usize, key: Key, size: u32) {
        if self.sizes.is_empty() {
            match self.uniform {
                None => self.uniform = Some(size),
                Some(same) if same == size => return,
                Some(same) => {
                    // The first size that differs: every slot gets its own from now on.
                    self.sizes = vec![0; self.keys.len()];
                    for set in 0..self.sets {
                        let (start, _, _) = self.span(set);
                        for rank in 0..self.filled[set as usize] as usize {
                            let at = start + self.order[start + rank] as usize;
                            self.store_size(at, self.keys[at], same);
                        }
                    }
                }
            }
            if self.sizes.is_empty() {
                return;
            }
        }
        self.store_size(slot, key, size);
    }

    fn store_size(&mut self, slot: usize, key: Key, size: u32) {
        if size >= SIZE_ESCAPE as u32 {
            self.sizes[slot] = SIZE_ESCAPE;
            self.large.insert(key, size);
        } else {
            self.sizes[slot] = size as u16;
        }
    }

    /// Moves the way at `rank` of the set at `start` to the front of its order.
    fn move_first(&mut self, start: usize, rank: usize) {
        let way = self.order[start + rank];
        self.order.copy_within(start..start + rank, start + 1);
        self.order[start] = way;
    }

    /// Frees the way at `rank`: it leaves the occupied ways and joins the free ones last.
    fn vacate(&mut self, set: usize, start: usize, rank: usize) -> (Key, u32) {
        let (_, _, physical) = self.span(set as u32);
        let way = self.order[start + rank];
        self.order.copy_within(start + rank + 1..start + physical, start + rank);
        self.order[start + physical - 1] = way;
        self.filled[set] -= 1;
        self.resident -= 1;
        let slot = start + way as usize;
        let key = self.keys[slot];
        let size = self.size_at(slot);
        if self.sizes.get(slot) == Some(&SIZE_ESCAPE) {
            self.large.remove(&key);
        }
        if let Some(log) = &mut self.vacated {
            log.push((key, slot as u32));
        }
        (key, size)
    }

    /// Evicts the last way in the order of `set`, if any.
    fn evict_from(&mut self, set: u32) -> Option<(Key, u32)> {
        let filled = self.filled[set as usize] as usize;
        let (start, _, _) = self.span(set);
        (filled > 0).then(|| self.vacate(set as usize, start, filled - 1))
    }

    /// Bytes of DRAM the policy keeps per slot (key and order; two more for sizes once they
    /// differ) and per set.
    pub const BYTES_PER_SLOT: usize = 8 + 1;
    pub const BYTES_PER_SET: usize = 1;
}

impl Eviction for SetAssoc {
    fn peek(&self, key: Key) -> Option<u32> {
        self.find(key).map(|f| self.size_at(self.slot_at(&f)))
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let found = self.find(req.key)?;
        let size = self.size_at(self.slot_at(&found));
        if self.order_rule == Order::Lru {
            self.move_first(found.start, found.rank);
        }
        Some(size)
    }

    fn admit(&mut self, _req: &Request, _needs_room: bool) -> Result<(), RejectReason> {
        Ok(())
    }

    /// A full set makes room for the key by evicting its own victim: the key can go nowhere
    /// else.
    fn prepare_insert(&mut self, req: &Request, sink: &mut Sink) {
        let set = self.set_of(req.key);
        let (_, budget, _) = self.span(set);
        if self.filled[set as usize] as usize == budget {
            let (key, size) = self.evict_from(set).expect("a full set has a victim");
            sink.evicted(key, size);
        }
    }

    fn prepare_restore(&mut self, req: &Request, sink: &mut Sink) {
        self.prepare_insert(req, sink);
    }

    /// Only reached when the whole tier is full, which `prepare_insert` rules out for the
    /// incoming key's set; the incoming key's set's victim is still the one to take.
    fn evict(&mut self, incoming: &Request) -> Option<(Key, u32)> {
        let set = self.set_of(incoming.key);
        self.evict_from(set).or_else(|| (0..self.sets).find_map(|s| self.evict_from(s)))
    }

    fn insert(&mut self, req: &Request) {
        let set = self.set_of(req.key);
        let (start, budget, physical) = self.span(set);
        if !self.has_order(start, physical) {
            for (way, entry) in self.order[start..start + physical].iter_mut().enumerate() {
                *entry = way as u8;
            }
        }
        let filled = self.filled[set as usize] as usize;
        assert!(filled < budget, "insert into a full set (prepare_insert makes room)");
        let slot = start + self.order[start + filled] as usize;
        self.keys[slot] = req.key;
        self.set_size(slot, req.key, req.size);
        self.filled[set as usize] += 1;
        self.resident += 1;
        self.move_first(start, filled);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let found = self.find(key)?;
        let set = self.set_of(key) as usize;
        Some(self.vacate(set, found.start, found.rank).1)
    }

    fn used(&self) -> u64 {
        self.resident
    }

    fn resident(&self) -> u64 {
        self.resident
    }

    fn label(&self) -> String {
        let order = match self.order_rule {
            Order::Lru => "lru",
            Order::Fifo => "fifo",
        };
        format!("setassoc({}-way {order})", self.ways)
    }

    fn placement(&mut self) -> Option<&mut dyn PlacedSlots> {
        Some(self)
    }

    fn placement_ref(&self) -> Option<&dyn PlacedSlots> {
        Some(self)
    }
}

impl PlacedSlots for SetAssoc {
    fn slots(&self) -> u32 {
        SetAssoc::slots(self)
    }

    fn stride(&self) -> u32 {
        SetAssoc::stride(self)
    }

    fn spare(&self) -> u32 {
        SetAssoc::spare(self)
    }

    fn set_of(&self, key: Key) -> u32 {
        SetAssoc::set_of(self, key)
    }

    fn key_at(&self, slot: u32) -> Option<Key> {
        SetAssoc::key_at(self, slot)
    }

    fn slot_of(&self, key: Key) -> Option<u32> {
        SetAssoc::slot_of(self, key)
    }

    fn track_vacated(&mut self, on: bool) {
        SetAssoc::track_vacated(self, on)
    }

    fn take_vacated(&mut self) -> Vec<(Key, u32)> {
        SetAssoc::take_vacated(self)
    }

    fn free_slots(&self, key: Key) -> Vec<u32> {
        SetAssoc::free_slots(self, key).collect()
    }

    fn first_free(&self, key: Key, usable: &mut dyn FnMut(u32) -> bool) -> Option<u32> {
        SetAssoc::free_slots(self, key).find(|&slot| usable(slot))
    }

    fn relocate(&mut self, key: Key, to: u32) -> Option<u32> {
        SetAssoc::relocate(self, key, to)
    }
}

#[cfg(test)]
mod tests {
    use tiercache_core::{Decision, Op, TierId};

    use super::*;

    fn read(key: Key) -> Request {
        Request::new(0, key, 4096, Op::Read)
    }

    fn build(ways: u32, capacity: u64, order: Order) -> SetAssoc {
        SetAssoc::new(&SetAssocConfig { ways, order, spare: 0 }, Capacity::objects(capacity))
    }

    /// Inserts `key` as the frame does: room in its set first.
    fn insert(policy: &mut SetAssoc, key: Key) -> Vec<Key> {
        let mut decision = Decision::new();
        policy.prepare_insert(&read(key), &mut Sink::new(&mut decision, TierId(0)));
        policy.insert(&read(key));
        decision.actions.iter().map(|a| a.key()).collect()
    }

    /// Keys of one set, found by trying keys in order.
    fn keys_in_set(policy: &SetAssoc, set: u32, n: usize) -> Vec<Key> {
        (0..).filter(|&k| policy.set_of(k) == set).take(n).collect()
    }

    #[test]
    fn a_full_set_evicts_its_least_recently_used_way_and_nothing_else() {
        let mut policy = build(4, 64, Order::Lru);
        let keys = keys_in_set(&policy, 3, 6);
        for &k in &keys[..4] {
            assert!(insert(&mut policy, k).is_empty());
        }
        // keys[0] becomes the most recent; keys[1] is now the least recent.
        assert_eq!(policy.access(&read(keys[0])), Some(4096));
        assert_eq!(insert(&mut policy, keys[4]), vec![keys[1]]);
        assert_eq!(insert(&mut policy, keys[5]), vec![keys[2]]);
        assert_eq!(policy.resident(), 4);
        for &k in &[keys[0], keys[3], keys[4], keys[5]] {
            assert!(policy.peek(k).is_some(), "{k}");
        }
        // Every other set still has all its room.
        let other = keys_in_set(&policy, 5, 1)[0];
        assert!(insert(&mut policy, other).is_empty());
    }

    #[test]
    fn fifo_sets_ignore_hits() {
        let mut policy = build(2, 8, Order::Fifo);
        let keys = keys_in_set(&policy, 1, 3);
        insert(&mut policy, keys[0]);
        insert(&mut policy, keys[1]);
        policy.access(&read(keys[0]));
        assert_eq!(insert(&mut policy, keys[2]), vec![keys[0]]);
    }

    #[test]
    fn slots_stay_within_their_set_and_are_reused_after_a_removal() {
        let mut policy = build(4, 10, Order::Lru);
        assert_eq!(policy.sets, 3);
        let keys = keys_in_set(&policy, 2, 3); // the last set: ways 8 and 9 only
        insert(&mut policy, keys[0]);
        insert(&mut policy, keys[1]);
        let slots: Vec<u32> = keys[..2].iter().map(|&k| policy.slot_of(k).unwrap()).collect();
        assert!(slots.iter().all(|s| (8..10).contains(s)), "{slots:?}");
        assert_eq!(policy.remove(keys[0]), Some(4096));
        assert_eq!(policy.slot_of(keys[0]), None);
        assert!(insert(&mut policy, keys[2]).is_empty());
        assert_eq!(policy.slot_of(keys[2]), Some(slots[0]));
    }

    #[test]
    fn large_sizes_are_kept_whole() {
        let mut policy = build(4, 8, Order::Lru);
        let mut big = read(7);
        big.size = 1 << 20;
        let mut decision = Decision::new();
        policy.prepare_insert(&big, &mut Sink::new(&mut decision, TierId(0)));
        policy.insert(&big);
        assert_eq!(policy.peek(7), Some(1 << 20));
        assert_eq!(policy.remove(7), Some(1 << 20));
        assert!(policy.large.is_empty());
    }

    #[test]
    fn sizes_cost_nothing_until_they_differ_and_stay_right_after() {
        let mut policy = build(4, 64, Order::Lru);
        let sized = |key: Key, size: u32| Request { size, ..read(key) };
        let mut decision = Decision::new();
        for key in 0..10 {
            policy.prepare_insert(&read(key), &mut Sink::new(&mut decision, TierId(0)));
            policy.insert(&read(key));
        }
        assert!(policy.sizes.is_empty());
        for (key, size) in [(100, 7u32), (101, 1 << 20), (102, 4096)] {
            policy.prepare_insert(&sized(key, size), &mut Sink::new(&mut decision, TierId(0)));
            policy.insert(&sized(key, size));
        }
        assert!(!policy.sizes.is_empty());
        assert!((0..10).all(|k| policy.peek(k) == Some(4096)));
        assert_eq!(policy.peek(100), Some(7));
        assert_eq!(policy.peek(101), Some(1 << 20));
        assert_eq!(policy.remove(101), Some(1 << 20));
        assert!(policy.large.is_empty());
    }

    #[test]
    fn keys_spread_evenly_over_sets() {
        let policy = build(16, 16 * 1024, Order::Lru);
        let mut counts = vec![0u32; 1024];
        // Block numbers and byte offsets alike.
        for key in 0..64 * 1024u64 {
            counts[policy.set_of(key * 4096) as usize] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 30 && *max < 110, "{min} {max}");
    }

    #[test]
    fn bytes_and_absurd_ways_are_refused_with_the_setting() {
        let config = SetAssocConfig::default();
        let err = config.check_capacity(Capacity::bytes(1 << 20)).unwrap_err().to_string();
        assert!(err.contains("capacity") && err.contains("objects"), "{err}");
        let err = SetAssocConfig { ways: 65, ..config.clone() }.validate().unwrap_err().to_string();
        assert!(err.contains("ways") && err.contains("65"), "{err}");
        let err = SetAssocConfig { spare: 49, ..config }.validate().unwrap_err().to_string();
        assert!(err.contains("spare") && err.contains("49"), "{err}");
    }
}
