//! What both harnesses share: their command-line options and their JSON rows.
//!
//! `--threads 1,4,16` takes any list of thread counts; `--json` prints one JSON object a line
//! (one row per thread count and cache) instead of the table, for scripts that collect figures
//! over several machines.

use clap::Parser;
use serde::Serialize;

/// Options common to both harnesses.
#[derive(Debug, Parser)]
pub struct Common {
    /// Thread counts to run, in order (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = thread_count)]
    pub threads: Vec<usize>,
    /// Print one JSON object per row instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Seconds measured per run.
    #[arg(long)]
    pub seconds: Option<f64>,
}

fn thread_count(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        _ => Err(format!("`{text}` is not a thread count from 1 to 1024")),
    }
}

/// One measured row, in the shape `--json` prints.
#[derive(Debug, Default, Serialize)]
pub struct Row {
    pub threads: usize,
    /// Which tiercache configuration (policy and read kind, or disk tier).
    pub cache: String,
    pub tiercache_ops_per_second: f64,
    pub foyer_ops_per_second: f64,
    pub tiercache_dropped: u64,
    pub foyer_dropped: u64,
    pub tiercache_hit_ratio: f64,
    pub foyer_hit_ratio: f64,
    /// Blocks per device write of tiercache's disk tier (the hybrid harness).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiercache_blocks_per_write: Option<f64>,
    /// The raw copy loop over the same keys, where the harness runs one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_ops_per_second: Option<f64>,
    /// The workload (the hybrid harness: `blocks` or `objects`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// CPU seconds (user and system, from getrusage) the process spent per million
    /// operations in the measured phase: what the figure would cost on many cores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiercache_cpu_s_per_million: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foyer_cpu_s_per_million: Option<f64>,
    /// The 99th percentile of an operation's latency, microseconds (every 8th timed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiercache_p99_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foyer_p99_us: Option<f64>,
    /// KiB the process read from and wrote to storage per operation in the measured phase
    /// (`/proc/self/io`: direct I/O, and page-cache pages read in or dirtied): what a run asks
    /// of the device, beside what it gets from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiercache_storage_read_kib_per_op: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiercache_storage_written_kib_per_op: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foyer_storage_read_kib_per_op: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foyer_storage_written_kib_per_op: Option<f64>,
}

/// CPU seconds (user and system) the process has used so far.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given, which lives on this stack.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Bytes the process has read from and written to storage so far (`read_bytes` and
/// `write_bytes` of `/proc/self/io`); zeros where the kernel does not say.
pub fn storage_bytes() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field = |name: &str| {
        text.lines().find_map(|line| line.strip_prefix(name)?.trim().parse().ok()).unwrap_or(0)
    };
    (field("read_bytes:"), field("write_bytes:"))
}

/// The 99th percentile of `samples` (nanoseconds), in microseconds.
pub fn p99_us(samples: &mut [u32]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    samples[(samples.len() * 99 / 100).min(samples.len() - 1)] as f64 / 1000.0
}

impl Row {
    pub fn print_json(&self) {
        println!("{}", serde_json::to_string(self).expect("a row serializes"));
    }
}
