//! The hit rule (`tiercache_policy::told`): a policy with quiet hits told of a key's first hit
//! in each epoch of insertions, worked by hand.

use tiercache_core::{Action, Capacity, Decision, Key, Op, Request, TierId};
use tiercache_policy::told::{HitRule, Told, TAGS};
use tiercache_policy::{AnyPolicy, Policy, PolicyConfig};

fn lru(objects: u64, divisor: u32) -> Told<AnyPolicy> {
    let policy =
        AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(objects), &[], 0).unwrap();
    Told::new(policy, divisor)
}

fn decide(p: &mut Told<AnyPolicy>, key: Key, op: Op) -> Decision {
    let mut out = Decision::new();
    p.decide(&Request::new(0, key, 4096, op), &mut out);
    out
}

#[test]
fn rules_parse_and_bad_ones_name_the_setting() {
    assert_eq!(HitRule::parse("exact").unwrap(), HitRule::Exact);
    assert_eq!(HitRule::parse("epochs").unwrap(), HitRule::ENGINE);
    assert_eq!(HitRule::parse("epochs:8").unwrap(), HitRule::Epochs { divisor: 8 });
    for bad in ["epochs:0", "epochs:x", "sometimes"] {
        let err = HitRule::parse(bad).unwrap_err().to_string();
        assert!(err.contains("hit_rule") && err.contains(bad), "{err}");
    }
    assert_eq!(HitRule::parse(&HitRule::ENGINE.label()).unwrap(), HitRule::ENGINE);
}

/// LRU over 8 objects, epochs of 2 insertions.
#[test]
fn a_key_is_told_its_first_hit_an_epoch_and_after_each_write() {
    let mut p = lru(8, 4);
    assert_eq!(p.epoch_length(), 2);
    decide(&mut p, 1, Op::Read); // a miss, inserted: the epoch's first insertion
    decide(&mut p, 1, Op::Read); // the first hit: told
    assert_eq!(p.untold(), 0);
    let skipped = decide(&mut p, 1, Op::Lookup); // again in the same epoch: not told
    assert_eq!((skipped.hit, skipped.actions.len(), p.untold()), (Some(TierId(0)), 0, 1));
    decide(&mut p, 1, Op::Write); // a write is told, and the next hit is told too
    decide(&mut p, 1, Op::Read);
    assert_eq!(p.untold(), 1, "the first hit after a write is told");
    decide(&mut p, 1, Op::Read);
    assert_eq!(p.untold(), 2);
    decide(&mut p, 2, Op::Read); // the second insertion: a new epoch
    assert_eq!(p.tag(), 2);
    decide(&mut p, 1, Op::Read);
    assert_eq!(p.untold(), 2, "told again in a new epoch");
    decide(&mut p, 1, Op::Read);
    assert_eq!(p.untold(), 3);
}

/// The rule changes LRU's order only within an epoch: key 1, hit early in the epoch and again
/// later (not told), is evicted before key 2, hit once in between.
#[test]
fn an_untold_hit_leaves_the_key_where_its_told_hit_put_it() {
    let mut p = lru(3, 1); // epochs of 3 insertions
    for key in [1, 2, 3] {
        decide(&mut p, key, Op::Read); // fills the cache: epoch 2 begins
    }
    decide(&mut p, 1, Op::Read); // told: 1 is the most recent
    decide(&mut p, 2, Op::Read); // told: 2 is the most recent
    decide(&mut p, 1, Op::Read); // not told: exact LRU would put 1 ahead of 2
    let miss = decide(&mut p, 4, Op::Read);
    assert!(miss.actions.contains(&Action::Evict { tier: TierId(0), key: 3, size: 4096 }));
    let miss = decide(&mut p, 5, Op::Read);
    assert!(
        miss.actions.contains(&Action::Evict { tier: TierId(0), key: 1, size: 4096 }),
        "{miss:?}"
    );
}

#[test]
fn an_evicted_key_is_told_again_and_tags_wrap() {
    let mut p = lru(2, 2); // epochs of 1 insertion
    decide(&mut p, 1, Op::Read);
    decide(&mut p, 1, Op::Read); // told, stamped
    decide(&mut p, 2, Op::Read);
    decide(&mut p, 3, Op::Read); // evicts 1, the least recent
    decide(&mut p, 1, Op::Read); // a miss: inserted again, evicting 2
    decide(&mut p, 1, Op::Read); // its first hit since: told
    assert_eq!(p.untold(), 0);
    for key in 4..4 + TAGS {
        decide(&mut p, key, Op::Read);
    }
    assert_eq!(p.tag() as u64, 1 + (4 + TAGS) % TAGS, "131 insertions, a tag each");
}
