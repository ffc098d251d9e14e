//! `tiercache`: the command line: simulator, engine benchmark, models and the lab.

mod bench;
mod crashtest;
mod demo;
mod experiment;
mod lab;
mod metrics;
mod model;
mod plot;
mod profile;
mod progress;
mod serve;
mod sim;
mod sweep;
mod timed;
mod trace;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tiercache",
    version,
    about = "Hybrid-memory cache policies: simulate, sweep, inspect traces"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a few policies on a built-in synthetic workload and compare them.
    Demo(demo::DemoArgs),
    /// Simulate one policy at one capacity over a trace.
    Sim(Box<sim::SimArgs>),
    /// Run an experiment described in a TOML file (workload, cache, devices).
    Run {
        /// The experiment file.
        file: PathBuf,
    },
    /// Simulate policies x capacities in parallel; write CSV and a miss-ratio-curve plot.
    Sweep(sweep::SweepArgs),
    /// Run the engine under load (threads, key distribution, tiers) and report throughput and
    /// latency; `--raw` measures the medium alone.
    Bench(Box<bench::BenchArgs>),
    /// Kill -9 a process writing through a write-back cache, again and again; reopen after
    /// each kill and check every block against the writes that were synced.
    Crashtest(Box<crashtest::CrashtestArgs>),
    /// Serve a backing file through the cache as a block device over NBD (unix or TCP
    /// socket), for QEMU, nbd-client, fio and any NBD client.
    Serve(Box<serve::ServeArgs>),
    /// Device profiles: list the presets, or show one as TOML.
    #[command(subcommand)]
    Profile(profile::ProfileCommand),
    /// Inspect, convert or generate traces.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
    /// Analytic models from the papers: `model orthus` (caching versus splitting, Figure 3).
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// The lab: experiments that reproduce the papers' claims and write reports
    /// (`lab list`, `lab run NAME [--quick]`).
    #[command(subcommand)]
    Lab(lab::LabCommand),
}

/// How to read a trace; shared by every command that reads one.
#[derive(Args, Clone, Debug)]
pub struct TraceArgs {
    /// Trace file (.zst, .gz, .xz, .bz2 are decompressed on the fly).
    #[arg(long)]
    pub trace: PathBuf,
    /// auto, msr, systor, tencent-cbs, alibaba-block, twitter, oracle-general, vscsi, csv, txt,
    /// arc-lis (auto never guesses tencent-cbs, alibaba-block or twitter: name them).
    #[arg(long, default_value = "auto")]
    pub format: String,
    /// Columns of a --format csv trace, e.g. 'time=1,key=2,size=3,op=4,header=true'; also
    /// time_unit, addr_unit, size_unit, volume, key_size, delim, default_size, text_keys.
    #[arg(long)]
    pub csv_spec: Option<String>,
    /// Split byte-range requests into aligned blocks of this size (e.g. 4096, 4KiB).
    #[arg(long)]
    pub block_size: Option<String>,
    /// Skip malformed records (and report how many) instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
}

impl TraceArgs {
    pub fn options(&self) -> anyhow::Result<tiercache_workload::TraceOptions> {
        let format =
            tiercache_workload::TraceFormat::parse(&self.format, self.csv_spec.as_deref())?;
        let block_size = match &self.block_size {
            None => None,
            Some(text) => {
                let bytes = tiercache_core::parse_size(text)?;
                Some(
                    u32::try_from(bytes)
                        .map_err(|_| anyhow::anyhow!("--block-size {text} is too large"))?,
                )
            }
        };
        Ok(tiercache_workload::TraceOptions { format, block_size, skip_bad: self.skip_bad })
    }
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Sim(args) => sim::run(&args),
        Command::Sweep(args) => sweep::run(&args),
        Command::Run { file } => experiment::run(&file),
        Command::Trace(command) => trace::run(command),
        Command::Model(command) => model::run(&command),
        Command::Bench(args) => bench::run(&args),
        Command::Crashtest(args) => crashtest::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Profile(command) => profile::run(command),
        Command::Lab(command) => lab::run(&command),
    };
    if let Err(error) = result {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}
