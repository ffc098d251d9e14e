//! `tiercache`: the command line: simulator, engine benchmark, models and the lab.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tiercache_cli::{
    bench, crashtest, demo, experiment, lab, model, mrc, profile, serve, sim, sweep, trace, ycsb,
    ycsb_slatedb,
};

#[derive(Parser)]
#[command(
    name = "tiercache",
    version,
    about = "Hybrid-memory caching: policies simulated on traces (sim, sweep, run), the engine \
             over DRAM, slow memory and flash (bench, serve, ycsb), and the papers' claims (lab)"
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
    /// Miss-ratio curves fast: LRU's exact from stack distances in one pass, any policy's by
    /// sampling keys (SHARDS), with the sampling error; `--check` compares with full runs.
    Mrc(Box<mrc::MrcArgs>),
    /// Run the engine under load (threads, key distribution, tiers) and report throughput and
    /// latency; `--raw` measures the medium alone.
    Bench(Box<bench::BenchArgs>),
    /// Kill -9 a process writing through a write-back cache, again and again; reopen after
    /// each kill and check every block against the writes that were synced.
    Crashtest(Box<crashtest::CrashtestArgs>),
    /// Serve a backing file through the cache as a block device over NBD (unix or TCP
    /// socket), for QEMU, nbd-client, fio and any NBD client.
    Serve(Box<serve::ServeArgs>),
    /// YCSB's workloads A-F on a redb database behind the cache: load, run, check every
    /// value read; throughput, latency per operation, hit ratios, bytes written to the slow
    /// tier.
    Ycsb(Box<ycsb::YcsbArgs>),
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

fn main() {
    quiet_on_closed_output();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Sim(args) => sim::run(&args),
        Command::Sweep(args) => sweep::run(&args),
        Command::Mrc(args) => mrc::run(&args),
        Command::Run { file } => experiment::run(&file),
        Command::Trace(command) => trace::run(command),
        Command::Model(command) => model::run(&command),
        Command::Bench(args) => bench::run(&args),
        Command::Crashtest(args) => crashtest::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Ycsb(args) if args.db == "slatedb" => ycsb_slatedb::run(&args),
        Command::Ycsb(args) => ycsb::run(&args),
        Command::Profile(command) => profile::run(command),
        Command::Lab(command) => lab::run(&command),
    };
    if let Err(error) = result {
        if error.chain().any(closed_output) {
            end_as_a_closed_pipe_ends();
        }
        eprintln!("error: {}", tiercache_cli::error_message(&error));
        std::process::exit(1);
    }
}

/// A reader that stops early (`tiercache sweep --json | head`) closes the pipe: the command
/// then ends quietly, as other command-line tools do, instead of reporting a panic or an
/// error. Rust ignores SIGPIPE, so a write to the closed pipe fails: `print!` panics, and a
/// writer returns the error; both end here.
fn quiet_on_closed_output() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            end_as_a_closed_pipe_ends();
        }
        default(info);
    }));
}

/// Whether `error` is a write to a closed pipe.
fn closed_output(error: &(dyn std::error::Error + 'static)) -> bool {
    let broken = Some(std::io::ErrorKind::BrokenPipe);
    error.downcast_ref::<std::io::Error>().map(|e| e.kind()) == broken
        || error.downcast_ref::<serde_json::Error>().and_then(|e| e.io_error_kind()) == broken
}

/// Ends the process as SIGPIPE's default action would (the status a shell reports as 141).
fn end_as_a_closed_pipe_ends() -> ! {
    // SAFETY: restoring a signal's default action and raising it in this process; nothing
    // else touches SIGPIPE's disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(141);
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every option and argument of every command says what it does in `--help`.
    #[test]
    fn every_option_of_every_command_has_help_text() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if ["help", "version"].contains(&id) {
                    continue;
                }
                let said = arg.get_help().or(arg.get_long_help()).map(|h| h.to_string());
                if said.is_none_or(|h| h.trim().is_empty()) {
                    missing.push(format!("{path} --{}", arg.get_long().unwrap_or(id)));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "tiercache", &mut missing);
        assert!(missing.is_empty(), "without help text:\n{}", missing.join("\n"));
    }
}
