//! `tiercache profile`: the device presets, as a table or as TOML to start a profile of one's
//! own hardware from, and a profile measured on the hardware (`crate::measure`).

use clap::Subcommand;
use tiercache_core::DeviceProfile;

#[derive(Subcommand)]
pub enum ProfileCommand {
    /// The presets and their numbers.
    List,
    /// A preset (or a profile file, checked) as TOML.
    Show {
        /// A preset's name (`profile list`) or a profile file.
        name: String,
    },
    /// Measure a medium (memory-mapped, through the page cache, or with direct I/O) and write
    /// its profile: latency, bandwidth, parallelism and write-to-read interference.
    Measure(Box<crate::measure::MeasureArgs>),
}

pub fn run(command: ProfileCommand) -> anyhow::Result<()> {
    match command {
        ProfileCommand::List => {
            println!(
                "{:<12} {:>10} {:>10} {:>9} {:>9} {:>5} {:>8} {:>8} {:>7}",
                "name",
                "read us",
                "write us",
                "read GB/s",
                "write GB/s",
                "par",
                "r/1 wr",
                "r/8 wr",
                "cost"
            );
            for name in DeviceProfile::PRESETS.split(", ") {
                let p = DeviceProfile::preset(name).expect("listed presets exist");
                println!(
                    "{:<12} {:>10} {:>10} {:>9} {:>9} {:>5} {:>8.3} {:>8.3} {:>7.3}",
                    p.name,
                    p.read_latency_us,
                    p.write_latency_us,
                    p.read_bandwidth_gb_s,
                    p.write_bandwidth_gb_s,
                    p.parallelism,
                    p.read_share_one_writer,
                    p.read_share_eight_writers,
                    p.cost_per_gb
                );
            }
            Ok(())
        }
        ProfileCommand::Measure(args) => crate::measure::run(&args),
        ProfileCommand::Show { name } => {
            let profile = DeviceProfile::load(&name).map_err(anyhow::Error::msg)?;
            print!("{}", profile.to_toml());
            Ok(())
        }
    }
}
