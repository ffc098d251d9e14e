//! The `tiercache` command as a library: each subcommand's options and its run function, so
//! the command line and the Python package (`tiercache-py`) run the same code.

pub mod bench;
pub mod cache_args;
pub mod crashtest;
pub mod demo;
pub mod experiment;
pub mod lab;
pub mod measure;
pub mod metrics;
pub mod model;
pub mod plot;
pub mod profile;
pub mod progress;
pub mod run_options;
pub mod serve;
pub mod sim;
pub mod sweep;
pub mod timed;
pub mod trace;
pub mod ycsb;

use std::path::PathBuf;

use clap::Args;

/// A subcommand's options parsed from words, as the command line `NAME WORDS...` would be (for
/// the lab, which runs subcommands with options it shows).
pub fn args_from<A: Args, I: IntoIterator<Item = String>>(
    name: &'static str,
    words: I,
) -> anyhow::Result<A> {
    let command = A::augment_args(clap::Command::new(name));
    let words = std::iter::once(name.to_string()).chain(words);
    let matches = command.try_get_matches_from(words).map_err(|e| anyhow::anyhow!("{e}"))?;
    A::from_arg_matches(&matches).map_err(|e| anyhow::anyhow!("{e}"))
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

/// An error as one line, its causes after colons. A cause whose text the error before it
/// already ends with is not repeated (errors that print their source, as an I/O error inside a
/// trace error, would otherwise show it twice).
pub fn error_message(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if text.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text += ": ";
        }
        text += &part;
    }
    text
}
