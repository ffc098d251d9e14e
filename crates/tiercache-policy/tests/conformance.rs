//! Every registered policy, with and without admission filters, in both capacity units, on
//! random streams of reads, writes and deletes: the conformance shadow must accept every
//! decision (capacity never exceeded, hits only on resident keys, accounting exact). And
//! Belady's MIN never misses more than any other policy on the same stream and capacity.

use proptest::prelude::*;
use tiercache_core::{annotate_next_access, Capacity, Op, Request, Unit};
use tiercache_policy::conformance::{check_stream, check_stream_with};
use tiercache_policy::{AdmissionConfig, AnyPolicy, PolicyConfig};

fn stream(keys: u64, max_size: u32, with_deletes: bool) -> impl Strategy<Value = Vec<Request>> {
    let op = if with_deletes {
        prop_oneof![5 => Just(Op::Read), 3 => Just(Op::Write), 1 => Just(Op::Delete), 1 => Just(Op::Lookup)]
            .boxed()
    } else {
        prop_oneof![3 => Just(Op::Read), 1 => Just(Op::Write)].boxed()
    };
    // Keys skewed toward small numbers so there are hits; sizes depend on the key mostly, but
    // sometimes change, to exercise resizing hits.
    let request = (0..keys, 0..keys, op, 0u32..8, 0u64..400_000);
    prop::collection::vec(request, 1..600).prop_map(move |raw| {
        let mut time = 0;
        raw.into_iter()
            .map(|(a, b, op, jitter, dt)| {
                let key = a.min(b);
                let size = if jitter == 0 {
                    1 + (key as u32 * 7919) % max_size
                } else {
                    1 + (key as u32 * 104_729) % max_size
                };
                time += dt;
                let mut r = Request::new(time, key, size, op);
                r.size = size;
                r
            })
            .collect()
    })
}

/// Every registered single-tier policy, each with its defaults and the variants its file
/// names (`Registered::VARIANTS`): no list kept here.
fn all_policies() -> Vec<PolicyConfig> {
    PolicyConfig::registered().into_iter().filter(|c| !c.is_two_tier()).collect()
}

/// Whether `config` runs over `capacity`. A policy may refuse a capacity in bytes (the
/// set-associative policy counts objects, one to a way), never one in objects.
fn runs_over(config: &PolicyConfig, capacity: Capacity) -> bool {
    let refused = |capacity| AnyPolicy::from_config(config, capacity, &[], 0).err();
    match refused(capacity) {
        None => true,
        Some(e) => {
            let objects = Capacity::objects(capacity.amount);
            assert!(capacity.unit == Unit::Bytes, "{} refuses {capacity}: {e}", config.name());
            assert!(refused(objects).is_none(), "{} refuses {objects}: {e}", config.name());
            false
        }
    }
}

fn admissions() -> Vec<Vec<AdmissionConfig>> {
    ["always", "prob:0.5", "second-hit:8", "size:300+second-hit", "second-hit-over:200:8"]
        .iter()
        .map(|s| AdmissionConfig::parse_chain(s).unwrap())
        .collect()
}

/// A lookup that misses is invisible: removing the missed lookups from a stream leaves every
/// other decision unchanged. LFRU is the exception by design: its sweep is due at a time and
/// runs on the first request at or after it, whatever that request is, so a missed lookup can
/// carry a sweep that would otherwise run one request later.
fn decisions(
    config: &PolicyConfig,
    capacity: Capacity,
    reqs: &[Request],
) -> Vec<tiercache_core::Decision> {
    use tiercache_policy::Policy;
    let mut policy = AnyPolicy::from_config(config, capacity, &[], 5).unwrap();
    reqs.iter()
        .map(|r| {
            let mut d = tiercache_core::Decision::new();
            policy.decide(r, &mut d);
            d
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_policy_conforms(
        reqs in stream(60, 500, true),
        amount in 1u64..40,
        bytes in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut reqs = reqs;
        annotate_next_access(&mut reqs);
        let capacity = if bytes { Capacity::bytes(amount * 100) } else { Capacity::objects(amount) };
        for config in PolicyConfig::registered() {
            if config.is_two_tier() {
                // DRAM and NVRAM, in pages.
                let caps = [Capacity::objects(amount), Capacity::objects(amount + 3)];
                let mut policy = match &config {
                    PolicyConfig::Hibachi(c) => AnyPolicy::hibachi(c, caps).unwrap(),
                    _ => AnyPolicy::hybrid_arc(caps).unwrap(),
                };
                let result = check_stream(&mut policy, &reqs);
                prop_assert!(result.is_ok(), "{} at {amount}+{}: {}", config.name(), amount + 3,
                    result.unwrap_err());
                continue;
            }
            if !runs_over(&config, capacity) {
                continue;
            }
            for admission in admissions() {
                let mut policy = AnyPolicy::from_config(&config, capacity, &admission, seed).unwrap();
                let result = check_stream(&mut policy, &reqs);
                prop_assert!(result.is_ok(), "{} at {capacity} (seed {seed}): {}",
                    config.name(), result.unwrap_err());
            }
        }
    }

    #[test]
    fn every_dram_first_hierarchy_conforms(
        reqs in stream(60, 500, true),
        upper in 1u64..12,
        lower in 1u64..24,
        bytes in any::<bool>(),
    ) {
        let cap = |n: u64| if bytes { Capacity::bytes(n * 100) } else { Capacity::objects(n) };
        let online: Vec<PolicyConfig> = all_policies()
            .into_iter()
            .filter(|p| !p.needs_future() && runs_over(p, cap(1)))
            .collect();
        let placements = ["dram-first", "scm-first:2", "scm-first:6", "bidirectional:4"];
        for placement in placements.map(|p| tiercache_policy::Placement::parse(p).unwrap()) {
            for up in &online {
                for low in &online {
                    let caps = [cap(upper), cap(lower)];
                    let mut policy = AnyPolicy::hybrid(placement, up, low, caps, &[], 3).unwrap();
                    let result = check_stream(&mut policy, &reqs);
                    prop_assert!(result.is_ok(), "{placement:?} {} > {}: {}", up.name(), low.name(), result.unwrap_err());
                }
            }
        }
    }

    #[test]
    fn hierarchies_of_three_and_four_tiers_conform(
        reqs in stream(80, 500, true),
        sizes in proptest::collection::vec(1u64..12, 3..=4),
        bytes in any::<bool>(),
        in_wb_mode in any::<bool>(),
    ) {
        let cap = |n: u64| if bytes { Capacity::bytes(n * 100) } else { Capacity::objects(n) };
        let online: Vec<PolicyConfig> = all_policies()
            .into_iter()
            .filter(|p| !p.needs_future() && runs_over(p, cap(1)))
            .collect();
        let placements = ["dram-first", "scm-first:2", "bidirectional:4"];
        for placement in placements.map(|p| tiercache_policy::Placement::parse(p).unwrap()) {
            for (i, config) in online.iter().enumerate() {
                // Each tier a different policy, rotating through them all.
                let tiers: Vec<(PolicyConfig, Capacity)> = sizes
                    .iter()
                    .enumerate()
                    .map(|(t, n)| (online[(i + t) % online.len()].clone(), cap(*n)))
                    .collect();
                let mut policy = AnyPolicy::hierarchy(placement, &tiers, &[], 5).unwrap();
                if in_wb_mode {
                    use tiercache_policy::cas::{CacheMode, CasConfig};
                    policy = policy.in_mode(CasConfig::new(CacheMode::WriteBack));
                }
                prop_assert_eq!(tiercache_policy::Policy::tier_count(&policy), sizes.len());
                let result = check_stream(&mut policy, &reqs);
                prop_assert!(result.is_ok(), "{placement:?} from {}: {}", config.name(), result.unwrap_err());
            }
        }
    }

    #[test]
    fn every_open_cas_mode_conforms_and_never_drops_dirty_data(
        reqs in stream(40, 300, true),
        amount in 1u64..16,
        nhit in any::<bool>(),
        cutoff in any::<bool>(),
    ) {
        use tiercache_policy::cas::{Cas, CasConfig, CacheMode, NhitConfig, SeqCutoffPolicy};
        let cap = Capacity::objects(amount);
        for mode in CacheMode::ALL {
            for inner in ["lru", "s3fifo", "arc", "lfru:sweep_interval_us=100000,window_us=50000"] {
                let config = PolicyConfig::parse(inner).unwrap();
                let policy = AnyPolicy::from_config(&config, cap, &[], 1).unwrap();
                let mut cas_config = CasConfig::new(mode);
                cas_config.cleaning.activity_threshold_us = 100_000;
                cas_config.cleaning.staleness_us = 200_000;
                cas_config.cleaning.wake_up_us = 50_000;
                if nhit {
                    cas_config.nhit = Some(NhitConfig { insertion_threshold: 2, ..NhitConfig::default() });
                }
                if cutoff {
                    cas_config.seq_cutoff = SeqCutoffPolicy::Always;
                    cas_config.seq_threshold_bytes = 600;
                }
                let mut cas = Cas::new(policy, cas_config);
                let result = check_stream(&mut cas, &reqs);
                prop_assert!(result.is_ok(), "{mode:?} over {inner}: {}", result.unwrap_err());
            }
            let hybrid = AnyPolicy::dram_first(&PolicyConfig::Lru, &PolicyConfig::Lru, [cap, Capacity::objects(2 * amount)], &[], 1).unwrap();
            let mut cas = Cas::new(hybrid, CasConfig::new(mode));
            let result = check_stream(&mut cas, &reqs);
            prop_assert!(result.is_ok(), "{mode:?} over dram-first: {}", result.unwrap_err());
        }
    }

    #[test]
    fn nhc_conforms_and_never_reads_dirty_data_from_backing(
        reqs in stream(40, 300, true),
        amount in 1u64..16,
        scores in proptest::collection::vec(1u64..1000, 64),
        fixed in proptest::option::of(0.0f64..1.0),
        seed in any::<u64>(),
    ) {
        use tiercache_policy::cas::{CasConfig, CacheMode};
        use tiercache_policy::nhc::NhcConfig;
        use tiercache_policy::conformance::Shadow;
        use tiercache_policy::Policy;
        let cap = Capacity::objects(amount);
        let config = NhcConfig { window: 1, fixed_load_admit: fixed, ..NhcConfig::default() };
        let inners = [
            AnyPolicy::from_config(&PolicyConfig::Lru, cap, &[], 1).unwrap()
                .in_mode(CasConfig::new(CacheMode::WriteBack)),
            AnyPolicy::from_config(&PolicyConfig::S3fifo(Default::default()), cap, &[], 1).unwrap(),
            AnyPolicy::dram_first(&PolicyConfig::Lru, &PolicyConfig::Lru, [cap, Capacity::objects(2 * amount)], &[], 1)
                .unwrap()
                .in_mode(CasConfig::new(CacheMode::WriteBack)),
        ];
        for inner in inners {
            let mut nhc = inner.with_nhc(config.clone(), seed);
            let mut shadow = Shadow::for_policy(&nhc);
            let mut decision = tiercache_core::Decision::new();
            for (i, req) in reqs.iter().enumerate() {
                // Every few requests an interval ends: a steady hit rate and a random score
                // walk the scheduler through classic caching, tuning and back.
                if i % 4 == 3 {
                    let ops = scores[(i / 4) % scores.len()];
                    let interval = tiercache_core::Interval {
                        seconds: 1.0, completed: ops, reads: 100, read_hits: 90,
                        mean_latency_us: 1.0, p99_latency_us: 1.0, ..Default::default()
                    };
                    nhc.observe(&interval);
                }
                decision.clear();
                nhc.decide(req, &mut decision);
                let checked = shadow.apply(req, &decision).and_then(|_| shadow.check_accounting(&nhc));
                prop_assert!(checked.is_ok(), "{} request {i} ({req:?}): {}", nhc.label(), checked.unwrap_err());
            }
        }
    }

    #[test]
    fn hibachi_conforms_and_never_drops_dirty_data(
        reqs in stream(40, 300, true),
        dram in 1u64..10,
        nvram in 1u64..10,
        seq in 2u64..6,
    ) {
        // DRAM holds clean pages only, in Hibachi and both baselines.
        let dram_clean = |shadow: &tiercache_policy::conformance::Shadow| match shadow.dirty_in(tiercache_core::TierId(0)) {
            0 => Ok(()),
            n => Err(format!("{n} dirty pages in DRAM")),
        };
        let caps = [Capacity::objects(dram), Capacity::objects(nvram)];
        let mut arc = AnyPolicy::hybrid_arc(caps).unwrap();
        let result = check_stream_with(&mut arc, &reqs, dram_clean);
        prop_assert!(result.is_ok(), "hybrid-arc {dram}+{nvram}: {}", result.unwrap_err());
        for hybrid_lru in [false, true] {
            let config = tiercache_policy::hibachi::HibachiConfig { seq_threshold: seq, hybrid_lru, ..Default::default() };
            let caps = [Capacity::objects(dram), Capacity::objects(nvram)];
            let mut policy = AnyPolicy::hibachi(&config, caps).unwrap();
            let result = check_stream_with(&mut policy, &reqs, dram_clean);
            prop_assert!(result.is_ok(), "hibachi (hybrid-lru {hybrid_lru}) {dram}+{nvram} seq {seq}: {}", result.unwrap_err());
        }
    }

    #[test]
    fn missed_lookups_change_nothing(reqs in stream(40, 300, true), amount in 1u64..20) {
        let mut reqs = reqs;
        annotate_next_access(&mut reqs);
        let capacity = Capacity::bytes(amount * 100);
        // LFRU sweeps by the time; Belady-Size's clock counts every request, as the stream's
        // next_access indices do, so a stream with requests taken out (and not annotated
        // again) sets its clock apart from them.
        let clocked = ["lfru", "belady-size"];
        for config in all_policies().into_iter().filter(|c| !clocked.contains(&c.name())) {
            if !runs_over(&config, capacity) {
                continue;
            }
            let all = decisions(&config, capacity, &reqs);
            let kept: Vec<Request> = reqs
                .iter()
                .zip(&all)
                .filter(|(r, d)| !(r.op == Op::Lookup && d.hit.is_none()))
                .map(|(r, _)| *r)
                .collect();
            let expected: Vec<_> = all
                .iter()
                .zip(&reqs)
                .filter(|(d, r)| !(r.op == Op::Lookup && d.hit.is_none()))
                .map(|(d, _)| d.clone())
                .collect();
            prop_assert_eq!(decisions(&config, capacity, &kept), expected, "{}", config.name());
        }
    }

    #[test]
    fn belady_misses_least(reqs in stream(50, 1, false), amount in 1u64..30) {
        let mut reqs = reqs;
        annotate_next_access(&mut reqs);
        let capacity = Capacity { amount, unit: Unit::Objects };
        let run = |config: &PolicyConfig| {
            let mut policy = AnyPolicy::from_config(config, capacity, &[], 1).unwrap();
            reqs.len() as u64 - check_stream(&mut policy, &reqs).unwrap()
        };
        let belady = run(&PolicyConfig::Belady);
        for config in all_policies() {
            let misses = run(&config);
            prop_assert!(belady <= misses, "belady {} > {} {}", belady, config.name(), misses);
        }
    }
}
