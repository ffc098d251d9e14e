//! Non-hierarchical caching (Orthus, FAST '21, section 4) in virtual time, on a modeled pair of
//! devices: the capacity device half as fast as the cache device. Under high load Algorithm 1
//! tunes `load_admit` to within 5% of the best static split (and at least classic caching's
//! throughput); under low load (one request at a time) it stays with classic caching.

mod common;

use common::fixed_rate;
use tiercache_core::{Capacity, Request};
use tiercache_policy::nhc::NhcConfig;
use tiercache_policy::{AnyPolicy, PolicyConfig};
use tiercache_sim::timed::{simulate_timed, TimedOptions, TimedReport};
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

const CACHE_RATE: f64 = 100_000.0;
const CAPACITY_RATE: f64 = 50_000.0;

fn workload(requests: u64) -> Vec<Request> {
    let config = SyntheticConfig {
        distribution: KeyDistribution::Zipf { theta: 0.99 },
        objects: 20_000,
        requests,
        read_ratio: 1.0,
        size: SizeDistribution::Fixed { bytes: 4096 },
        seed: 11,
    };
    Synthetic::new(config).unwrap().collect()
}

fn run(nhc: Option<NhcConfig>, clients: usize, requests: &[Request]) -> TimedReport {
    let lru = AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(5000), &[], 0);
    let mut policy = match nhc {
        Some(config) => lru.unwrap().with_nhc(config, 3),
        None => lru.unwrap(),
    };
    let options = TimedOptions {
        interval_us: 10_000,
        ..TimedOptions::closed(
            clients,
            vec![fixed_rate("cache", CACHE_RATE)],
            fixed_rate("capacity", CAPACITY_RATE),
        )
    };
    simulate_timed(&mut policy, requests, &options)
}

/// Throughput over the second half of the run: the cache warm and the tuning settled.
fn steady(report: &TimedReport) -> f64 {
    let points = &report.series[report.series.len() / 2..report.series.len() - 1];
    points.iter().map(|p| p.ops_per_second).sum::<f64>() / points.len() as f64
}

fn mean_knob(report: &TimedReport, knob: &str) -> f64 {
    let points = &report.series[report.series.len() / 2..];
    points.iter().map(|p| p.knobs[knob]).sum::<f64>() / points.len() as f64
}

fn tuned() -> NhcConfig {
    NhcConfig { window: 10, ..NhcConfig::default() }
}

fn static_split(load_admit: f64) -> NhcConfig {
    NhcConfig { fixed_load_admit: Some(load_admit), ..NhcConfig::default() }
}

#[test]
fn under_high_load_tuning_finds_the_best_static_split() {
    let requests = workload(800_000);
    let classic = run(None, 64, &requests);
    let nhc = run(Some(tuned()), 64, &requests);
    let mut best = (1.0, steady(&classic));
    for step in 0..=25 {
        let load_admit = 0.5 + 0.02 * step as f64;
        let report = run(Some(static_split(load_admit)), 64, &requests);
        if steady(&report) > best.1 {
            best = (load_admit, steady(&report));
        }
    }
    eprintln!(
        "H={:.3} classic {:.0} ops/s, best static split {:.2}: {:.0}, NHC {:.0} (load_admit {:.3})",
        classic.hit_ratio,
        steady(&classic),
        best.0,
        best.1,
        steady(&nhc),
        mean_knob(&nhc, "load_admit")
    );
    assert!(steady(&nhc) >= 0.95 * best.1, "NHC {:.0} vs best static {:.0}", steady(&nhc), best.1);
    assert!(steady(&nhc) >= steady(&classic), "NHC {:.0} vs classic", steady(&nhc));
    assert!(best.0 < 0.9, "the devices are loaded enough for splitting to pay: {}", best.0);
    // Where both devices are equally busy: H la / R_hi = (1 - H la) / R_lo, H measured while
    // classic caching (NHC's hit rate once it stops admitting).
    let h = classic.hit_ratio;
    let balanced = CACHE_RATE / (CACHE_RATE + CAPACITY_RATE) / h;
    let tuned = mean_knob(&nhc, "load_admit");
    assert!((tuned - balanced).abs() < 0.06, "load_admit {tuned:.3}, balance at {balanced:.3}");
}

#[test]
fn under_low_load_it_stays_with_classic_caching() {
    let requests = workload(200_000);
    let classic = run(None, 1, &requests);
    let nhc = run(Some(tuned()), 1, &requests);
    let load_admit = mean_knob(&nhc, "load_admit");
    eprintln!(
        "classic {:.0} ops/s, NHC {:.0}, mean load_admit {load_admit:.3}",
        steady(&classic),
        steady(&nhc)
    );
    assert!(load_admit >= 0.97, "mean load_admit {load_admit}");
    assert!(steady(&nhc) >= 0.99 * steady(&classic));
}
