//! The `tiercache` command as a library: each subcommand's options and its run function, so
//! the command line and the Python package (`tiercache-py`) run the same code.

pub mod bench;
pub mod cache_args;
pub mod crashtest;
pub mod demo;
pub mod experiment;
pub mod failures;
pub mod lab;
pub mod measure;
pub mod metrics;
pub mod model;
pub mod mrc;
pub mod nbd;
pub use tiercache_lab::plot;
pub mod profile;
pub mod progress;
pub mod serve;
pub mod sim;
pub mod slots;
pub mod sweep;
pub mod timed;
pub mod tls;
pub mod trace;
pub mod ycsb;
pub mod ycsb_slatedb;

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

pub use tiercache_run::{error_message, run_options, TraceArgs};
