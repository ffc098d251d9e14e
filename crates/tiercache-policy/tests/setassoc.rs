//! The set-associative policy against references written here as plainly as possible: with
//! one set it is exactly LRU (or FIFO) of that capacity; with many, each set is an LRU (or
//! FIFO) list of its own keys; and as a tier of a hierarchy, alone or in an Open CAS mode, the
//! conformance shadow accepts every decision.

use proptest::prelude::*;
use tiercache_core::{Capacity, Decision, Op, Request};
use tiercache_policy::conformance::check_stream;
use tiercache_policy::setassoc::{Order, SetAssoc, SetAssocConfig};
use tiercache_policy::{AdmissionConfig, AnyPolicy, Placement, Policy, PolicyConfig};

fn stream(keys: u64) -> impl Strategy<Value = Vec<Request>> {
    let op = prop_oneof![5 => Just(Op::Read), 3 => Just(Op::Write), 1 => Just(Op::Delete), 1 => Just(Op::Lookup)];
    prop::collection::vec((0..keys, 0..keys, op), 1..800).prop_map(|raw| {
        raw.into_iter()
            .enumerate()
            .map(|(t, (a, b, op))| Request::new(t as u64, a.min(b), 4096, op))
            .collect()
    })
}

fn decide_all(policy: &mut AnyPolicy, reqs: &[Request]) -> Vec<Decision> {
    reqs.iter()
        .map(|r| {
            let mut d = Decision::new();
            policy.decide(r, &mut d);
            d
        })
        .collect()
}

/// Each set a list of its keys, most recent (LRU) or newest (FIFO) first.
struct Model {
    sets: Vec<Vec<u64>>,
    ways: Vec<usize>,
    lru: bool,
}

impl Model {
    fn new(capacity: u64, ways: u32, lru: bool) -> Model {
        let sets = capacity.div_ceil(ways as u64) as usize;
        let ways =
            (0..sets).map(|s| (capacity as usize - s * ways as usize).min(ways as usize)).collect();
        Model { sets: vec![Vec::new(); sets], ways, lru }
    }

    /// Applies a request; returns whether it hit and what it evicted.
    fn apply(&mut self, set: usize, req: &Request) -> (bool, Option<u64>) {
        let list = &mut self.sets[set];
        let at = list.iter().position(|&k| k == req.key);
        match (req.op, at) {
            (Op::Delete, Some(i)) => {
                list.remove(i);
                (false, None)
            }
            (Op::Delete, None) | (Op::Lookup, None) => (false, None),
            (_, Some(i)) => {
                if self.lru {
                    let key = list.remove(i);
                    list.insert(0, key);
                }
                (true, None)
            }
            (_, None) => {
                let victim = (list.len() == self.ways[set]).then(|| list.pop().unwrap());
                list.insert(0, req.key);
                (false, victim)
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn one_set_is_exactly_lru_or_fifo(reqs in stream(40), capacity in 1u64..=32, lru in any::<bool>()) {
        let (order, plain) = if lru { ("lru", "lru") } else { ("fifo", "fifo") };
        let config = PolicyConfig::parse(&format!("setassoc:ways=32,order={order}")).unwrap();
        let cap = Capacity::objects(capacity);
        let mut sets = AnyPolicy::from_config(&config, cap, &[], 1).unwrap();
        let mut reference = AnyPolicy::from_config(&PolicyConfig::parse(plain).unwrap(), cap, &[], 1).unwrap();
        prop_assert_eq!(decide_all(&mut sets, &reqs), decide_all(&mut reference, &reqs));
    }

    #[test]
    fn every_set_is_its_own_list(reqs in stream(200), capacity in 1u64..=64, ways in 1u32..=8, lru in any::<bool>()) {
        let order = if lru { Order::Lru } else { Order::Fifo };
        let config = SetAssocConfig { ways, order, spare: 0 };
        let cap = Capacity::objects(capacity);
        let chooser = SetAssoc::new(&config, cap);
        let mut policy = AnyPolicy::from_config(&PolicyConfig::Setassoc(config), cap, &[], 1).unwrap();
        let mut model = Model::new(capacity, ways, lru);
        for req in &reqs {
            let mut d = Decision::new();
            policy.decide(req, &mut d);
            let (hit, victim) = model.apply(chooser.set_of(req.key) as usize, req);
            prop_assert_eq!(d.hit.is_some(), hit, "{:?}", req);
            let evicted: Vec<u64> = d.actions.iter()
                .filter(|a| matches!(a, tiercache_core::Action::Evict { .. }))
                .map(|a| a.key())
                .collect();
            prop_assert_eq!(evicted, victim.into_iter().collect::<Vec<_>>(), "{:?}", req);
        }
    }

    /// What the engine does to the policy's slots (spare ways, moving keys to other free
    /// slots of their set) changes no decision, and every slot stays inside its set, one key
    /// to a slot; the log of vacated slots names each key's slot when it left.
    #[test]
    fn spare_ways_and_relocations_change_no_decision(
        reqs in stream(200),
        capacity in 1u64..=64,
        ways in 1u32..=8,
        spare in 1u32..=4,
        moves in prop::collection::vec(any::<u32>(), 800),
    ) {
        let cap = Capacity::objects(capacity);
        let plain = SetAssocConfig { ways, order: Order::Lru, spare: 0 };
        let spared = SetAssocConfig { spare, ..plain.clone() };
        let mut reference = AnyPolicy::from_config(&PolicyConfig::Setassoc(plain), cap, &[], 1).unwrap();
        let mut policy = AnyPolicy::from_config(&PolicyConfig::Setassoc(spared), cap, &[], 1).unwrap();
        let tier = tiercache_core::TierId(0);
        policy.placement(tier).unwrap().track_vacated(true);
        let mut slots: std::collections::HashMap<u64, u32> = Default::default();
        for (req, pick) in reqs.iter().zip(moves) {
            let (mut a, mut b) = (Decision::new(), Decision::new());
            reference.decide(req, &mut a);
            policy.decide(req, &mut b);
            prop_assert_eq!(&a, &b);
            let sets = policy.placement(tier).unwrap();
            for (key, slot) in sets.take_vacated() {
                prop_assert_eq!(slots.remove(&key), Some(slot), "key {} left a slot it was not in", key);
            }
            // Relocate the request's key, if resident, to one of its free slots.
            if sets.slot_of(req.key).is_some() {
                let free: Vec<u32> = sets.free_slots(req.key);
                prop_assert!(free.len() >= spare as usize);
                let to = free[pick as usize % free.len()];
                let from = sets.relocate(req.key, to).unwrap();
                prop_assert_eq!(sets.free_slots(req.key).last().copied(), Some(from));
                prop_assert_eq!(sets.relocate(req.key, to), None, "not free any more");
            }
            for d in [&b] {
                for action in &d.actions {
                    let key = action.key();
                    if let Some(slot) = sets.slot_of(key) {
                        slots.insert(key, slot);
                    }
                }
            }
            if let Some(slot) = sets.slot_of(req.key) {
                slots.insert(req.key, slot);
                prop_assert_eq!(slot / sets.stride(), sets.set_of(req.key));
            }
        }
        let sets = policy.placement_ref(tier).unwrap();
        let mut taken: Vec<u32> = slots.values().copied().collect();
        taken.sort_unstable();
        taken.dedup();
        prop_assert_eq!(taken.len(), slots.len(), "two keys in one slot");
        for (key, slot) in &slots {
            prop_assert_eq!(sets.slot_of(*key), Some(*slot));
        }
    }

    #[test]
    fn setassoc_conforms_alone_below_dram_and_in_write_back(
        reqs in stream(120),
        upper in 1u64..12,
        lower in 1u64..48,
        ways in 1u32..=16,
    ) {
        use tiercache_policy::cas::{CacheMode, CasConfig};
        let config = PolicyConfig::Setassoc(SetAssocConfig { ways, order: Order::Lru, spare: 0 });
        // Sizes that differ by key, and now and then for one key (a resizing hit).
        let sized: Vec<Request> = reqs.iter().enumerate().map(|(i, r)| {
            let size = if i % 7 == 0 { 70_000 } else { 1 + (r.key as u32 * 7919) % 5000 };
            Request { size, ..*r }
        }).collect();
        for admission in ["always", "second-hit:8"] {
            let admission = AdmissionConfig::parse_chain(admission).unwrap();
            for stream in [&reqs, &sized] {
                let mut alone = AnyPolicy::from_config(&config, Capacity::objects(lower), &admission, 2).unwrap();
                let result = check_stream(&mut alone, stream);
                prop_assert!(result.is_ok(), "alone: {}", result.unwrap_err());
            }
        }
        for placement in ["dram-first", "scm-first:2", "bidirectional:4"] {
            let placement = Placement::parse(placement).unwrap();
            let caps = [Capacity::objects(upper), Capacity::objects(lower)];
            for in_wb_mode in [false, true] {
                let mut policy = AnyPolicy::hybrid(placement, &PolicyConfig::Lru, &config, caps, &[], 3).unwrap();
                if in_wb_mode {
                    policy = policy.in_mode(CasConfig::new(CacheMode::WriteBack));
                }
                let result = check_stream(&mut policy, &reqs);
                prop_assert!(result.is_ok(), "{placement:?} wb {in_wb_mode}: {}", result.unwrap_err());
            }
        }
    }
}

#[test]
fn a_capacity_in_bytes_is_refused_naming_the_unit() {
    let config = PolicyConfig::parse("setassoc:ways=8").unwrap();
    let err = AnyPolicy::from_config(&config, Capacity::bytes(1 << 20), &[], 1).err().unwrap();
    assert!(err.to_string().contains("objects"), "{err}");
    let err = PolicyConfig::parse("setassoc:order=random").unwrap_err().to_string();
    assert!(err.contains("order") && err.contains("random"), "{err}");
}

/// How many more misses than a fully associative LRU of the same size: few with 16 ways, on a
/// skewed stream much larger than the cache.
#[test]
fn sixteen_ways_miss_little_more_than_full_lru() {
    let mut rng = 0x1234_5678_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // Keys skewed: the minimum of three uniform draws over 20,000 keys.
    let reqs: Vec<Request> = (0..200_000u64)
        .map(|t| {
            let key = (0..3).map(|_| next() % 20_000).min().unwrap();
            Request::new(t, key * 4096, 4096, Op::Read)
        })
        .collect();
    let cap = Capacity::objects(4096);
    let misses = |config: &str| {
        let mut policy =
            AnyPolicy::from_config(&PolicyConfig::parse(config).unwrap(), cap, &[], 1).unwrap();
        decide_all(&mut policy, &reqs).iter().filter(|d| d.hit.is_none()).count() as f64
    };
    let (lru, sixteen, direct) =
        (misses("lru"), misses("setassoc:ways=16"), misses("setassoc:ways=1"));
    eprintln!("misses: LRU {lru}, 16-way {sixteen}, direct-mapped {direct}");
    assert!(sixteen < lru * 1.05, "16-way {sixteen} vs LRU {lru}");
    assert!(direct > sixteen * 1.05, "direct-mapped {direct} vs 16-way {sixteen}");
}
