//! A simulation run as a library: how to read a trace ([`TraceArgs`]), how a run goes and
//! reports ([`run_options::RunArgs`]), one run of a policy stack over a trace or many cells
//! over one trace read once ([`run`], [`options`]), and virtual time on modeled devices
//! ([`timed`]). The command line (`tiercache sim`, `run`, `sweep`) and the Python package call
//! the same code here; printing and progress bars are the command line's.

use std::path::PathBuf;

use clap::Args;

pub mod options;
pub mod run;
pub mod run_options;
pub mod timed;

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
