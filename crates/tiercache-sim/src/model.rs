//! The analytic model of caching and splitting over two devices from the Orthus paper (Wu et
//! al., "The Storage Hierarchy is Not a Hierarchy: Optimizing Caching on Modern Storage
//! Devices with Orthus", FAST'21, section 3.1). Each device serves a fixed rate of operations
//! per second, `r_hi` (the cache device) and `r_lo` (the capacity device); the workload is
//! read-only. Caching sends every request to the fast device (a miss also reads the slow one
//! and installs there); splitting sends a fraction `s` to the fast device and the rest to the
//! slow one, with no installs. "One" is one request at a time, "many" copious concurrency.
//!
//! The virtual-time simulator reproduces equations 2 and 7 within 2%
//! (`tests/timed.rs`); these closed forms are its reference and Figure 3's source.

use serde::Serialize;

/// Equation 1: mean time per request, caching, one request at a time (seconds).
pub fn cache_time_one(h: f64, r_hi: f64, r_lo: f64) -> f64 {
    let hit = 1.0 / r_hi;
    let miss = 1.0 / r_hi + 1.0 / r_lo;
    h * hit + (1.0 - h) * miss
}

/// Equation 2: throughput of caching, one request at a time (operations per second).
pub fn cache_one(h: f64, r_hi: f64, r_lo: f64) -> f64 {
    r_hi * r_lo / (h * r_lo + (1.0 - h) * (r_hi + r_lo))
}

/// Equations 3-6: time for `n` requests with many in flight: the slower of the slow device
/// (the misses) and the fast device (every request, hit or install).
pub fn cache_time_many(n: f64, h: f64, r_hi: f64, r_lo: f64) -> f64 {
    let slow = n * (1.0 - h) / r_lo;
    let fast = n * (1.0 - h) / r_hi + n * h / r_hi;
    slow.max(fast)
}

/// Equation 7: throughput of caching with many requests in flight.
pub fn cache_many(h: f64, r_hi: f64, r_lo: f64) -> f64 {
    1.0 / ((1.0 - h) / r_lo).max(1.0 / r_hi)
}

/// Equation 8: throughput of splitting (fraction `s` to the fast device), one at a time.
pub fn split_one(s: f64, r_hi: f64, r_lo: f64) -> f64 {
    1.0 / ((1.0 - s) / r_lo + s / r_hi)
}

/// Equation 9: throughput of splitting with many requests in flight.
pub fn split_many(s: f64, r_hi: f64, r_lo: f64) -> f64 {
    1.0 / ((1.0 - s) / r_lo).max(s / r_hi)
}

/// One point of Figure 3: the four curves at one hit (or split) rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Figure3Point {
    pub r_hi: f64,
    pub r_lo: f64,
    /// The hit rate H for caching, and the split rate S for splitting.
    pub rate: f64,
    pub cache_one: f64,
    pub cache_many: f64,
    pub split_one: f64,
    pub split_many: f64,
}

/// The device ratios of Figure 3's four panels: the fast device at 100 ops/s, the slow one at
/// 1, 10, 50 and 100.
pub const FIGURE3_RATIOS: [(f64, f64); 4] =
    [(100.0, 1.0), (100.0, 10.0), (100.0, 50.0), (100.0, 100.0)];

/// Figure 3: each panel at `steps + 1` evenly spaced rates from 0 to 1.
pub fn figure3(steps: usize) -> Vec<Figure3Point> {
    let steps = steps.max(1);
    let mut points = Vec::with_capacity(FIGURE3_RATIOS.len() * (steps + 1));
    for (r_hi, r_lo) in FIGURE3_RATIOS {
        for i in 0..=steps {
            let rate = i as f64 / steps as f64;
            points.push(Figure3Point {
                r_hi,
                r_lo,
                rate,
                cache_one: cache_one(rate, r_hi, r_lo),
                cache_many: cache_many(rate, r_hi, r_lo),
                split_one: split_one(rate, r_hi, r_lo),
                split_many: split_many(rate, r_hi, r_lo),
            });
        }
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn equation_2_by_hand() {
        // H = 0.9, R_hi = 100, R_lo = 10: T = 0.9/100 + 0.1 * (1/100 + 1/10) = 0.009 + 0.011
        // = 0.02 s, so 50 ops/s.
        assert!(close(cache_time_one(0.9, 100.0, 10.0), 0.02));
        assert!(close(cache_one(0.9, 100.0, 10.0), 50.0));
        // Every request misses: 1/(1/100 + 1/1) = 100/101.
        assert!(close(cache_one(0.0, 100.0, 1.0), 100.0 / 101.0));
        // Every request hits: the fast device's rate.
        assert!(close(cache_one(1.0, 100.0, 1.0), 100.0));
    }

    #[test]
    fn equation_7_by_hand() {
        // H = 0.9, 100:10: slow side 0.1/10 = 0.01 s, fast side 1/100 = 0.01 s: 100 ops/s.
        assert!(close(cache_many(0.9, 100.0, 10.0), 100.0));
        // H = 0.8, 100:1: the slow device dominates: 1/(0.2/1) = 5 ops/s.
        assert!(close(cache_many(0.8, 100.0, 1.0), 5.0));
        // Equal devices: the fast device (every request) is the bottleneck whatever H.
        assert!(close(cache_many(0.3, 100.0, 100.0), 100.0));
        assert!(close(cache_time_many(1000.0, 0.8, 100.0, 1.0), 200.0));
    }

    #[test]
    fn equations_8_and_9_by_hand() {
        // S = 0.5, 100:100, one at a time: 1/(0.5/100 + 0.5/100) = 100.
        assert!(close(split_one(0.5, 100.0, 100.0), 100.0));
        // Many in flight: both devices busy half the requests: 1/max(0.005, 0.005) = 200.
        assert!(close(split_many(0.5, 100.0, 100.0), 200.0));
        // 100:50, S = 2/3 balances the devices: 1/max((1/3)/50, (2/3)/100) = 150.
        assert!(close(split_many(2.0 / 3.0, 100.0, 50.0), 150.0));
        // S = 0.9, 100:10: 1/(0.1/10 + 0.9/100) = 1/0.019.
        assert!(close(split_one(0.9, 100.0, 10.0), 1.0 / 0.019));
    }

    #[test]
    fn figure_3s_message_splitting_beats_caching_when_the_devices_are_close() {
        let points = figure3(100);
        assert_eq!(points.len(), 4 * 101);
        let best = |r_lo: f64, f: fn(&Figure3Point) -> f64| {
            points.iter().filter(|p| p.r_lo == r_lo).map(f).fold(0.0, f64::max)
        };
        // 100:1: both peak at the fast device's 100 ops/s.
        assert!(close(best(1.0, |p| p.cache_many), 100.0));
        assert!(best(1.0, |p| p.split_many) < 102.0);
        // 100:100: caching can never beat one device; splitting uses both.
        assert!(close(best(100.0, |p| p.cache_many), 100.0));
        assert!(close(best(100.0, |p| p.split_many), 200.0));
    }
}
