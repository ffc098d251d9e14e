//! A restarted cache tells its policy the blocks it found on its media (`Policy::restore`),
//! oldest first. The policy must then hold them where they were found, so the restart is
//! warm, and keep its capacity, so a cache restored into a smaller one evicts.

use tiercache_core::{Action, Capacity, Decision, Op, Request, TierId};
use tiercache_policy::cas::{CacheMode, CasConfig};
use tiercache_policy::{AnyPolicy, Placement, Policy, PolicyConfig};

/// The registered single-tier policies a cache restores into: all but those that read the
/// future (Belady's, which only a simulator can run) and the set-associative one, which
/// places each key in its set and is restored by the slot the block lies in (the engine's
/// `recovery` tests).
fn single_tier() -> Vec<&'static str> {
    let restored = |name: &&str| {
        let config = PolicyConfig::parse(name).unwrap();
        !config.needs_future() && !matches!(config, PolicyConfig::Setassoc(_))
    };
    let names: Vec<&str> = PolicyConfig::NAMES.iter().copied().filter(restored).collect();
    assert!(names.len() >= 8, "the classic policies are registered: {names:?}");
    names
}

fn single(name: &str, objects: u64) -> AnyPolicy {
    let config = PolicyConfig::parse(name).unwrap();
    AnyPolicy::from_config(&config, Capacity::objects(objects), &[], 0).unwrap()
}

fn read(policy: &mut AnyPolicy, key: u64) -> Decision {
    let mut out = Decision::new();
    policy.decide(&Request::new(1, key, 1, Op::Read), &mut out);
    out
}

#[test]
fn restored_blocks_hit_where_they_were_found() {
    for name in single_tier() {
        let mut policy = single(name, 10);
        let mut out = Decision::new();
        for key in 0..10 {
            assert!(policy.restore(key, 1, TierId(0), false, &mut out), "{name}: key {key}");
        }
        assert!(out.actions.is_empty(), "{name}: room was made in a cache with room: {out:?}");
        assert_eq!(policy.resident(TierId(0)), 10, "{name}");
        for key in 0..10 {
            assert_eq!(read(&mut policy, key).hit, Some(TierId(0)), "{name}: key {key}");
        }
        // A key already there, a tier the policy does not have, and a dirty block (a plain
        // policy's copies are clean) are refused.
        assert!(!policy.restore(3, 1, TierId(0), false, &mut out), "{name}");
        assert!(!policy.restore(99, 1, TierId(1), false, &mut out), "{name}");
        assert!(!policy.restore(98, 1, TierId(0), true, &mut out), "{name}");
    }
}

#[test]
fn more_blocks_than_room_evict_the_oldest_restored() {
    let mut policy = single("lru", 4);
    let mut evicted = Vec::new();
    for key in 0..6 {
        let mut out = Decision::new();
        assert!(policy.restore(key, 1, TierId(0), false, &mut out));
        evicted.extend(out.actions.iter().map(|a| match a {
            Action::Evict { key, .. } => *key,
            other => panic!("only evictions make room: {other:?}"),
        }));
    }
    assert_eq!(evicted, [0, 1], "restored oldest first, the oldest go first");
    assert_eq!(policy.used(TierId(0)), 4);
}

#[test]
fn a_hierarchy_restores_into_each_tier() {
    let tiers =
        [(PolicyConfig::Lru, Capacity::objects(2)), (PolicyConfig::Lru, Capacity::objects(8))];
    for placement in [Placement::DramFirst, Placement::ScmFirst { threshold: 2 }] {
        let mut policy = AnyPolicy::hierarchy(placement, &tiers, &[], 0).unwrap();
        let mut out = Decision::new();
        for key in 0..8 {
            assert!(policy.restore(key, 1, TierId(1), false, &mut out));
        }
        assert!(policy.restore(100, 1, TierId(0), false, &mut out));
        assert!(out.actions.is_empty(), "{out:?}");
        assert_eq!(policy.peek(5), Some((TierId(1), 1)));
        assert_eq!(policy.peek(100), Some((TierId(0), 1)));
        assert_eq!(read(&mut policy, 5).hit, Some(TierId(1)));
        // A ninth block in the lower tier evicts its oldest.
        let mut out = Decision::new();
        assert!(policy.restore(9, 1, TierId(1), false, &mut out));
        assert!(
            matches!(out.actions[..], [Action::Evict { key: 0, tier: TierId(1), .. }]),
            "{out:?}"
        );
    }
}

#[test]
fn a_cache_mode_keeps_restored_dirty_blocks_dirty() {
    let mut cas = single("lru", 8).in_mode(CasConfig::new(CacheMode::WriteBack));
    let mut out = Decision::new();
    assert!(cas.restore(1, 1, TierId(0), true, &mut out));
    assert!(cas.restore(2, 1, TierId(0), false, &mut out));
    let AnyPolicy::Cas(inner) = &cas else { unreachable!() };
    assert_eq!(inner.dirty_blocks(), 1);
    // Evicting the dirty block writes it back first: the mode knows it is dirty.
    let mut actions = Vec::new();
    for key in 10..20 {
        actions.extend(read(&mut cas, key).actions);
    }
    let at = |wanted: fn(&Action) -> bool| actions.iter().position(wanted);
    let written = at(|a| matches!(a, Action::WriteBack { key: 1, .. })).expect("written back");
    let evicted = at(|a| matches!(a, Action::Evict { key: 1, .. })).expect("evicted");
    assert!(written < evicted, "{actions:?}");
    assert!(!actions.iter().any(|a| matches!(a, Action::WriteBack { key: 2, .. })));
}

/// Hibachi and Hybrid-ARC take dirty blocks back in NVRAM (dirty pages live nowhere else), and
/// write them back before they go, or all at once when asked.
#[test]
fn hibachi_and_hybrid_arc_keep_restored_dirty_blocks_dirty() {
    let caps = [Capacity::objects(2), Capacity::objects(4)];
    let hibachi =
        || AnyPolicy::hibachi(&tiercache_policy::hibachi::HibachiConfig::default(), caps).unwrap();
    let hybrid_arc = || AnyPolicy::hybrid_arc(caps).unwrap();
    for (name, make) in
        [("hibachi", &hibachi as &dyn Fn() -> AnyPolicy), ("hybrid-arc", &hybrid_arc)]
    {
        let mut policy = make();
        let mut out = Decision::new();
        assert!(!policy.restore(1, 1, TierId(0), true, &mut out), "{name}: dirty in DRAM");
        assert!(policy.restore(1, 1, TierId(1), true, &mut out), "{name}");
        assert!(policy.restore(2, 1, TierId(1), false, &mut out), "{name}");
        assert!(policy.restore(3, 1, TierId(0), false, &mut out), "{name}");
        assert_eq!(policy.peek(1), Some((TierId(1), 1)), "{name}");
        assert_eq!(read(&mut policy, 3).hit, Some(TierId(0)), "{name}");
        // Many misses push everything out; the dirty block is written back before it goes.
        let mut actions = Vec::new();
        for key in 10..30 {
            let mut d = Decision::new();
            policy.decide(&Request::new(1, key, 1, Op::Write), &mut d);
            actions.extend(d.actions);
        }
        let at = |wanted: &dyn Fn(&Action) -> bool| actions.iter().position(wanted);
        let written = at(&|a| matches!(a, Action::WriteBack { key: 1, .. })).expect("written back");
        let evicted = at(&|a| matches!(a, Action::Evict { key: 1, .. })).expect("evicted");
        assert!(written < evicted, "{name}: {actions:?}");
        // On demand: every dirty page, once.
        let mut out = Decision::new();
        policy.write_back(None, &mut out);
        let written = out.actions.iter().filter(|a| matches!(a, Action::WriteBack { .. })).count();
        // The last writes are dirty in NVRAM (all four in Hibachi; Hybrid-ARC keeps a clean
        // share there).
        assert!(written >= 3, "{name}: {out:?}");
        let mut again = Decision::new();
        policy.write_back(None, &mut again);
        assert!(again.actions.is_empty(), "{name}: {again:?}");
    }
}
