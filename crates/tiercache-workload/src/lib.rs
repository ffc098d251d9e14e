//! Where requests come from: readers for real block and object traces (streaming, constant
//! memory, transparently decompressed), a block view that splits byte ranges into aligned
//! blocks, writers, and seeded synthetic generators (uniform, Zipf, YCSB core workloads...).
//!
//! Readers never panic on bad input: a malformed record is a [`TraceError`] that names the file,
//! the line or record number, and the field; with `skip_bad` such records are counted and
//! skipped instead.

pub mod block;
pub mod error;
pub mod formats;
#[doc(hidden)]
pub mod fuzz;
pub mod gen;
pub mod open;
pub mod reader;
pub mod source;
pub mod stats;
pub mod writer;

pub use block::BlockView;
pub use error::TraceError;
pub use formats::csv::CsvSpec;
pub use formats::TraceFormat;
pub use reader::{TraceInfo, TraceOptions, TraceReader};
