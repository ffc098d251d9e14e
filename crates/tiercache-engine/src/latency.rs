//! Operation latency, when the cache is built with `record_latency(true)`: an HDR histogram
//! (Gil Tene's HdrHistogram, 3 significant digits) per shard and operation, recorded under the
//! shard's lock at the end of the operation, merged into a snapshot on demand.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Longest latency a histogram tracks: one minute, in nanoseconds.
const LATENCY_NS_MAX: u64 = 60_000_000_000;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("static bounds are valid")
}

/// The operations whose latency is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `get` and `read_through`.
    Read = 0,
    /// `put` and `update_if_cached`.
    Write = 1,
}

/// Percentiles of one operation, in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Percentiles {
            count: h.len(),
            mean_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// Latency of reads and writes over all shards.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LatencySnapshot {
    pub read: Percentiles,
    pub write: Percentiles,
}

impl LatencySnapshot {
    /// Prometheus summaries (quantiles in seconds).
    pub fn to_prometheus(&self) -> String {
        let mut text = String::new();
        for (op, p) in [("read", &self.read), ("write", &self.write)] {
            text += &format!("# HELP tiercache_{op}_latency_seconds Latency of cache {op}s.\n");
            text += &format!("# TYPE tiercache_{op}_latency_seconds summary\n");
            for (q, v) in [("0.5", p.p50_us), ("0.99", p.p99_us), ("0.999", p.p999_us)] {
                text +=
                    &format!("tiercache_{op}_latency_seconds{{quantile=\"{q}\"}} {}\n", v / 1e6);
            }
            text += &format!("tiercache_{op}_latency_seconds_count {}\n", p.count);
            text += &format!(
                "tiercache_{op}_latency_seconds_sum {}\n",
                p.mean_us * p.count as f64 / 1e6
            );
        }
        text
    }
}
