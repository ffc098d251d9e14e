//! Shared by the simulator's integration tests.

use tiercache_core::DeviceProfile;

/// A device serving `rate` operations per second, one at a time, whatever their size.
pub fn fixed_rate(name: &str, rate: f64) -> DeviceProfile {
    DeviceProfile {
        name: name.into(),
        read_latency_us: 1e6 / rate,
        write_latency_us: 1e6 / rate,
        read_bandwidth_gb_s: 1e12,
        write_bandwidth_gb_s: 1e12,
        parallelism: 1,
        read_share_one_writer: 1.0,
        read_share_eight_writers: 1.0,
        cost_per_gb: 1.0,
        sequential_latency_us: None,
        contention: 0.0,
    }
}
