//! Engine equals simulator: a single-shard engine run over a block trace (CloudPhysics in its
//! 4 KiB block view) makes exactly the decisions the simulator makes on the same requests:
//! the same hit or miss on every request and the same insert, eviction and rejection counts.
//! Reads go through `read_through`, writes through `put`, the policy's clock is the trace's.

use std::path::PathBuf;
use std::sync::Arc;

use tiercache_core::{Capacity, Decision, Op, Request};
use tiercache_engine::{CacheBuilder, CachedFile, ManualClock, TierKind};
use tiercache_policy::{AdmissionConfig, AnyPolicy, HitRule, Placement, Policy, PolicyConfig};
use tiercache_workload::{TraceOptions, TraceReader};

const BLOCK: usize = 4096;

fn trace() -> Vec<Request> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/cloudPhysicsIO.vscsi.zst");
    let options = TraceOptions { block_size: Some(BLOCK as u32), ..TraceOptions::default() };
    TraceReader::open(&path, &options).unwrap().map(|r| r.unwrap()).collect()
}

fn simulated_hits(
    policy: &PolicyConfig,
    admission: &[AdmissionConfig],
    blocks: u64,
    reqs: &[Request],
) -> (Vec<bool>, u64, u64) {
    let mut policy =
        AnyPolicy::from_config(policy, Capacity::objects(blocks), admission, 0).unwrap();
    let (found, counts) = decide_all(&mut policy, reqs);
    (found.iter().map(Option::is_some).collect(), counts.inserts, counts.evictions)
}

#[derive(Default)]
struct Counts {
    inserts: u64,
    evictions: u64,
    rejections: u64,
    moves: u64,
    write_backs: u64,
}

/// Runs `reqs` through `policy`: per request the tier it found the key in (`None`: a miss),
/// and the actions counted.
fn decide_all(policy: &mut AnyPolicy, reqs: &[Request]) -> (Vec<Option<u8>>, Counts) {
    let mut decision = Decision::new();
    let mut counts = Counts::default();
    let hits = reqs
        .iter()
        .map(|r| {
            decision.clear();
            policy.decide(r, &mut decision);
            for a in &decision.actions {
                match a {
                    tiercache_core::Action::Insert { .. } => counts.inserts += 1,
                    tiercache_core::Action::Evict { .. } => counts.evictions += 1,
                    tiercache_core::Action::Reject { .. } => counts.rejections += 1,
                    tiercache_core::Action::Move { .. } => counts.moves += 1,
                    tiercache_core::Action::WriteBack { .. } => counts.write_backs += 1,
                    _ => {}
                }
            }
            decision.hit.map(|t| t.0)
        })
        .collect();
    (hits, counts)
}

/// Replays one request on the engine: reads through `read_through` (loading the key's own
/// bytes), writes through `put`. Returns whether it hit, checking a hit's bytes.
fn replay(cache: &tiercache_engine::Cache, r: &Request, buf: &mut [u8]) -> bool {
    if r.op == Op::Write {
        return cache.put(r.key, &r.key.to_le_bytes()).unwrap().hit;
    }
    let outcome = cache
        .read_through(r.key, buf, |b| {
            b[..8].copy_from_slice(&r.key.to_le_bytes());
            Ok(8)
        })
        .unwrap();
    if outcome.hit {
        assert_eq!(&buf[..8], &r.key.to_le_bytes(), "a hit returned another key's bytes");
    }
    outcome.hit
}

fn engine_hits(
    policy: &PolicyConfig,
    admission: &[AdmissionConfig],
    blocks: u64,
    tier: TierKind,
    reqs: &[Request],
) -> (Vec<bool>, tiercache_engine::StatsSnapshot) {
    engine_hits_locked_or_not(policy, admission, blocks, tier, reqs, true)
}

/// As `engine_hits`, with hits served without the shard's lock where the policy allows it
/// (`unlocked`), or every hit under the lock.
fn engine_hits_locked_or_not(
    policy: &PolicyConfig,
    admission: &[AdmissionConfig],
    blocks: u64,
    tier: TierKind,
    reqs: &[Request],
    unlocked: bool,
) -> (Vec<bool>, tiercache_engine::StatsSnapshot) {
    engine_hits_told(policy, admission, blocks, tier, reqs, (unlocked, HitRule::Exact))
}

/// As `engine_hits_locked_or_not`, the policy told of hits by `rule`.
fn engine_hits_told(
    policy: &PolicyConfig,
    admission: &[AdmissionConfig],
    blocks: u64,
    tier: TierKind,
    reqs: &[Request],
    (unlocked, rule): (bool, HitRule),
) -> (Vec<bool>, tiercache_engine::StatsSnapshot) {
    let clock = Arc::new(ManualClock::default());
    let cache = CacheBuilder::new(policy.clone())
        .hit_rule(rule)
        .unlocked_hits(unlocked)
        .admission(admission.to_vec())
        .tier(tier)
        .shards(1)
        .block_size(BLOCK)
        .capacity_bytes(blocks * BLOCK as u64)
        .seed(0)
        .clock(clock.clone())
        .without_worker()
        .build()
        .unwrap();
    let mut buf = vec![0u8; BLOCK];
    let hits = reqs
        .iter()
        .map(|r| {
            clock.set(r.time_us);
            replay(&cache, r, &mut buf)
        })
        .collect();
    (hits, cache.stats())
}

#[test]
fn engine_decides_as_the_simulator_for_every_engine_policy() {
    let reqs = trace();
    assert!(reqs.len() > 113_872, "block view expands multi-block requests");
    // Every registered policy the engine runs on one tier (the simulator alone runs those
    // that read the future), and two admission filters.
    let policies: Vec<&str> = PolicyConfig::NAMES
        .iter()
        .copied()
        .filter(|name| !PolicyConfig::parse(name).unwrap().needs_future())
        .collect();
    assert!(policies.len() >= 9, "the engine's policies are registered: {policies:?}");
    for (name, admission) in
        policies.iter().map(|p| (*p, "always")).chain([("lru", "second-hit"), ("arc", "prob:0.5")])
    {
        let config = PolicyConfig::parse(name).unwrap();
        let admission = AdmissionConfig::parse_chain(admission).unwrap();
        let blocks = 3000;
        let (sim, inserts, evictions) = simulated_hits(&config, &admission, blocks, &reqs);
        // Hits served without the lock (the policy told in batches) and hits under the lock
        // must both decide exactly as the simulator; only LFRU (periodic work) never takes
        // the unlocked path.
        for unlocked in [true, false] {
            let (engine, stats) = engine_hits_locked_or_not(
                &config,
                &admission,
                blocks,
                TierKind::Dram,
                &reqs,
                unlocked,
            );
            let first_difference = sim.iter().zip(&engine).position(|(a, b)| a != b);
            assert_eq!(
                first_difference, None,
                "{name} (unlocked hits {unlocked}): engine and simulator part at request \
                 {first_difference:?}"
            );
            assert_eq!((stats.inserts, stats.evictions), (inserts, evictions), "{name}");
            assert_eq!(stats.hits + stats.misses, stats.lookups);
            assert_eq!(stats.checksum_failures + stats.writes_dropped, 0);
            let expected = unlocked && name != "lfru";
            assert_eq!(stats.unlocked_hits > 0, expected, "{name}: {stats:?}");
        }
    }
}

/// With hits told once an epoch (`tiercache_policy::told`), a one-thread engine decides as the
/// simulator told by the same rule: hits served without the lock that the rule spares are
/// counted and never logged, those under the lock are decided without the policy, and both
/// leave the same hits, insertions and evictions. On DRAM and on a mapped tier (whose readers
/// mark a block checked in the same word that holds the hit's stamp).
#[test]
fn an_engine_told_once_an_epoch_decides_as_the_simulator_told_so() {
    let reqs = trace();
    let dir = std::env::temp_dir().join(format!("tiercache-eq-told-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let blocks = 3000;
    // Requests whose hit or miss the rule changed, against exact telling.
    let mut changed = 0;
    for (name, divisor) in [("lru", 1), ("arc", 32), ("clock", 2), ("fifo", 8)] {
        let config = PolicyConfig::parse(name).unwrap();
        let admission = [AdmissionConfig::Always];
        let rule = HitRule::Epochs { divisor };
        let stack = tiercache_policy::StackConfig {
            hit_rule: Some(rule),
            ..tiercache_policy::StackConfig::single(config.clone(), Capacity::objects(blocks))
        };
        let mut simulated = stack.build().unwrap();
        let (found, counts) = decide_all(&mut simulated, &reqs);
        let sim: Vec<bool> = found.iter().map(Option::is_some).collect();
        assert!(simulated.untold_hits() > 1000, "{name}: the rule spared only a few hits");
        let exact = simulated_hits(&config, &admission, blocks, &reqs).0;
        changed += sim.iter().zip(&exact).filter(|(a, b)| a != b).count();
        let mapped = || TierKind::Mapped { path: dir.join(format!("{name}.mem")) };
        for (tier, unlocked) in [(TierKind::Dram, true), (TierKind::Dram, false), (mapped(), true)]
        {
            let (engine, stats) =
                engine_hits_told(&config, &admission, blocks, tier, &reqs, (unlocked, rule));
            let first_difference = sim.iter().zip(&engine).position(|(a, b)| a != b);
            assert_eq!(
                first_difference, None,
                "{name} (unlocked hits {unlocked}): engine and simulator part at request \
                 {first_difference:?}"
            );
            assert_eq!((stats.inserts, stats.evictions), (counts.inserts, counts.evictions));
            assert_eq!(stats.untold_hits, simulated.untold_hits(), "{name} {unlocked}");
            assert_eq!(stats.hits + stats.misses, stats.lookups);
            assert_eq!(stats.checksum_failures + stats.writes_dropped, 0);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(changed > 0, "the rule changed no hit anywhere, so this test shows nothing");
}

/// Per request: which tier the policy found the key in (0, 1) or a miss (None).
fn simulated_tiers(
    placement: Placement,
    upper: &str,
    lower: &str,
    blocks: [u64; 2],
    reqs: &[Request],
) -> Vec<Option<u8>> {
    let (up, low) = (PolicyConfig::parse(upper).unwrap(), PolicyConfig::parse(lower).unwrap());
    let caps = [Capacity::objects(blocks[0]), Capacity::objects(blocks[1])];
    let mut policy = AnyPolicy::hybrid(placement, &up, &low, caps, &[], 0).unwrap();
    let mut decision = Decision::new();
    reqs.iter()
        .map(|r| {
            decision.clear();
            policy.decide(r, &mut decision);
            decision.hit.map(|t| t.0)
        })
        .collect()
}

#[test]
fn two_tier_engine_decides_as_the_dram_first_policy() {
    let reqs = trace();
    let dir = std::env::temp_dir().join(format!("tiercache-eq2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        ("dram-first", "lru", "lru"),
        ("dram-first", "s3fifo", "arc"),
        ("dram-first", "lru", "log"),
        ("scm-first:2", "lru", "lru"),
        ("bidirectional:4", "lru", "clock"),
    ];
    for (placement, upper, lower) in cases {
        let placement = Placement::parse(placement).unwrap();
        let blocks = [500u64, 2500];
        let sim = simulated_tiers(placement, upper, lower, blocks, &reqs);
        let cache = CacheBuilder::new(PolicyConfig::parse(upper).unwrap())
            .hit_rule(HitRule::Exact)
            .placement(placement)
            .capacity_bytes(blocks[0] * BLOCK as u64)
            .lower_tier(
                TierKind::Mapped { path: dir.join(format!("{placement:?}-{upper}-{lower}.mem")) },
                blocks[1] * BLOCK as u64,
                PolicyConfig::parse(lower).unwrap(),
            )
            .shards(1)
            .block_size(BLOCK)
            .build()
            .unwrap();
        let mut buf = vec![0u8; BLOCK];
        let mut lower_hits = 0;
        for (i, r) in reqs.iter().enumerate() {
            let before = cache.stats().lower_hits;
            let hit = replay(&cache, r, &mut buf);
            let from_lower = cache.stats().lower_hits > before;
            lower_hits += from_lower as usize;
            // Reads served from the lower tier are counted as such; writes update in place.
            let read_from_lower = hit && sim[i] == Some(1) && r.op != Op::Write;
            assert_eq!(from_lower, read_from_lower, "request {i}: tier");
            assert_eq!(hit, sim[i].is_some(), "{upper} > {lower}: request {i}");
        }
        let stats = cache.stats();
        assert!(lower_hits > 0, "{placement:?} {upper} > {lower}: {stats:?}");
        if !matches!(placement, Placement::ScmFirst { .. }) {
            assert!(stats.demotions > 0, "{placement:?}: {stats:?}");
        }
        if placement != Placement::DramFirst {
            assert!(stats.promotions > 0, "{placement:?}: {stats:?}");
        } else {
            assert_eq!(stats.promotions, 0, "DRAM-first never promotes");
        }
        assert_eq!(stats.checksum_failures, 0);
        let (used, slots) = cache.occupancy();
        assert!(used <= slots && slots == 3000);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What the simulated hierarchy of `tiers` (policy, blocks) decides on `reqs`: per request the
/// tier it found the key in, and the actions counted (inserts, evictions, moves, write-backs).
fn simulated_hierarchy(
    placement: Placement,
    tiers: &[(&str, u64)],
    mode: Option<tiercache_policy::cas::CasConfig>,
    reqs: &[Request],
) -> (Vec<Option<u8>>, [u64; 4]) {
    let tiers: Vec<(PolicyConfig, Capacity)> = tiers
        .iter()
        .map(|(policy, blocks)| (PolicyConfig::parse(policy).unwrap(), Capacity::objects(*blocks)))
        .collect();
    let mut policy = AnyPolicy::hierarchy(placement, &tiers, &[], 0).unwrap();
    if let Some(mode) = mode {
        policy = policy.in_mode(mode);
    }
    let (found, c) = decide_all(&mut policy, reqs);
    (found, [c.inserts, c.evictions, c.moves, c.write_backs])
}

/// One shard of DRAM over a mapped tier over a flash tier (files `I.mem` and `I.flash` in
/// `dir`), each tier `tiers[t]`'s policy and blocks, under `placement`.
fn three_tiers(
    tiers: &[(&str, u64); 3],
    placement: Placement,
    dir: &std::path::Path,
    i: usize,
) -> CacheBuilder {
    let policy = |t: usize| PolicyConfig::parse(tiers[t].0).unwrap();
    let bytes = |t: usize| tiers[t].1 * BLOCK as u64;
    CacheBuilder::new(policy(0))
        .hit_rule(HitRule::Exact)
        .placement(placement)
        .capacity_bytes(bytes(0))
        .lower_tier(TierKind::Mapped { path: dir.join(format!("{i}.mem")) }, bytes(1), policy(1))
        .add_tier(TierKind::Flash { path: dir.join(format!("{i}.flash")) }, bytes(2), policy(2))
        .shards(1)
        .block_size(BLOCK)
}

/// Three tiers, DRAM over a mapped tier over a flash tier, in one engine: every request hits
/// or misses as the simulated hierarchy of the same three tiers decides, reads found below
/// DRAM are counted as such, and the blocks inserted, evicted and moved between tiers are the
/// simulator's, for DRAM-first and SCM-first placement.
#[test]
fn three_tier_engine_decides_as_the_simulated_hierarchy() {
    let reqs: Vec<Request> = trace().into_iter().take(150_000).collect();
    let dir = std::env::temp_dir().join(format!("tiercache-eq3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tiers = [("lru", 300u64), ("s3fifo", 800), ("lru", 2000)];
    for (i, placement) in ["dram-first", "scm-first:2", "bidirectional:4"].iter().enumerate() {
        let placement = Placement::parse(placement).unwrap();
        let (sim, want) = simulated_hierarchy(placement, &tiers, None, &reqs);
        let cache = three_tiers(&tiers, placement, &dir, i).build().unwrap();
        let mut buf = vec![0u8; BLOCK];
        for (n, r) in reqs.iter().enumerate() {
            let before = cache.stats().tier_hits;
            let hit = replay(&cache, r, &mut buf);
            assert_eq!(hit, sim[n].is_some(), "{placement:?}: request {n}");
            // A read hit is counted in the tier the simulator found the key in.
            let after = cache.stats().tier_hits;
            let counted = (0..3).find(|&t| after[t] > before[t]).map(|t| t as u8);
            let read_in = sim[n].filter(|_| r.op != Op::Write);
            assert_eq!(counted, read_in, "{placement:?}: request {n}: tier");
        }
        let s = cache.stats();
        let got = [s.inserts, s.evictions, s.promotions + s.demotions];
        assert_eq!(
            got,
            want[..3],
            "{placement:?}: (inserts, evictions, moves) against the simulator's"
        );
        let from_flash = sim.iter().filter(|t| **t == Some(2)).count();
        assert!(from_flash > 0 && s.tier_hits[2] > 0, "{placement:?}: the third tier is used");
        assert_eq!(s.tier_hits.iter().sum::<u64>(), s.hits, "{placement:?}");
        assert_eq!((s.checksum_failures, s.io_errors), (0, 0), "{placement:?}");
        let (used, slots) = cache.occupancy();
        assert!(used <= slots && slots == 3100, "{used} of {slots}");
        drop(cache);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mapped_and_file_tiers_decide_the_same() {
    let reqs: Vec<Request> = trace().into_iter().take(40_000).collect();
    let dir = std::env::temp_dir().join(format!("tiercache-eq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = PolicyConfig::parse("s3fifo").unwrap();
    let (sim, _, _) = simulated_hits(&config, &[], 1000, &reqs);
    for tier in [
        TierKind::Mapped { path: dir.join("slow.mem") },
        TierKind::File { path: dir.join("flash.img") },
    ] {
        let (engine, stats) = engine_hits(&config, &[], 1000, tier.clone(), &reqs);
        assert_eq!(sim, engine, "{tier:?}");
        assert_eq!(stats.checksum_failures, 0);
        let mapped = matches!(tier, TierKind::Mapped { .. });
        assert_eq!(stats.unlocked_hits > 0, mapped, "{tier:?}: {stats:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `CachedFile` in each Open CAS mode the engine runs, and with NHIT promotion, makes the
/// simulator's decisions for that mode (both run `tiercache_policy::cas`): the same read hits,
/// insertions and invalidations over the same block requests.
#[test]
fn cached_file_modes_decide_as_the_simulated_cache_modes() {
    use tiercache_policy::cas::{CacheMode, CasConfig, NhitConfig, SeqCutoffPolicy};
    let reqs: Vec<Request> = trace().into_iter().take(150_000).collect();
    let dir = std::env::temp_dir().join(format!("tiercache-eq-modes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let blocks = 2000u64;
    let modes = [
        (CacheMode::WriteThrough, false),
        (CacheMode::WriteThrough, true),
        (CacheMode::WriteAround, false),
        (CacheMode::WriteInvalidate, true),
        (CacheMode::PassThrough, false),
    ];
    for (sim_mode, nhit) in modes {
        // LRU in the cache mode, no sequential cutoff (the engine has none).
        let mut config = CasConfig::new(sim_mode);
        config.seq_cutoff = SeqCutoffPolicy::Never;
        config.nhit = nhit.then(|| NhitConfig { trigger_fill: 0.5, ..NhitConfig::default() });
        let lru =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(blocks), &[], 0).unwrap();
        let mut sim = lru.in_mode(config.clone());
        let (mut read_hits, mut inserts, mut invalidations) = (0u64, 0u64, 0u64);
        let mut decision = Decision::new();
        for r in &reqs {
            decision.clear();
            sim.decide(r, &mut decision);
            read_hits += (r.op != Op::Write && decision.hit.is_some()) as u64;
            for a in &decision.actions {
                match a {
                    tiercache_core::Action::Insert { .. } => inserts += 1,
                    tiercache_core::Action::Invalidate { .. } => invalidations += 1,
                    _ => {}
                }
            }
        }
        // The engine's side: the same requests as block reads and writes of a (sparse) file.
        let path = dir.join(format!("{sim_mode:?}-{nhit}.img"));
        std::fs::File::create(&path).unwrap().set_len(32 << 30).unwrap();
        let cache = CacheBuilder::new(PolicyConfig::Lru)
            .hit_rule(HitRule::Exact)
            .shards(1)
            .block_size(BLOCK)
            .capacity_bytes(blocks * BLOCK as u64)
            .without_worker()
            .mode(config)
            .build()
            .unwrap();
        let file = CachedFile::open(&path, cache).unwrap();
        replay_requests(&file, &reqs, None);
        let stats = file.cache().stats();
        match sim_mode {
            CacheMode::PassThrough => assert_eq!(read_hits + inserts, 0),
            CacheMode::WriteInvalidate => assert!(read_hits > 0 && invalidations > 0),
            _ => assert!(read_hits > 0 && inserts > 0),
        }
        assert_eq!(
            (stats.hits, stats.inserts, stats.invalidations),
            (read_hits, inserts, invalidations),
            "{sim_mode:?}, NHIT {nhit}: engine (hits, inserts, invalidations) against the \
             simulator's"
        );
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn engine_decides_as_the_simulator_behind_nvcache_admission() {
    use tiercache_policy::nvcache::NvcacheConfig;
    let reqs = trace();
    let blocks = 3000;
    for spec in
        ["obp:0.1", "obp:0.05,window=20000", "no-write-allocate", "obp:0.1,small-bypass=40MiB"]
    {
        let config = NvcacheConfig::parse(spec).unwrap();
        let mut policy =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(blocks), &[], 0)
                .unwrap()
                .with_nvcache(config.clone());
        let (found, counts) = decide_all(&mut policy, &reqs);
        let sim: Vec<bool> = found.iter().map(Option::is_some).collect();
        let (inserts, rejected) = (counts.inserts, counts.rejections);
        let clock = Arc::new(ManualClock::default());
        let cache = CacheBuilder::new(PolicyConfig::Lru)
            .hit_rule(HitRule::Exact)
            .nvcache(config)
            .shards(1)
            .block_size(BLOCK)
            .capacity_bytes(blocks * BLOCK as u64)
            .clock(clock.clone())
            .without_worker()
            .build()
            .unwrap();
        let mut buf = vec![0u8; BLOCK];
        let engine: Vec<bool> = reqs
            .iter()
            .map(|r| {
                clock.set(r.time_us);
                replay(&cache, r, &mut buf)
            })
            .collect();
        let first_difference = sim.iter().zip(&engine).position(|(a, b)| a != b);
        assert_eq!(first_difference, None, "{spec}: engine and simulator part");
        let stats = cache.stats();
        assert_eq!(stats.inserts, inserts, "{spec}");
        // The baseline admits every read miss; OBP and small-bypass refuse some.
        assert_eq!(rejected > 0, spec.starts_with("obp"), "{spec}: {rejected} refused");
    }
}

/// The caches that keep dirty blocks: `CachedFile` in write-back and write-only over a mapped
/// tier, and Hibachi, its Hybrid-LRU baseline and Hybrid-ARC over DRAM and a mapped tier, make
/// the simulator's decisions on the same block requests, the engine's clock set to each
/// request's time (the ALRU cleaner's schedule): the same read hits, inserts, evictions, moves
/// between tiers and write-backs.
#[test]
fn dirty_caches_decide_as_the_simulator() {
    use tiercache_policy::cas::{CacheMode, CasConfig, SeqCutoffPolicy};
    use tiercache_policy::hibachi::HibachiConfig;
    let reqs: Vec<Request> = trace().into_iter().take(150_000).collect();
    let dir = std::env::temp_dir().join(format!("tiercache-eq-dirty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let in_mode = |mode| CasConfig { seq_cutoff: SeqCutoffPolicy::Never, ..CasConfig::new(mode) };
    let hybrid_lru = HibachiConfig { hybrid_lru: true, ..HibachiConfig::default() };
    // (name, policy, Open CAS mode, DRAM blocks (0: none), mapped blocks)
    let cases = [
        ("wb", PolicyConfig::Lru, Some(in_mode(CacheMode::WriteBack)), 0u64, 2000u64),
        ("wo", PolicyConfig::Lru, Some(in_mode(CacheMode::WriteOnly)), 0, 2000),
        ("hibachi", PolicyConfig::Hibachi(HibachiConfig::default()), None, 500, 1500),
        ("hybrid-lru", PolicyConfig::Hibachi(hybrid_lru), None, 500, 1500),
        ("hybrid-arc", PolicyConfig::HybridArc, None, 500, 1500),
    ];
    for (name, policy, mode, dram, mapped) in cases {
        let mut sim = match (&policy, dram) {
            (PolicyConfig::Hibachi(config), _) => {
                let caps = [Capacity::objects(dram), Capacity::objects(mapped)];
                AnyPolicy::hibachi(config, caps).unwrap()
            }
            (PolicyConfig::HybridArc, _) => {
                AnyPolicy::hybrid_arc([Capacity::objects(dram), Capacity::objects(mapped)]).unwrap()
            }
            _ => AnyPolicy::from_config(&policy, Capacity::objects(mapped), &[], 0)
                .unwrap()
                .in_mode(mode.clone().unwrap()),
        };
        let mut want = [0u64; 5];
        let mut decision = Decision::new();
        for r in &reqs {
            decision.clear();
            sim.decide(r, &mut decision);
            want[0] += (r.op != Op::Write && decision.hit.is_some()) as u64;
            for a in &decision.actions {
                match a {
                    tiercache_core::Action::Insert { .. } => want[1] += 1,
                    tiercache_core::Action::Evict { .. } => want[2] += 1,
                    tiercache_core::Action::Move { .. } => want[3] += 1,
                    tiercache_core::Action::WriteBack { .. } => want[4] += 1,
                    _ => {}
                }
            }
        }
        let path = dir.join(format!("{name}.img"));
        std::fs::File::create(&path).unwrap().set_len(32 << 30).unwrap();
        let tier = TierKind::Mapped { path: dir.join(format!("{name}.mem")) };
        let clock = Arc::new(ManualClock::default());
        let mut builder = CacheBuilder::new(policy)
            .hit_rule(HitRule::Exact)
            .shards(1)
            .block_size(BLOCK)
            .clock(clock.clone())
            .without_worker();
        builder = match dram {
            0 => builder.tier(tier).capacity_bytes(mapped * BLOCK as u64),
            _ => builder.capacity_bytes(dram * BLOCK as u64).lower_tier(
                tier,
                mapped * BLOCK as u64,
                PolicyConfig::Lru,
            ),
        };
        if let Some(mode) = mode {
            builder = builder.mode(mode);
        }
        let file = replay_file(&path, builder, &clock, &reqs);
        let s = file.cache().stats();
        let got = [s.hits, s.inserts, s.evictions, s.promotions + s.demotions, s.write_backs];
        assert!(want[0] > 0 && want[4] > 0, "{name}: {want:?}");
        assert_eq!(
            got, want,
            "{name}: engine (read hits, inserts, evictions, moves, write-backs) against the \
             simulator's"
        );
        assert_eq!((s.dirty_lost, s.write_back_errors, s.checksum_failures), (0, 0, 0), "{name}");
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Three tiers in write-back, DRAM over a mapped tier over a flash tier, behind a
/// `CachedFile`: the engine's read hits, inserts, evictions, moves and write-backs are the
/// simulated hierarchy's in the same Open CAS mode, and nothing dirty is lost: DRAM-first,
/// SCM-first and bidirectional placement.
#[test]
fn three_tier_write_back_decides_as_the_simulator() {
    use tiercache_policy::cas::{CacheMode, CasConfig, SeqCutoffPolicy};
    let reqs: Vec<Request> = trace().into_iter().take(150_000).collect();
    let dir = std::env::temp_dir().join(format!("tiercache-eq3wb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mode =
        CasConfig { seq_cutoff: SeqCutoffPolicy::Never, ..CasConfig::new(CacheMode::WriteBack) };
    let tiers = [("lru", 300u64), ("lru", 800), ("arc", 2000)];
    // With placements that move blocks up, write-back over two persistent tiers needs the
    // backing device given to the builder (`replay_file` does): see `crash.rs`.
    for (i, placement) in ["dram-first", "scm-first:2", "bidirectional:4"].iter().enumerate() {
        let placement = Placement::parse(placement).unwrap();
        let (sim, want) = simulated_hierarchy(placement, &tiers, Some(mode.clone()), &reqs);
        let read_hits =
            reqs.iter().zip(&sim).filter(|(r, t)| r.op != Op::Write && t.is_some()).count();
        let clock = Arc::new(ManualClock::default());
        let builder = three_tiers(&tiers, placement, &dir, i)
            .mode(mode.clone())
            .clock(clock.clone())
            .without_worker();
        let path = dir.join(format!("{i}.img"));
        std::fs::File::create(&path).unwrap().set_len(32 << 30).unwrap();
        let file = replay_file(&path, builder, &clock, &reqs);
        let s = file.cache().stats();
        let got = [s.inserts, s.evictions, s.promotions + s.demotions, s.write_backs];
        assert!(want[3] > 0 && want[2] > 0, "{placement:?}: {want:?}");
        assert_eq!(s.hits, read_hits as u64, "{placement:?}: read hits");
        assert_eq!(
            got, want,
            "{placement:?}: engine (inserts, evictions, moves, write-backs) against the simulator's"
        );
        assert_eq!((s.dirty_lost, s.write_back_errors, s.checksum_failures), (0, 0, 0));
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `reqs` through a `CachedFile` over the cache `builder` makes and the backing file at `path`
/// (its syncs skipped, see `Unsynced`; given to the builder too), on the trace's clock: writes
/// write the key's bytes, reads read.
fn replay_file(
    path: &std::path::Path,
    builder: CacheBuilder,
    clock: &ManualClock,
    reqs: &[Request],
) -> CachedFile {
    let backing = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let backing = Arc::new(Unsynced(tiercache_engine::device::FileDevice::new(backing, path)));
    let cache = builder.backing_device(backing.clone()).build().unwrap();
    let file = CachedFile::over(backing, cache);
    replay_requests(&file, reqs, Some(clock));
    file
}

/// `reqs` as block writes (of the key's bytes) and reads of `file`, on the trace's clock if
/// one is given.
fn replay_requests(file: &CachedFile, reqs: &[Request], clock: Option<&ManualClock>) {
    let mut buf = vec![0u8; BLOCK];
    for r in reqs {
        if let Some(clock) = clock {
            clock.set(r.time_us);
        }
        let at = r.key * BLOCK as u64;
        match r.op {
            Op::Write => {
                file.write_at(at, &r.key.to_le_bytes().repeat(BLOCK / 8)).unwrap();
            }
            _ => {
                file.read_at(at, &mut buf).unwrap();
            }
        }
    }
}

/// A backing file whose syncs do nothing: decisions never depend on them, and tens of
/// thousands of write-backs each followed by an `fdatasync` would make the test a disk test.
struct Unsynced(tiercache_engine::device::FileDevice);

impl tiercache_engine::device::Device for Unsynced {
    fn path(&self) -> &std::path::Path {
        self.0.path()
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
        self.0.read_at(buf, at)
    }

    fn write_at(&self, data: &[u8], at: u64) -> std::io::Result<()> {
        self.0.write_at(data, at)
    }

    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
}

/// A sharded engine decides as the simulator's model of it (`StackConfig::shards`): the same
/// keys in each shard, each shard's share of the capacity, each shard's own OBP ratio. A
/// simulator running one stack over the whole cache would not (checked below).
#[test]
fn a_sharded_engine_decides_as_the_sharded_model() {
    use tiercache_policy::{StackConfig, StackSpec};
    let reqs = trace();
    let (shards, blocks) = (8usize, 3000u64);
    for (name, nvcache) in [("lru", None), ("s3fifo", None), ("lru", Some("obp:0.1"))] {
        let config = PolicyConfig::parse(name).unwrap();
        let mut builder = CacheBuilder::new(config.clone())
            .hit_rule(HitRule::Exact)
            .tier(TierKind::Dram)
            .shards(shards)
            .block_size(BLOCK)
            .capacity_bytes(blocks * BLOCK as u64)
            .seed(3)
            .without_worker();
        if let Some(text) = nvcache {
            builder =
                builder.nvcache(tiercache_policy::nvcache::NvcacheConfig::parse(text).unwrap());
        }
        let cache = builder.build().unwrap();
        let mut buf = vec![0u8; BLOCK];
        let engine: Vec<bool> = reqs.iter().map(|r| replay(&cache, r, &mut buf)).collect();
        let model = |shards: Option<usize>| {
            let mut spec = StackSpec::new(name, tiercache_policy::stack::Amount::Count(blocks));
            spec.unit = "objects".into();
            spec.nvcache = nvcache.map(str::to_string);
            spec.seed = 3;
            spec.shards = shards;
            let mut policy = StackConfig::try_from(spec).unwrap().build().unwrap();
            decide_all(&mut policy, &reqs).0.iter().map(Option::is_some).collect::<Vec<bool>>()
        };
        let sharded = model(Some(shards));
        let first_difference = sharded.iter().zip(&engine).position(|(a, b)| a != b);
        assert_eq!(first_difference, None, "{name} {nvcache:?}: parts at {first_difference:?}");
        assert_ne!(model(None), engine, "{name}: one stack over the cache decides otherwise");
    }
}

/// A flash tier run by the set-associative policy keeps its blocks where the policy places
/// them, outside the shard's map (`docs/DURABILITY.md`): alone and under DRAM, with writes
/// staged behind the callers or not, it decides as the simulator's policy of the same
/// capacity (the spare slots the engine adds change no decision), and every hit returns its
/// key's bytes.
#[test]
fn a_set_associative_flash_tier_decides_as_the_simulator() {
    let reqs: Vec<Request> = trace().into_iter().take(60_000).collect();
    let dir = std::env::temp_dir().join(format!("tiercache-eq-sa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = PolicyConfig::parse("setassoc:ways=8").unwrap();
    // 1,000 slots: 100 sets of 8 ways and 2 spare slots, so the policy keeps 800 blocks.
    let (sim, _, _) = simulated_hits(&config, &[], 800, &reqs);
    for writers in [0, 2] {
        let path = dir.join(format!("alone-{writers}.flash"));
        let cache = CacheBuilder::new(config.clone())
            .hit_rule(HitRule::Exact)
            .tier(TierKind::Flash { path })
            .shards(1)
            .block_size(BLOCK)
            .capacity_bytes(1000 * BLOCK as u64)
            .write_behind(writers)
            .without_worker()
            .build()
            .unwrap();
        let mut buf = vec![0u8; BLOCK];
        let engine: Vec<bool> = reqs.iter().map(|r| replay(&cache, r, &mut buf)).collect();
        let first_difference = sim.iter().zip(&engine).position(|(a, b)| a != b);
        assert_eq!(first_difference, None, "writers {writers}");
        let stats = cache.stats();
        assert_eq!(stats.checksum_failures, 0, "{stats:?}");
        assert!(stats.evictions > 1000, "{stats:?}");
        let (used, slots) = cache.occupancy();
        assert!(used <= 800 && slots == 800, "{used} of {slots}");
    }
    for placement in ["dram-first", "scm-first:2"] {
        let placement = Placement::parse(placement).unwrap();
        let sim = simulated_tiers(placement, "lru", "setassoc:ways=8", [300, 800], &reqs);
        let cache = CacheBuilder::new(PolicyConfig::Lru)
            .hit_rule(HitRule::Exact)
            .placement(placement)
            .capacity_bytes(300 * BLOCK as u64)
            .lower_tier(
                TierKind::Flash { path: dir.join(format!("{placement:?}.flash")) },
                1000 * BLOCK as u64,
                config.clone(),
            )
            .shards(1)
            .block_size(BLOCK)
            .build()
            .unwrap();
        let mut buf = vec![0u8; BLOCK];
        for (i, r) in reqs.iter().enumerate() {
            let hit = replay(&cache, r, &mut buf);
            assert_eq!(
                hit,
                sim[i].is_some(),
                "{placement:?}: request {i} {r:?}: {:?}",
                cache.stats()
            );
        }
        let stats = cache.stats();
        assert!(stats.lower_hits > 0 && stats.demotions > 0, "{placement:?}: {stats:?}");
        assert_eq!(stats.checksum_failures, 0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// ACP-like cleaning (`cleaning = "acp:..."`, periodic work every `tick_us`): the simulator
/// ticks the policy at every tick time its trace passes, the engine at the same times on its
/// clock, and both write back the same blocks, evict and hit the same; the engine writes each
/// tick's chunk in device order. Without ticks (no `tick_us`), ACP writes nothing back on its
/// own: only evictions do.
#[test]
fn acp_cleaning_decides_as_the_simulator() {
    use tiercache_policy::stack::Amount;
    use tiercache_policy::{StackConfig, StackSpec};
    let reqs: Vec<Request> = trace().into_iter().take(150_000).collect();
    let span = reqs.last().unwrap().time_us - reqs[0].time_us;
    let tick_us = (span / 500).max(1);
    let dir = std::env::temp_dir().join(format!("tiercache-eq-acp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let blocks = 2000u64;
    let mut spec = StackSpec::new("lru", Amount::Count(blocks));
    spec.unit = "objects".into();
    spec.mode = Some("wb".into());
    spec.seq_cutoff = "never".into();
    spec.cleaning = format!(
        "acp:high_watermark=0.3,low_watermark=0.1,flush_max_buffers=64,wake_up_us={tick_us}"
    );
    let mut counts = Vec::new();
    for ticking in [true, false] {
        spec.tick_us = ticking.then_some(tick_us);
        let stack = StackConfig::try_from(spec.clone()).unwrap();
        let options = tiercache_sim::RunOptions::new(stack.clone());
        let sim = tiercache_sim::simulate_slice(&options, &reqs).unwrap().counters;
        let path = dir.join(format!("acp-{ticking}.img"));
        std::fs::File::create(&path).unwrap().set_len(32 << 30).unwrap();
        let clock = Arc::new(ManualClock::default());
        let tier = TierKind::Mapped { path: dir.join(format!("acp-{ticking}.mem")) };
        let builder = CacheBuilder::new(PolicyConfig::Lru)
            .hit_rule(HitRule::Exact)
            .tier(tier)
            .capacity_bytes(blocks * BLOCK as u64)
            .mode(stack.mode.clone().unwrap())
            .shards(1)
            .block_size(BLOCK)
            .clock(clock.clone())
            .without_worker();
        let backing = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let device = unsynced(backing, &path);
        let cache = builder.backing_device(device.clone()).build().unwrap();
        let file = CachedFile::over(device, cache);
        let mut ticks = tiercache_sim::run::Ticks::new(spec.tick_us);
        let mut buf = vec![0u8; BLOCK];
        for r in &reqs {
            while let Some(at) = ticks.next_due(r.time_us) {
                clock.set(at);
                file.cache().tick();
            }
            clock.set(r.time_us);
            let offset = r.key * BLOCK as u64;
            match r.op {
                Op::Write => drop(file.write_at(offset, &r.key.to_le_bytes().repeat(BLOCK / 8))),
                _ => drop(file.read_at(offset, &mut buf).unwrap()),
            }
        }
        let s = file.cache().stats();
        let got = [s.hits, s.inserts, s.evictions, s.write_backs];
        let want = [sim.read_hits, sim.insertions, sim.evictions, sim.write_backs];
        assert_eq!(got, want, "ticking {ticking}: engine (hits, inserts, evictions, write-backs)");
        assert_eq!((s.dirty_lost, s.write_back_errors), (0, 0));
        counts.push(want);
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }
    // Cleaning wrote back blocks that eviction alone would have written later, or never.
    assert!(counts[0][3] > counts[1][3], "ACP cleaned: {counts:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file device whose syncs do nothing (see `Unsynced`), shareable as the builder's and the
/// `CachedFile`'s backing device.
fn unsynced(file: std::fs::File, path: &std::path::Path) -> Arc<Unsynced> {
    Arc::new(Unsynced(tiercache_engine::device::FileDevice::new(file, path)))
}
