//! How a simulation runs and reports, apart from the trace and the cache: the options `sim`,
//! `run` and the virtual-time runner (the `timed` module) share.

use std::path::PathBuf;

use clap::Args;

/// How `sim` runs and reports, apart from the trace and the cache: virtual time and output.
#[derive(Args)]
pub struct RunArgs {
    /// Virtual time: run with this many closed-loop clients on modeled devices, and report
    /// throughput, latency and device utilization instead of counters alone.
    #[arg(long, visible_alias = "concurrency")]
    pub clients: Option<usize>,
    /// Virtual time, open loop: requests arrive at this rate (per second) however many are in
    /// flight (then --clients only switches virtual time on).
    #[arg(long)]
    pub arrival_rate: Option<f64>,
    /// Virtual time: length of one interval of the time series, in milliseconds; controllers
    /// (--nhc) are fed one measurement per interval (Orthus uses 5 ms).
    #[arg(long, default_value_t = 100.0)]
    pub interval_ms: f64,
    /// With --clients: the device of the (upper) tier, a preset or a TOML profile file.
    #[arg(long, default_value = "dram")]
    pub profile: String,
    /// With --clients and --lower-capacity: the device of the lower tier [default:
    /// optane-dcpm].
    #[arg(long)]
    pub lower_profile: Option<String>,
    /// With --clients and --tier: the device of each further tier, in order [default: nvme].
    #[arg(long = "tier-profile", value_name = "PROFILE")]
    pub tier_profiles: Vec<String>,
    /// With --clients: the backing (capacity) device.
    #[arg(long, default_value = "nvme")]
    pub backing_profile: String,
    /// With --clients: the cache's own work per request, on a processor of `cores`:
    /// 'request_ns=N,miss_ns=N,write_ns=N,lower_hit_ns=N,cores=N' (lower_hit_ns: a hit below
    /// the top tier; cores: one per client if not given). Without it the cache's work is free.
    /// `tiercache lab run calibrate` measures these on the engine.
    #[arg(long, value_name = "SPEC")]
    pub cpu: Option<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as CSV (a header and one row) to this file; in virtual time, the
    /// per-interval time series.
    #[arg(long)]
    pub csv: Option<PathBuf>,
}
