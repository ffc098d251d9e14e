//! The discrete-event model against the closed forms of Wu et al. (Orthus, FAST'21, section
//! 3.1.1) for fixed-rate devices: equation 2 (caching, one request at a time) and equation 7
//! (caching, many requests), within 2%, at the measured hit rate H of the run.

mod common;

use common::fixed_rate;
use tiercache_core::{Capacity, DeviceProfile, Request};
use tiercache_policy::{AnyPolicy, PolicyConfig};
use tiercache_sim::timed::{simulate_timed, TimedOptions};
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

fn workload() -> Vec<Request> {
    let config = SyntheticConfig {
        distribution: KeyDistribution::Zipf { theta: 0.9 },
        objects: 5000,
        requests: 40_000,
        read_ratio: 1.0,
        size: SizeDistribution::Fixed { bytes: 1 },
        seed: 5,
    };
    Synthetic::new(config).unwrap().collect()
}

fn run(clients: usize, r_hi: f64, r_lo: f64) -> (f64, f64) {
    let mut policy =
        AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(800), &[], 0).unwrap();
    let options =
        TimedOptions::closed(clients, vec![fixed_rate("hi", r_hi)], fixed_rate("lo", r_lo));
    let report = simulate_timed(&mut policy, &workload(), &options);
    (report.ops_per_second, report.hit_ratio)
}

fn close(measured: f64, model: f64) -> bool {
    (measured - model).abs() / model <= 0.02
}

#[test]
fn one_request_at_a_time_follows_equation_2() {
    for (r_hi, r_lo) in [(100.0, 1.0), (100.0, 10.0), (100.0, 50.0), (100.0, 100.0)] {
        let (measured, h) = run(1, r_hi, r_lo);
        let model = tiercache_sim::model::cache_one(h, r_hi, r_lo);
        assert!(
            close(measured, model),
            "{r_hi}:{r_lo} H={h:.3}: {measured:.3} ops/s vs equation 2's {model:.3}"
        );
    }
}

#[test]
fn many_requests_follow_equation_7() {
    for (r_hi, r_lo) in [(100.0, 1.0), (100.0, 10.0), (100.0, 50.0), (100.0, 100.0)] {
        let (measured, h) = run(64, r_hi, r_lo);
        let model = tiercache_sim::model::cache_many(h, r_hi, r_lo);
        assert!(
            close(measured, model),
            "{r_hi}:{r_lo} H={h:.3}: {measured:.3} ops/s vs equation 7's {model:.3}"
        );
    }
}

#[test]
fn an_open_loop_below_capacity_keeps_up_and_above_it_queues() {
    let requests = workload();
    let run = |rate: f64| {
        let mut policy =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(800), &[], 0).unwrap();
        let mut options =
            TimedOptions::closed(1, vec![fixed_rate("hi", 1000.0)], fixed_rate("lo", 1000.0));
        options.arrival_rate = Some(rate);
        options.interval_us = 1_000_000;
        simulate_timed(&mut policy, &requests, &options)
    };
    // Every request uses the fast device once, misses the slow one too: the fast device
    // saturates at 1000 requests per second.
    let light = run(400.0);
    assert!(close(light.ops_per_second, 400.0), "{}", light.ops_per_second);
    assert!(light.latency_us_p99 < 2500.0, "no queueing below capacity: {}", light.latency_us_p99);
    let heavy = run(2000.0);
    assert!(close(heavy.ops_per_second, 1000.0), "{}", heavy.ops_per_second);
    assert!(heavy.latency_us_p99 > 100.0 * light.latency_us_p99, "queues grow above capacity");
    // The time series accounts for every request.
    let total: f64 = light.series.iter().map(|p| p.ops_per_second).sum();
    assert!((total - light.requests as f64).abs() < 1e-6, "{total}");
    assert_eq!(light.reads.count, light.requests);
}

#[test]
fn the_time_series_carries_the_policys_knobs() {
    let mut policy =
        AnyPolicy::from_config(&PolicyConfig::Arc, Capacity::objects(800), &[], 0).unwrap();
    let mut options =
        TimedOptions::closed(4, vec![fixed_rate("hi", 1000.0)], fixed_rate("lo", 100.0));
    options.interval_us = 2_000_000;
    let report = simulate_timed(&mut policy, &workload(), &options);
    assert!(report.series.len() > 3);
    let targets: Vec<f64> = report.series.iter().map(|p| p.knobs["arc_target_t1"]).collect();
    assert!(targets.iter().any(|t| *t != targets[0]), "ARC's target moves over time: {targets:?}");
}

#[test]
fn a_disk_serves_a_sequential_scan_without_seeking() {
    // 2000 one-block reads that all miss a tiny cache, in block order and then shuffled.
    let in_order: Vec<Request> = (0..2000).map(|k| Request::read(k, 4096)).collect();
    let mut shuffled = in_order.clone();
    let mut rng = tiercache_core::SeededRng::new(7);
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let run = |requests: &[Request]| {
        let mut policy =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(10), &[], 0).unwrap();
        let dram = DeviceProfile::preset("dram").unwrap();
        let options = TimedOptions::closed(1, vec![dram], DeviceProfile::preset("hdd").unwrap());
        simulate_timed(&mut policy, requests, &options)
    };
    let (sequential, random) = (run(&in_order), run(&shuffled));
    assert_eq!((sequential.hits, random.hits), (0, 0));
    // A 4 KiB block at 0.15 GB/s takes about 27 us; a seek takes 4 ms.
    assert!(
        sequential.ops_per_second > 50.0 * random.ops_per_second,
        "sequential {:.0} ops/s, random {:.0} ops/s",
        sequential.ops_per_second,
        random.ops_per_second
    );
    assert!(random.ops_per_second < 260.0, "{}", random.ops_per_second);
}

#[test]
fn the_cache_s_own_work_queues_for_its_cores() {
    let requests = workload();
    let run = |capacity: u64, clients: usize, cpu: &str| {
        let mut policy =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(capacity), &[], 0)
                .unwrap();
        // Devices a hundred times faster than the work: the processor decides the rate.
        let mut options = TimedOptions::closed(
            clients,
            vec![fixed_rate("hi", 100_000.0)],
            fixed_rate("lo", 100_000.0),
        );
        options.cpu = Some(tiercache_sim::timed::CpuModel::parse(cpu, clients).unwrap());
        simulate_timed(&mut policy, &requests, &options)
    };
    // One core at 1 ms a request serves 1000 a second however many clients wait for it.
    let one_core = run(800, 4, "request_ns=1000000,cores=1");
    assert!((one_core.ops_per_second - 1000.0).abs() < 10.0, "{}", one_core.ops_per_second);
    assert!(one_core.latency_us_mean > 3900.0, "four clients queue: {}", one_core.latency_us_mean);
    let cpu = one_core.devices.last().unwrap();
    assert_eq!(cpu.name, "cpu");
    assert!(cpu.utilization > 0.99, "{}", cpu.utilization);
    // Four cores, four clients: four times the rate, less the devices' time.
    let four = run(800, 4, "request_ns=1000000,cores=4");
    assert!(
        four.ops_per_second > 3900.0 && four.ops_per_second < 4000.0,
        "{}",
        four.ops_per_second
    );
    // A miss costs its own time more: with a one-object cache nearly every request misses.
    let misses = run(1, 1, "request_ns=1000000,miss_ns=1000000");
    assert!(misses.hit_ratio < 0.05, "{}", misses.hit_ratio);
    let expected = 1e6 / (1000.0 + 1000.0 * (1.0 - misses.hit_ratio) + 20.0);
    assert!(
        (misses.ops_per_second - expected).abs() / expected < 0.01,
        "{} against {expected}",
        misses.ops_per_second
    );
    for bad in ["request_ns=-1", "cores=0", "speed=3", "request_ns"] {
        assert!(tiercache_sim::timed::CpuModel::parse(bad, 1).is_err(), "{bad}");
    }
}

#[test]
fn a_hit_below_the_top_tier_costs_the_cores_its_time() {
    use tiercache_core::{Decision, TierId};
    use tiercache_policy::stack::Amount;
    use tiercache_policy::{Policy, StackConfig, StackSpec};
    let requests = workload();
    let stack = || {
        let mut spec = StackSpec::new("lru", Amount::Text("400".into()));
        spec.unit = "objects".into();
        spec.lower_capacity = Some(Amount::Text("1200".into()));
        StackConfig::try_from(spec).unwrap().build().unwrap()
    };
    // The hits the hierarchy serves from its lower tier on the stream.
    let mut counting = stack();
    let mut decision = Decision::new();
    let lower_hits = requests
        .iter()
        .filter(|r| {
            decision.clear();
            counting.decide(r, &mut decision);
            matches!(decision.hit, Some(t) if t != TierId::DRAM)
        })
        .count();
    assert!(lower_hits > 5_000, "a Zipf stream hits the lower tier: {lower_hits}");
    let run = |cpu: &str| {
        let fast = || fixed_rate("fast", 1e9);
        let mut options = TimedOptions::closed(1, vec![fast(), fast()], fast());
        options.cpu = Some(tiercache_sim::timed::CpuModel::parse(cpu, 1).unwrap());
        simulate_timed(&mut stack(), &requests, &options)
    };
    // One client: the run takes each request's work in turn, so 1 ms a lower hit adds those
    // hits' milliseconds and nothing else.
    let without = run("request_ns=1000");
    let with = run("request_ns=1000,lower_hit_ns=1000000");
    let added = with.virtual_seconds - without.virtual_seconds;
    let expected = lower_hits as f64 * 1e-3;
    assert!((added - expected).abs() < expected * 1e-3, "{added} s for {lower_hits}");
    assert_eq!(with.hit_ratio, without.hit_ratio, "the work takes time, it decides nothing");
}

#[test]
fn a_sharded_model_splits_keys_and_capacity_as_the_engine_does() {
    use tiercache_policy::{Policy, StackConfig, StackSpec};
    let requests = workload();
    let build = |shards: Option<usize>| {
        let mut spec = StackSpec::new("lru", tiercache_policy::stack::Amount::Text("800".into()));
        spec.unit = "objects".into();
        spec.shards = shards;
        StackConfig::try_from(spec).unwrap().build().unwrap()
    };
    let options = TimedOptions::closed(1, vec![fixed_rate("hi", 100.0)], fixed_rate("lo", 1.0));
    let mut one = build(None);
    let mut sharded = build(Some(8));
    assert_eq!(sharded.capacity(tiercache_core::TierId::DRAM).amount, 800);
    let whole = simulate_timed(&mut one, &requests, &options);
    let split = simulate_timed(&mut sharded, &requests, &options);
    // Eight LRUs of 100 over their own keys: each as full as the keys it was given allow.
    assert_eq!(sharded.resident(tiercache_core::TierId::DRAM), 800);
    // Each shard is an LRU over the requests of its keys, alone.
    let mut hits = 0;
    for shard in 0..8 {
        let mut lru =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(100), &[], 0).unwrap();
        let mine: Vec<Request> = requests
            .iter()
            .filter(|r| tiercache_core::shard_index(r.key, 3) == shard)
            .copied()
            .collect();
        let mut decision = tiercache_core::Decision::new();
        for r in &mine {
            decision.clear();
            lru.decide(r, &mut decision);
            hits += decision.hit.is_some() as u64;
        }
    }
    assert_eq!(split.hits, hits);
    assert_ne!(split.hits, whole.hits, "one LRU of 800 is not eight of 100");
    for bad in [3, 0, 8192] {
        let mut spec = StackSpec::new("lru", tiercache_policy::stack::Amount::Text("800".into()));
        spec.shards = Some(bad);
        let error = StackConfig::try_from(spec).unwrap_err().to_string();
        assert!(error.contains("shards"), "{bad}: {error}");
    }
}

#[test]
fn a_tier_written_behind_keeps_its_device_busy_but_not_the_request() {
    // Every request misses a one-object cache: a read of the backing device, then the
    // install, a write of the tier that takes ten times as long.
    let requests: Vec<Request> = (0..500).map(|k| Request::read(k, 1)).collect();
    let run = |behind: bool| {
        let mut policy =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(1), &[], 0).unwrap();
        let mut options =
            TimedOptions::closed(1, vec![fixed_rate("tier", 100.0)], fixed_rate("lo", 1000.0));
        options.written_behind = vec![behind];
        simulate_timed(&mut policy, &requests, &options)
    };
    let (waits, behind) = (run(false), run(true));
    assert!(close(waits.ops_per_second, 1e6 / 11_000.0), "{}", waits.ops_per_second);
    assert!(close(behind.ops_per_second, 1000.0), "{}", behind.ops_per_second);
    // The tier's writes are all still done, keeping its one server busy all the time.
    assert_eq!(behind.devices[0].bytes_written, 500);
    assert!(behind.devices[0].utilization > 0.9, "{}", behind.devices[0].utilization);
}

#[test]
fn contention_slows_operations_served_together() {
    // Every request hits (the cache holds every key): one tier read each.
    let requests: Vec<Request> = (0..4000).map(|k| Request::read(k % 10, 1)).collect();
    let run = |clients: usize, contention: f64| {
        let mut policy =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(10), &[], 0).unwrap();
        let tier = DeviceProfile { parallelism: 2, contention, ..fixed_rate("tier", 1000.0) };
        let options = TimedOptions::closed(clients, vec![tier], fixed_rate("lo", 1000.0));
        simulate_timed(&mut policy, &requests, &options).ops_per_second
    };
    // Two servers: two clients twice one's rate, unless each slows the other to half speed.
    let one = run(1, 0.0);
    assert!(close(run(2, 0.0), 2.0 * one), "{one}");
    assert!(close(run(2, 1.0), one), "{one}");
    assert!(close(run(2, 0.5), 2.0 * one / 1.5), "{one}");
}

/// One client over a fast tier and a slow disk, with a page cache of (blocks, warmed by) in
/// DRAM in front of the disk, or none.
fn over_a_disk(page_cache: Option<(u64, Vec<Request>)>) -> TimedOptions {
    use tiercache_sim::timed::PageCache;
    TimedOptions {
        page_cache: page_cache.map(|(blocks, warm)| PageCache {
            capacity: Capacity::objects(blocks),
            device: fixed_rate("dram", 1e7),
            warm,
        }),
        ..TimedOptions::closed(1, vec![fixed_rate("tier", 1e6)], fixed_rate("disk", 1e3))
    }
}

#[test]
fn a_page_cache_serves_the_backing_reads_it_holds_and_takes_every_block_read_or_written() {
    use tiercache_core::Op;
    // A one-block cache tier over a slow disk, reading 64 blocks three times over: the tier
    // holds nearly nothing, so every read goes to the backing device; a page cache of 64
    // blocks holds them all after the first pass, a page cache of 8 never (LRU over a loop).
    let stream: Vec<Request> = (0..192).map(|i| Request::read(i % 64, 4096)).collect();
    let run = |page_cache: Option<u64>| {
        let mut policy =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(1), &[], 0).unwrap();
        let options = over_a_disk(page_cache.map(|blocks| (blocks, Vec::new())));
        simulate_timed(&mut policy, &stream, &options)
    };
    let direct = run(None);
    let held = run(Some(64));
    let thrashed = run(Some(8));
    assert_eq!(direct.devices.len(), 2);
    assert_eq!(direct.devices[1].bytes_read, 192 * 4096);
    // With the page cache: the first pass from the disk, the other two from the page cache.
    assert_eq!(held.devices[1].bytes_read, 64 * 4096, "{:?}", held.devices);
    assert_eq!(held.devices[2].bytes_read, 128 * 4096, "{:?}", held.devices);
    assert!(held.ops_per_second > 2.5 * direct.ops_per_second);
    assert_eq!(thrashed.devices[1].bytes_read, 192 * 4096);
    // A write reaches the disk and enters the page cache: once the one-block tier has let it
    // go (a second write takes its place), a read of it is served by the page cache.
    let written = [
        Request::new(0, 7, 4096, Op::Write),
        Request::new(0, 8, 4096, Op::Write),
        Request::read(7, 4096),
    ];
    let mut policy =
        AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(1), &[], 0).unwrap();
    let options = over_a_disk(Some((8, Vec::new())));
    let r = simulate_timed(&mut policy, &written, &options);
    assert_eq!(r.devices[1].bytes_written, 2 * 4096, "{:?}", r.devices);
    assert_eq!(r.devices[1].bytes_read, 0, "{:?}", r.devices);
    assert_eq!(r.devices[2].bytes_read, 4096, "{:?}", r.devices);
}

#[test]
fn a_warm_page_cache_serves_its_first_reads() {
    let stream: Vec<Request> = (0..8).map(|i| Request::read(i, 4096)).collect();
    let mut policy =
        AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(1), &[], 0).unwrap();
    let options = over_a_disk(Some((8, stream[..4].to_vec())));
    let r = simulate_timed(&mut policy, &stream, &options);
    assert_eq!(r.devices[1].bytes_read, 4 * 4096, "{:?}", r.devices);
    assert_eq!(r.devices[2].bytes_read, 4 * 4096, "{:?}", r.devices);
}
