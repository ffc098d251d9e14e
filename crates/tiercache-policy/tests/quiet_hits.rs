//! The contract the engine's unlocked hits rest on (`AnyPolicy::quiet_hits`): for a policy
//! with quiet hits, a hit is decided the same whether it comes as a read or a lookup, decides
//! nothing but a hit in tier 0, and a lookup of a key not resident changes nothing. So hits
//! told later as lookups, in order, leave every later decision as it would have been.

use tiercache_core::{Capacity, Decision, Op, Request, SeededRng, TierId};
use tiercache_policy::{AnyPolicy, Policy, PolicyConfig};

fn policy(name: &str) -> AnyPolicy {
    AnyPolicy::from_config(&PolicyConfig::parse(name).unwrap(), Capacity::objects(100), &[], 7)
        .unwrap()
}

/// Reads, writes and deletes over 300 keys, skewed so that a third or so of reads hit.
fn stream(seed: u64) -> Vec<Request> {
    let mut rng = SeededRng::new(seed);
    (0..20_000)
        .map(|_| {
            let key = rng.below(300).min(rng.below(300));
            let op = match rng.below(10) {
                0..=5 => Op::Read,
                6..=8 => Op::Write,
                _ => Op::Delete,
            };
            Request::new(0, key, 4096, op)
        })
        .collect()
}

#[test]
fn quiet_policies_decide_the_same_when_hits_come_as_lookups_with_lookups_of_absent_keys_between() {
    for name in ["fifo", "lru", "clock", "lfu", "arc", "s3fifo"] {
        let (mut plain, mut quiet) = (policy(name), policy(name));
        assert!(quiet.quiet_hits(), "{name}");
        let (mut a, mut b) = (Decision::new(), Decision::new());
        let mut rng = SeededRng::new(11);
        let mut hits_as_lookups = 0;
        for (i, req) in stream(3).iter().enumerate() {
            // A lookup of a key not resident (ghosts included) decides and changes nothing.
            let absent = (0..400).map(|_| rng.below(600)).find(|k| quiet.peek(*k).is_none());
            if let Some(key) = absent {
                b.clear();
                quiet.decide(&Request::new(0, key, 4096, Op::Lookup), &mut b);
                assert_eq!((b.hit, b.actions.len()), (None, 0), "{name}: lookup of absent {key}");
            }
            a.clear();
            plain.decide(req, &mut a);
            // A read that hits is told as a lookup: the same hit, nothing else.
            let as_lookup = req.op == Op::Read && quiet.peek(req.key).is_some();
            let told = if as_lookup { Request { op: Op::Lookup, ..*req } } else { *req };
            hits_as_lookups += as_lookup as u64;
            b.clear();
            quiet.decide(&told, &mut b);
            assert_eq!(a, b, "{name}: request {i} ({req:?}) decided differently");
            if as_lookup {
                assert_eq!((b.hit, b.actions.len()), (Some(TierId(0)), 0), "{name}: {req:?}");
            }
        }
        assert!(hits_as_lookups > 2_000, "{name}: only {hits_as_lookups} hits exercised");
    }
}

#[test]
fn policies_with_periodic_work_or_two_tiers_are_not_quiet() {
    assert!(!policy("lfru").quiet_hits());
    let lru = PolicyConfig::Lru;
    let caps = [Capacity::objects(10), Capacity::objects(20)];
    assert!(!AnyPolicy::dram_first(&lru, &lru, caps, &[], 0).unwrap().quiet_hits());
}
