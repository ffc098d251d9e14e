//! `tiercache lab`: the papers' experiments (crate `tiercache-lab`) and the two this crate
//! adds, measured on the engine through its own commands: `ycsb` (redb over the engine) and
//! `calibrate` (the simulator's timing against the engine on this machine).

pub use tiercache_lab::*;

mod calibrate;
mod ycsb;

/// The experiments measured on the engine, after the papers' in `lab list` and `lab run all`.
const MEASURED: [Experiment; 2] = [
    Experiment {
        name: "ycsb",
        what: "YCSB A-F on redb over the engine, measured (Writes Hurt §3.4 Figure 6, §4.1 Figure 7, §4.2 Figure 8): no tiercache, a DRAM cache of the slow tier's cost, the slow tier admitting every block, the slow tier with OBP and small-bypass, DRAM over the slow tier; throughput, hit ratios, bytes written to the slow tier, throughput per memory cost",
        run: ycsb::run,
        measured: true,
        headline: false,
    },
    Experiment {
        name: "calibrate",
        what: "The simulator's timing checked against the engine on this machine: DRAM, a tmpfs file and the disk measured as device profiles, the cache's own work per request fitted on five other runs, then DRAM alone and over a mapped or direct-I/O tier, with and without OBP, 1 and 2 threads, read-only and 70% reads, each run by the engine and predicted by the simulator on the same request stream (throughput, mean and p99 latency, hit ratio); Writes Hurt Figure 2 on this machine's DRAM and disk beside the paper's Optane",
        run: calibrate::run,
        measured: true,
        headline: false,
    },
];

/// `tiercache lab COMMAND`.
pub fn run(command: &LabCommand) -> anyhow::Result<()> {
    tiercache_lab::run(command, &MEASURED)
}
