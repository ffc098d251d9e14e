//! The implementation audit of non-hierarchical caching (Wu et al., "The Storage Hierarchy is
//! Not a Hierarchy", FAST'21, section 4): the decision points data_admit and load_admit, and
//! the scheduler of Algorithm 1, each replayed on a sequence worked out by hand from the
//! paper's text, every decision checked. The quotes are the paper's.

use tiercache_core::{Action, Capacity, Decision, Interval, Op, RejectReason, Request};
use tiercache_policy::nhc::{Nhc, NhcConfig, Scheduler};
use tiercache_policy::{AnyPolicy, Policy, PolicyConfig};

/// One interval of 10,000 reads at `hit_rate`, with `ops` requests completed in a second (the
/// throughput target's measurement).
fn interval(ops: f64, hit_rate: f64) -> Interval {
    Interval {
        seconds: 1.0,
        completed: ops as u64,
        reads: 10_000,
        read_hits: (hit_rate * 10_000.0) as u64,
        mean_latency_us: 1.0,
        p99_latency_us: 1.0,
        ..Interval::default()
    }
}

/// Steps of 0.05 and windows of one interval, so that each line below is one interval.
fn scheduler() -> Scheduler {
    Scheduler::new(NhcConfig { step: 0.05, window: 1, ..NhcConfig::default() })
}

/// Throughput that peaks at load_admit 0.9: 10,000 there, 1,000 less per unit away.
fn f(load_admit: f64) -> f64 {
    10_000.0 - 1_000.0 * (load_admit - 0.9).abs()
}

/// Algorithm 1, line by line. State 1 (lines 1-4): "data_admit = true, load_admit = 1.0 ...
/// while cache.hit_rate is not stable". Line 5: "data_admit = false, start_hit_rate =
/// cache.hit_rate". State 2 (lines 6-14): f measured at ratio, ratio - step and ratio + step,
/// each over an interval, and load_admit moved to the best ("kept in the acceptable domain of
/// [0, 1.0]"). Lines 15-16: the best being 1.0 at the center, back to State 1. Lines 17-18: "if
/// cache.hit_rate < (1 - alpha) start_hit_rate then goto line 2".
#[test]
fn the_scheduler_follows_algorithm_1_step_by_step() {
    let mut s = scheduler();
    // State 1: the hit rate rises (0.5, then 0.8): not stable, classic caching.
    for hit_rate in [0.5, 0.8] {
        s.observe(&interval(5_000.0, hit_rate));
        assert!(s.data_admit() && s.load_admit() == 1.0 && !s.tuning());
    }
    // Stable at 0.8: line 5, State 2 begins at load_admit 1.0.
    s.observe(&interval(5_000.0, 0.8));
    assert!(!s.data_admit() && s.tuning() && s.load_admit() == 1.0);
    // Each observation is the measurement of the load_admit in force; the next value is the
    // point measured next, or the round's outcome. 1.05 lies outside [0, 1]: not measured.
    let rounds: [(f64, f64); 9] = [
        (1.0, 0.95),  // f(1.0) measured; now f(0.95)
        (0.95, 0.95), // round 1: f(0.95) > f(1.0): move down; the new round measures 0.95
        (0.95, 0.90), // then 0.90
        (0.90, 1.0),  // then 1.0
        (1.0, 0.90),  // round 2: f(0.90) is best
        (0.90, 0.85),
        (0.85, 0.95),
        (0.95, 0.90), // round 3: the center 0.90 is best, and stays
        (0.90, 0.85),
    ];
    for (i, (measured, next)) in rounds.into_iter().enumerate() {
        assert!((s.load_admit() - measured).abs() < 1e-9, "step {i}: at {}", s.load_admit());
        s.observe(&interval(f(measured), 0.8));
        assert!((s.load_admit() - next).abs() < 1e-9, "step {i}: {} not {next}", s.load_admit());
        assert!(s.tuning() && !s.data_admit());
    }
    // A tie: lines 9-14 look at ratio - step first, so where the metric is flat (f(0.90) was
    // 10,000 above, and so are f(0.85) and f(0.95) now) load_admit moves down.
    s.observe(&interval(10_000.0, 0.8)); // f(0.85)
    s.observe(&interval(10_000.0, 0.8)); // f(0.95)
    assert!((s.load_admit() - 0.85).abs() < 1e-9, "a tie goes down: {}", s.load_admit());
    // Lines 17-18: the hit rate falls below (1 - 0.05) x 0.8 = 0.76: back to State 1.
    s.observe(&interval(9_000.0, 0.75));
    assert!(s.data_admit() && s.load_admit() == 1.0 && !s.tuning());
    assert_eq!((s.tunings, s.returns), (1, 1));
    // State 1 again, then State 2 with a metric that is best at 1.0: lines 15-16 end tuning.
    for _ in 0..2 {
        s.observe(&interval(5_000.0, 0.8));
    }
    assert!(s.tuning());
    s.observe(&interval(10_000.0, 0.8)); // f(1.0)
    s.observe(&interval(9_000.0, 0.8)); // f(0.95) is worse: 1.0 is the best
    assert!(!s.tuning() && s.data_admit() && s.load_admit() == 1.0);
    assert_eq!(s.returns, 2);
}

fn lru() -> AnyPolicy {
    AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(100), &[], 0).unwrap()
}

fn decide(nhc: &mut Nhc<AnyPolicy>, op: Op, key: u64) -> Decision {
    let mut d = Decision::new();
    nhc.decide(&Request::new(0, key, 4096, op), &mut d);
    d
}

/// The decision points (section 4.2): "when da is not set, the miss is handled by D_lo and not
/// allocated in D_hi"; "for each read hit, a random number R in [0, 1.0] is generated; if R <=
/// la, the request is sent to D_hi; else, it is sent to D_lo"; "NHC admits write misses into
/// D_hi according to the policy; da, la do not control write hits/misses"; "NHC does not send
/// dirty reads to D_lo". A static split of 0.25 once the hit rate is stable.
#[test]
fn the_decision_points_admit_and_split_as_section_4_2_says() {
    let config = NhcConfig { fixed_load_admit: Some(0.25), window: 1, ..NhcConfig::default() };
    let mut nhc = Nhc::new(lru(), config, 3);
    for key in 0..50 {
        decide(&mut nhc, Op::Read, key); // da set: read misses are cached
    }
    for _ in 0..2 {
        nhc.observe(&interval(5_000.0, 0.8)); // stable: data_admit off, load_admit 0.25
    }
    assert_eq!((nhc.scheduler().data_admit(), nhc.scheduler().load_admit()), (false, 0.25));
    // A read miss is served by the capacity device and not cached.
    let d = decide(&mut nhc, Op::Read, 500);
    assert_eq!(d.hit, None);
    assert!(matches!(d.actions[..], [Action::Reject { reason: RejectReason::DataAdmitOff, .. }]));
    assert!(nhc.peek(500).is_none());
    // A write miss is admitted by the policy as before.
    let d = decide(&mut nhc, Op::Write, 600);
    assert!(d.actions.iter().any(|a| matches!(a, Action::Insert { key: 600, .. })), "{d:?}");
    // Clean read hits: about a quarter stay on the cache device, the rest go to the capacity
    // device; every one still counts as a hit.
    let (mut from_backing, n) = (0, 4_000);
    for i in 0..n {
        let d = decide(&mut nhc, Op::Read, i % 50);
        assert!(d.hit.is_some());
        from_backing += d.from_backing as u32;
    }
    let share = from_backing as f64 / n as f64;
    assert!((share - 0.75).abs() < 0.03, "{share} of clean hits sent to the capacity device");
}
