//! The contract the engine's unlocked hits rest on (`AnyPolicy::quiet_hits`): for a policy
//! with quiet hits, a hit is decided the same whether it comes as a read or a lookup, decides
//! nothing but a hit in tier 0, and a lookup of a key not resident changes nothing. So hits
//! told later as lookups, in order, leave every later decision as it would have been.

use tiercache_core::{Action, Capacity, Decision, Op, Request, SeededRng, TierId};
use tiercache_policy::cas::{CacheMode, CasConfig, SeqCutoffPolicy};
use tiercache_policy::{AnyPolicy, HitRule, Policy, PolicyConfig};

/// A policy by name; `lru[wt]` and the like run it in an Open CAS mode, without sequential
/// cutoff unless the name ends in `+cutoff`.
fn policy(name: &str) -> AnyPolicy {
    let (base, mode) = match name.split_once('[') {
        Some((base, rest)) => (base, Some(rest.trim_end_matches(']').trim_end_matches("+cutoff"))),
        None => (name, None),
    };
    let policy =
        AnyPolicy::from_config(&PolicyConfig::parse(base).unwrap(), Capacity::objects(100), &[], 7)
            .unwrap();
    match mode {
        None => policy,
        Some(mode) => {
            let mut config = CasConfig::new(CacheMode::parse(mode).unwrap());
            config.seq_cutoff = match name.ends_with("+cutoff]") {
                true => SeqCutoffPolicy::Always,
                false => SeqCutoffPolicy::Never,
            };
            config.seq_threshold_bytes = 8192;
            policy.in_mode(config)
        }
    }
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
    let modes = ["lru[wt]", "lru[wa]", "lru[wi]", "arc[wt]", "s3fifo[wa]"];
    // Every registered single-tier policy that says its hits are quiet: the contract is
    // checked wherever it is claimed (and the classic ones must claim it), with two variants
    // of the set-associative policy beside its defaults.
    let names: Vec<&str> =
        PolicyConfig::NAMES.iter().copied().filter(|name| policy(name).quiet_hits()).collect();
    for name in ["fifo", "lru", "clock", "lfu", "arc", "s3fifo", "log", "setassoc"] {
        assert!(names.contains(&name), "{name} has quiet hits");
    }
    let variants = ["setassoc:ways=4", "setassoc:order=fifo"];
    let names = names.into_iter().chain(variants);
    // Each also told of hits once an epoch (`tiercache_policy::told`), which keeps them quiet.
    let told = |name: &str| policy(name).told(HitRule::Epochs { divisor: 4 });
    let cases = names.into_iter().chain(modes).flat_map(|n| [(n, false), (n, true)]);
    for (name, epochs) in cases {
        let make = |name| if epochs { told(name) } else { policy(name) };
        let (mut plain, mut quiet) = (make(name), make(name));
        assert!(quiet.quiet_hits(), "{name}");
        assert_eq!(quiet.hit_tag().is_some(), epochs && !quiet.counts_hits(), "{name}");
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
    // The hit rule leaves them told of every hit.
    assert_eq!(policy("lfru").told(HitRule::Epochs { divisor: 4 }).hit_tag(), None);
    let lru = PolicyConfig::Lru;
    let caps = [Capacity::objects(10), Capacity::objects(20)];
    assert!(!AnyPolicy::dram_first(&lru, &lru, caps, &[], 0).unwrap().quiet_hits());
    // Open CAS modes: pass-through never hits, dirty modes clean on time, and sequential
    // cutoff follows every request.
    for name in ["lru[pt]", "lru[wb]", "lru[wo]", "lru[wt+cutoff]", "lfru[wt]"] {
        assert!(!policy(name).quiet_hits(), "{name}");
    }
}

/// Why sequential cutoff cannot have quiet hits: with it, a hit told as a lookup later, out of
/// its place in a run, changes what a later request decides.
#[test]
fn sequential_cutoff_sees_hits_told_late() {
    let (mut now, mut late) = (policy("lru[wt+cutoff]"), policy("lru[wt+cutoff]"));
    let mut d = Decision::new();
    // Key 10 is resident; then a run 7, 8, 9, 10 (a hit), 11, 12 of 4 KiB blocks, whose run
    // passes the 8 KiB cutoff at 9.
    for p in [&mut now, &mut late] {
        d.clear();
        p.decide(&Request::new(0, 10, 4096, Op::Read), &mut d);
    }
    let run = |p: &mut AnyPolicy, keys: &[u64]| {
        let mut inserted = Vec::new();
        for &key in keys {
            let mut d = Decision::new();
            p.decide(&Request::new(0, key, 4096, Op::Read), &mut d);
            inserted.extend(
                d.actions.iter().filter(|a| matches!(a, Action::Insert { .. })).map(|a| a.key()),
            );
        }
        inserted
    };
    let told_now = run(&mut now, &[7, 8, 9, 10, 11, 12]);
    let told_late = run(&mut late, &[7, 8, 9, 11, 12]);
    assert_ne!(told_now, told_late, "the run broken by a missing hit inserts what it would not");
}
